"""Reading the runs behind a figure: ``metrics.json`` (checked as the tables check it: a finished run of the run
the figure expects, including a variant's trainer settings), ``features.npz`` and ``log.csv``.  Nothing here
raises for a missing or unusable run: it returns None and records a note, and the figure shows a gap; a log.csv
with a row that is not all numbers is refused naming its file and line (:meth:`RunReader.log`)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from dmp.metrics import read_metrics
from dmp.suite import RUN_KEYS, Run, variant_values


def rel(run: Run) -> str:
    """The run folder relative to the results folder (``runs/...``); ``seed*`` for a run on every seed (seed None):
    the CSVs' ``run`` column."""
    if run.seed is None:
        return run.with_seed(0).folder("")[1:-len("seed0")] + "seed*"
    return run.folder("")[1:]


def _log_problem(row: dict) -> str | None:
    """Why a log.csv row (csv.DictReader's: extra values under None, missing ones None) is not all numbers."""
    if None in row or None in row.values():
        return "another number of values than the header's columns"
    for key, value in row.items():
        try:
            float(value)
        except ValueError:
            return f"{key} {value!r} is not a number"
    return None


class RunReader:
    """Reads runs under ``results`` for one figure; :attr:`notes` collects, per missing or skipped run folder,
    why it is not in the figure."""

    def __init__(self, suite, results: str):
        self.suite, self.results = suite, str(results)
        self.notes: dict[str, str] = {}

    def _note(self, run: Run, why: str):
        self.notes[run.folder("")[1:]] = why

    def metrics(self, run: Run) -> dict | None:
        """metrics.json of ``run`` (seed set) if it is a finished run of that run, else None (noted)."""
        expected = {k: v for k, v in self.suite.run_config(run).items() if k in RUN_KEYS}
        expected.update(variant_values(run.variant))
        metrics, why = read_metrics(run.metrics_path(self.results), expected, ())
        if metrics is None:
            self._note(run, why or "no finished run")
        return metrics

    def seeds(self, run: Run, seeds) -> dict[int, dict]:
        """``{seed: metrics}`` of the finished seeds of ``run``."""
        out = {}
        for seed in seeds:
            m = self.metrics(run.with_seed(seed))
            if m is not None:
                out[seed] = m
        return out

    def features(self, run: Run) -> dict | None:
        """features.npz of a finished run (arrays by name), else None (noted)."""
        metrics = self.metrics(run)
        if metrics is None:
            return None
        path = Path(run.folder(self.results)) / "features.npz"
        if not path.exists():
            self._note(run, "finished, but no features.npz (trained with save_features=0 or older code)")
            return None
        try:
            with np.load(path) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            self._note(run, f"features.npz unreadable ({type(exc).__name__})")
            return None

    def log(self, run: Run) -> list[dict] | None:
        """log.csv rows (iteration and loss terms as floats) of a finished run, else None (noted). A row that is
        not all numbers (a value that is no number, or another number of values than the header's) is no gap to
        leave: ValueError names the file and line (the trainer writes only numbers there)."""
        path = Path(run.folder(self.results)) / "log.csv"
        if not path.exists():
            self._note(run, "finished, but no log.csv")
            return None
        rows = []
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            for row in reader:
                bad = _log_problem(row)
                if bad:
                    raise ValueError(f"{path} line {reader.line_num}: {bad}")
                rows.append({k: float(v) for k, v in row.items()})
        return rows

    def note_lines(self) -> list[str]:
        return [f"{path}: {why}" for path, why in sorted(self.notes.items())]
