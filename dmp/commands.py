"""How every command of the package runs: the plain help, the one --debug option, and an error as one line.

``dmp`` (dmp/cli.py) and the module entry points (``python -m dmp.tables``, ``python -m dmp.figures``,
``python -m dmp.suite``) parse and run their commands through :func:`dispatch`; this module imports nothing of the
package, so each entry point calls its own main without going through another.
"""
from __future__ import annotations

import argparse
import os
import sys


class PlainHelp(argparse.HelpFormatter):
    """Help as plain terminal text: the docstrings' reST literals (double backquotes) are shown as `x`."""

    def _format_text(self, text):
        return super()._format_text(text.replace("``", "`"))

    def _expand_help(self, action):
        return super()._expand_help(action).replace("``", "`")


DEBUG_HELP = "on an error, show the traceback instead of one line"


def finish(parser: argparse.ArgumentParser, top: bool = True) -> None:
    """Give every (sub)command the plain help formatter and the one --debug option: accepted before or after any
    command name (`dmp --debug tables build ...` = `dmp tables build ... --debug`)."""
    parser.formatter_class = PlainHelp
    if not top:
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                finish(child, top=False)


def error_message(exc: BaseException) -> str:
    """One line saying what went wrong.  Errors the package raises on purpose (bad config, missing data, corrupt
    checkpoint: ValueError, KeyError) and the system's (OSError: missing file, disk full, read-only folder) are
    their message; anything else (a bug, a library's failure) is prefixed with its type."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        where = [(exc.context, exc.context_mark), (exc.problem, exc.problem_mark)]
        text = f"{exc.problem_mark.name}: malformed YAML: " + ": ".join(
            f"{what} (line {mark.line + 1}, column {mark.column + 1})" for what, mark in where if what and mark)
    elif isinstance(exc, OSError) and exc.strerror:  # a rename's (atomic write's) target, not its temporary file
        name = exc.filename2 or exc.filename
        text = f"{name}: {exc.strerror}" if name else exc.strerror
    elif isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    elif isinstance(exc, (ValueError, OSError, yaml.YAMLError)) or type(exc).__module__.split(".")[0] == __name__.split(".")[0]:
        text = str(exc)  # (the package's own error classes, e.g. a weights file that does not fit, say it all)
    else:
        text = f"{type(exc).__name__}: {exc}"
        cause = exc.__cause__ or exc.__context__
        while cause is not None and not (isinstance(cause, OSError) and cause.strerror):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:  # e.g. torch.save on a full disk: RuntimeError raised while handling ENOSPC
            text = f"{error_message(cause)} ({text})"
    return " ".join(_worker_message(text).split()) or type(exc).__name__


def _worker_message(text: str) -> str:
    """A DataLoader worker's exception, re-raised in the main process as "Caught X in DataLoader worker process N.
    Original Traceback (most recent call last): ... X: message", as the single-process path gives it: the last line
    of the worker's traceback (its own ``X: message``, or the message alone for the package's errors)."""
    if "in DataLoader worker process" not in text or "Original Traceback" not in text:
        return text
    last = [line for line in text.strip().splitlines() if line.strip()][-1].strip()
    kind, sep, message = last.partition(": ")
    plain = kind.split(".")[-1] in ("ValueError", "KeyError", "OSError", "FileNotFoundError", "PermissionError")
    return message if sep and plain else last


def run_command(func, args, debug: bool = False):
    """``sys.exit(func(args))``; an exception becomes ``error: <one line>`` and exit status 2 (the traceback only
    with ``debug``); output cut short by its reader (a closed pipe) ends quietly with status 0."""
    try:
        code = func(args)
        sys.stdout.flush()  # a reader that stopped early (`dmp config --show | head -1`) is found here, not at exit
    except BrokenPipeError:  # the reader has what it wanted: no error, and nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (the exit's own flush must not fail)
        sys.exit(0)
    except Exception as exc:
        if debug:
            raise
        print(f"error: {error_message(exc)}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)


def dispatch(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Parse ``argv`` (``key=value`` words after the options are the command's overrides) and run the command it
    names with :func:`run_command`."""
    args, extra = parser.parse_known_args(argv)
    bad = [e for e in extra if "=" not in e or e.startswith("-")]
    if bad or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(bad or extra)}")
    if extra:
        args.overrides = list(args.overrides) + extra
    run_command(args.func, args, args.debug)


def command_main(command: str, add_subparsers, argv=None) -> None:
    """``python -m dmp.<command> ARGV``: the same as ``dmp <command> ARGV``, with the command's own parser
    (``add_subparsers(sub)`` adds it)."""
    parser = argparse.ArgumentParser(prog="dmp")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_subparsers(sub)
    finish(parser)
    dispatch(parser, [command, *(sys.argv[1:] if argv is None else argv)])
