"""Runs a run_code script for CLIO and reports how it ended.

Usage: main.py SCRIPT REPORT. A syntax error or an uncaught exception is written to
REPORT as JSON (``kind``, ``type``, ``message``, ``line``, ``traceback``) and the
process exits with 1; the traceback names the script ``<script>``. A ``sys.exit`` is
written as ``{"kind": "exit"}`` before the exit goes on, so that an exit code is not
taken for a signal (the sandbox reports a signal as 128 + its number).
"""

import json
import linecache
import sys
import traceback


def _report(path, report):
    with open(path, "w", encoding="utf-8") as out:
        json.dump(report, out)


def main():
    script, report = sys.argv[1], sys.argv[2]
    with open(script, encoding="utf-8") as f:
        source = f.read()
    linecache.cache["<script>"] = (len(source), None, source.splitlines(True), "<script>")
    sys.argv = ["<script>"]
    try:
        code = compile(source, "<script>", "exec")
    except (SyntaxError, ValueError) as e:
        _report(report, {
            "kind": "syntax_error",
            "type": type(e).__name__,
            "message": getattr(e, "msg", None) or str(e),
            "line": getattr(e, "lineno", None),
            "traceback": "".join(traceback.format_exception_only(type(e), e)),
        })
        sys.exit(1)
    scope = {"__name__": "__main__", "__file__": "<script>", "__builtins__": __builtins__}
    try:
        exec(code, scope)
    except SystemExit:
        try:
            _report(report, {"kind": "exit"})
        except OSError:
            pass
        raise
    except BaseException as e:
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
        line = None
        walk = tb
        while walk is not None:
            if walk.tb_frame.f_code.co_filename == "<script>":
                line = walk.tb_lineno
            walk = walk.tb_next
        _report(report, {
            "kind": "exception",
            "type": type(e).__name__,
            "message": str(e),
            "line": line,
            "traceback": "".join(traceback.format_exception(type(e), e, tb)),
        })
        sys.exit(1)


main()
