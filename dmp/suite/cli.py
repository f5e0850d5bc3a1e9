"""``dmp suite {prepare,timing}`` (also ``python -m dmp.suite ...``): the train rule's ``prepare`` before the trainer,
and where the time of a finished suite went."""
from __future__ import annotations

import re
import sys

from ..commands import command_main
from .records import prepare, removed_note
from .signature import ABSENT_DATA, SIGNATURE_RE, absent_data_error
from .timing import timing


def add_subparsers(sub) -> None:
    """Adds ``dmp suite {prepare,timing}`` (also ``python -m dmp.suite ...``)."""
    suite = sub.add_parser("suite", help="helpers of the Snakemake suite (stale checkpoints, where the time went)",
                           description="Helpers of the Snakemake suite (docs/workflow.md): the train rule calls "
                           "`prepare` before the trainer, so a resumed run never mixes code or arguments; `timing` "
                           "says where the time of a finished suite went.")
    suite.set_defaults(func=_run)
    sub = suite.add_subparsers(dest="suite_command", required=True, metavar="COMMAND")
    p = sub.add_parser("prepare", help="drop a stale checkpoint from an unfinished run's folder before (re)starting "
                                       "the trainer (a finished run is refused)")
    p.add_argument("run_dir", help="the run's folder")
    p.add_argument("signature", help="the run's code and arguments signature (the train rule's); absent-data:NAME "
                   "(dataset NAME not in place when Snakemake planned the job) is refused, naming what is missing")
    p.add_argument("--log", default=None, help="the train job's log: emptied (then holding what was removed) once "
                   "the folder is this job's; a refusal (the folder in use) goes to stderr, never into it")
    p = sub.add_parser("timing", help="summarise where the time of the finished train jobs went")
    p.add_argument("results", help="the suite's results folder (e.g. results/demo)")


def main(argv=None):
    """``python -m dmp.suite ARGV``: the same as ``dmp suite ARGV``."""
    command_main("suite", add_subparsers, argv)


def _run(args):
    if args.suite_command == "timing":
        print(timing(args.results))
    elif args.signature.startswith(ABSENT_DATA):  # the run's dataset is not in place: the folder stays as it is
        raise ValueError(absent_data_error(args.signature))
    elif not SIGNATURE_RE.fullmatch(args.signature):
        raise ValueError(f"signature {args.signature!r}: expected the train rule's 16 hex digits (Suite.signature)")
    elif prepare(args.run_dir, args.signature, args.log) and args.log is None:
        print(removed_note(args.run_dir, args.signature), file=sys.stderr)
