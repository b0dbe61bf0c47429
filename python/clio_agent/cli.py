"""The ``clio-agent`` command of the Python package: ``clio-agent plugin check FOLDER`` loads a
plugin folder or marketplace the way an install does and fails on errors in it (exit 1), as
``clio plugin check`` does; ``--json`` prints the report as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from clio_agent.plugins import check

USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="clio-agent",
        description="CLIO's Python SDK on the command line.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    plugin = commands.add_parser("plugin", help="check plugins")
    plugin_commands = plugin.add_subparsers(dest="plugin_command", metavar="COMMAND")
    check_parser = plugin_commands.add_parser(
        "check",
        help="check a plugin folder (with ai.iowarp.clio/) or a marketplace; exit 1 on errors",
    )
    check_parser.add_argument("folder", help="the plugin folder or marketplace folder")
    check_parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.command != "plugin" or getattr(args, "plugin_command", None) != "check":
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    report = check(args.folder)
    if args.json:
        out = {
            "ok": report.ok,
            "problems": [p.__dict__ for p in report.problems],
            "flows": report.flows,
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
