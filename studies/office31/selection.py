"""Which iterate the paper's compared rows report. The official code of the papers those rows are cited from (CDAN's
train_image.py, PADA's train_pada.py) evaluates on the labelled target every few hundred iterations and keeps the
best: a model selected with target labels. The suite reports the last iterate. A departure whose runs log the target
accuracy during training (``log_accuracy_every``: a diagnosis only, the training is unchanged) gives both per run, so
the cited selection can be set beside the last iterate and the paper's number.

The best logged accuracy reads the target labels to pick an iterate: it is printed here as a diagnosis of the paper's
numbers, labelled so, and never enters a table.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from dmp.tables.render import row_label
from studies.records import records, task_of

MIN_LOGGED = 3
"""A run enters only with at least this many logged evaluations (a run without the log has none)."""


def logged_runs(results: Path, dataset: str, setting: str) -> pd.DataFrame:
    """One row per finished run of ``setting`` under ``results`` whose record holds at least :data:`MIN_LOGGED`
    logged target accuracies: method, task, seed, ``last`` (the reported accuracy, the last iterate), ``best`` (the
    largest logged accuracy) and ``best_epoch`` (the epoch it was logged at, the first of equal ones)."""
    rows = []
    for _, m in records(Path(results) / "runs" / dataset / setting, "*/*/*/*/seed*/metrics.json"):
        log = m.get("accuracy_log") or []
        if len(log) < MIN_LOGGED:
            continue
        best = max(log, key=lambda e: e["accuracy"])  # max keeps the first of equal values
        rows.append({"method": m["config"]["method"], "task": task_of(m["config"]), "seed": m["config"]["seed"],
                     "last": m["accuracy"], "best": best["accuracy"], "best_epoch": best["epoch"]})
    return pd.DataFrame(rows, columns=["method", "task", "seed", "last", "best", "best_epoch"])


def selection_table(runs: pd.DataFrame, paper: pd.DataFrame, table: str, tasks: list[str]) -> list[str]:
    """Per method with every task logged: the last iterate, the best logged iterate and the paper's number per task
    and on average (the mean over tasks of the per-task means over seeds), and the median epoch of the best.
    ``paper``: the comparison frame's cells (``row``, ``column``, ``paper``; ``Mean`` for the average)."""
    lines = ["| row | " + " | ".join(tasks) + " | Avg | best at epoch (median) |",
             "|---|" + "---|" * (len(tasks) + 2)]
    for method, part in runs.groupby("method", sort=False):
        by_task = part.groupby("task")[["last", "best"]].mean()
        if not set(tasks) <= set(by_task.index):
            continue
        label = row_label(table, method)
        for key, what in (("last", "last iterate (reported)"), ("best", "best logged iterate (target labels)")):
            cells = [f"{by_task.loc[t, key]:.1f}" for t in tasks]
            extra = f"{part['best_epoch'].median():.1f}" if key == "best" else ""
            lines.append(f"| {label}, {what} | " + " | ".join(cells)
                         + f" | {by_task.loc[tasks, key].mean():.1f} | {extra} |")
        mine = paper[paper["row"] == method].set_index("column")["paper"]
        if mine.notna().any():
            cells = ["–" if pd.isna(mine.get(t)) else f"{mine[t]:.1f}" for t in [*tasks, "Mean"]]
            lines.append(f"| {label}, paper (reported) | " + " | ".join(cells) + " | |")
    return lines if len(lines) > 2 else []


def selection_lines(results: Path, dataset: str, table: str, comp: pd.DataFrame) -> list[str]:
    """The section for one departure's ``table``: nothing where no run logged its target accuracy."""
    runs = logged_runs(results, dataset, table)
    if runs.empty:
        return []
    tasks = [c for c in dict.fromkeys(comp["column"]) if c != "Mean"]
    lines = selection_table(runs, comp, table, tasks)
    if not lines:
        return []
    return ["Which iterate: the last (what the suite and every table report) beside the best of the target accuracies "
            "logged during the same runs, the model the cited papers' official code keeps (it evaluates on the "
            "labelled target every few hundred iterations and keeps the best). The best reads target labels to pick "
            "the iterate: a diagnosis of the paper's numbers, never a result "
            f"({len(runs)} runs, {_seeds(runs)}).", "", *lines, ""]


def _seeds(runs: pd.DataFrame) -> str:
    seeds = sorted(runs["seed"].unique())
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))
