"""The team file's TOML, parsed once per version of the file.  tomllib (and the typing module
it imports) is 6 ms of every say, send and status; JSON is read by C code the
commands load anyway.  ``.state/.team-toml.<file name>.json`` holds what
tomllib returned with the file's device, inode, mtime, ctime (which no one can
set back), size and path; it is used only while they all match (checked before the file is read, so a change after
that gives another stamp), written only where ``.state/`` already is (a team
that was never brought up is just parsed), and only through the state files'
rules (0600, no link, temporary file and rename).  Every check of the team
file runs on what is read back, as on what tomllib returns.
"""

from __future__ import annotations

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


def read(cache: Path, stamp: str) -> dict[str, Any] | None:
    import json

    from fabrikito.base import statedir
    from fabrikito.base.errors import StateFileError

    try:
        raw = statedir.read_plain(cache)
        saved = json.loads(raw) if raw else None
    except (OSError, StateFileError, ValueError, RecursionError):
        return None
    if not isinstance(saved, dict) or saved.get("stamp") != stamp or not isinstance(saved.get("toml"), dict):
        return None
    data: dict[str, Any] = saved["toml"]
    return data


def write(cache: Path, stamp: str, data: dict[str, Any]) -> None:
    import json

    from fabrikito.base import statedir
    from fabrikito.base.errors import StateFileError

    if not cache.parent.is_dir() or cache.parent.is_symlink():
        return
    try:
        text = json.dumps({"stamp": stamp, "toml": data}, ensure_ascii=False)  # dates and times are not JSON
        statedir.write_atomic(cache, text.encode("utf-8", "surrogatepass"))
    except (OSError, StateFileError, TypeError, ValueError, RecursionError):
        pass  # parsed from the TOML again next time
