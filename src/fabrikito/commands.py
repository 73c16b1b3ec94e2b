"""Handlers of the subcommands: parse nothing, print results, return exit codes.

Each handler imports the module it drives inside the function, so a command
loads only its own part of fabrikito.
"""

from __future__ import annotations

import argparse
import json


def cmd_check(args: argparse.Namespace) -> int:
    from fabrikito import check, teamfile

    team = teamfile.load(args.team)
    report = check.run(team)
    if args.json:
        print(json.dumps(check.to_json(report), indent=2, ensure_ascii=False))
    else:
        print(check.render(report))
    return report.exit_code
