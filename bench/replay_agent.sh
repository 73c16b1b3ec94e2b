#!/bin/bash
# A stand-in for Claude Code 2.1.316 that `up` starts like the real one (bench/bench_up.py, BENCH_REPLAY=1):
# it answers --version, draws a screen recorded from 2.1.316 (its idle, empty box: $REPLAY_SCREEN, the
# .ansi of a capture, its cursor placed where the recording's .json says), writes a session registry
# entry as 2.1.316 does (its pid, version, the --session-id up chose, idle), and then runs on as a process
# named claude that draws nothing more.  No Node start, no model: what `up` itself costs at 25 or 50 seats.
for arg in "$@"; do
  if [ "$arg" = "--version" ]; then echo "2.1.316 (Claude Code)"; exit 0; fi
done
sid=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--session-id" ]; then sid="$2"; shift; fi
  shift
done
printf '\033[H\033[2J'
mapfile -t rows < "$REPLAY_SCREEN.ansi"
last=$((${#rows[@]} - 1))
for i in "${!rows[@]}"; do
  if [ "$i" -lt "$last" ]; then printf '%s\r\n' "${rows[$i]}"; else printf '%s' "${rows[$i]}"; fi
done
meta=$(cat "$REPLAY_SCREEN.json")
x=$(sed -n 's/.*"cursor_x": *"\([0-9]*\)".*/\1/p' <<<"$meta")
y=$(sed -n 's/.*"cursor_y": *"\([0-9]*\)".*/\1/p' <<<"$meta")
printf '\033[%d;%dH' $((y + 1)) $((x + 1))
config="${CLAUDE_CONFIG_DIR:-$HOME/.claude}"
mkdir -p "$config/sessions"
printf '{"pid": %d, "version": "2.1.316", "sessionId": "%s", "status": "idle", "kind": "interactive"}' \
  $$ "$sid" > "$config/sessions/$$.json.tmp" && mv "$config/sessions/$$.json.tmp" "$config/sessions/$$.json"
stty -echo 2>/dev/null
exec -a claude sleep 3600
