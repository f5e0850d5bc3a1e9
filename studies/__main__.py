"""``python -m studies COMMAND ...``: the studies' commands.

    report                 render docs/evidence.md from the committed runs
    runs STUDY...          list the files a study's runs write (--only DATASET, --method METHOD: some of them)
    run FILE...            make one declared run (train it, or write its diagnosis): what a Snakemake job runs
    weights RECIPE         pre-train the small CNN of a recipe (demo, digits)
    weak-features SET      declare the weak-feature datasets of the demo images or of the digits (demo, digits)
    link-shared            link the developers' copies of office_caltech10 and mnist_usps
    prototypes KEY=VALUE   the prototypes diagnosis of one run on any dataset (printed)
    geometry FOLDER...     the geometry of finished runs (printed)
    office31               print the Office-31 study's section (--root DIR)
    headline               print the headline Office-31 sections
    lockin                 print the lock-in study's section
    pseudo-labels ...      one run of the pseudo-label diagnosis (--task, --method, --fraction, --seed, --set)
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {"report": "studies.evidence", "prototypes": "studies.prototypes", "geometry": "studies.geometry",
            "office31": "studies.office31.report", "headline": "studies.office31.headline",
            "pseudo-labels": "studies.office31.pseudo_label_runs", "weak-features": "studies.weak_features",
            "link-shared": "studies.shared_copies"}
"""Command -> the module whose ``main(argv)`` runs it."""


def list_runs(argv) -> int:
    """Print the file each declared run of the named studies writes, relative to the repository."""
    from studies import catalog
    ap = argparse.ArgumentParser(prog="python -m studies runs")
    ap.add_argument("study", nargs="+", choices=list(catalog.STUDIES))
    ap.add_argument("--only", action="append", help="dataset(s) to list (default: all)")
    ap.add_argument("--method", action="append", help="method(s) to list (default: all)")
    args = ap.parse_args(argv)
    for study in args.study:
        for run in catalog.declared(study):
            if (not args.only or run.config["dataset"] in args.only) and (
                    not args.method or run.config["method"] in args.method):
                print(catalog.target(run))
    return 0


def make_runs(argv) -> int:
    """Make each named declared run."""
    from studies import catalog
    ap = argparse.ArgumentParser(prog="python -m studies run")
    ap.add_argument("file", nargs="+", help="what the run writes (its metrics.json, prototypes.json or geometry.json)")
    for path in ap.parse_args(argv).file:
        catalog.make(path)
    return 0


def weights(argv) -> int:
    """Pre-train the small CNN of a recipe (and generate the demo images where absent)."""
    from studies import runs
    ap = argparse.ArgumentParser(prog="python -m studies weights")
    ap.add_argument("recipe", choices=list(runs.WEIGHT_FILES))
    print(runs.make_weights(ap.parse_args(argv).recipe))
    return 0


def lockin(argv) -> int:
    """Print the lock-in study's section."""
    from studies import lockin as study
    argparse.ArgumentParser(prog="python -m studies lockin").parse_args(argv)
    print("\n".join(study.section()))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    own = {"runs": list_runs, "run": make_runs, "weights": weights, "lockin": lockin}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in {**own, **COMMANDS}:
        print(__doc__, file=sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, rest = argv[0], argv[1:]
    if command in own:
        return own[command](rest)
    return importlib.import_module(COMMANDS[command]).main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
