"""Where a partial run's target images go: the share of them predicted as a class the target does not have (one of
the source's 21 classes outside the target's 10 on Office-31). The negative transfer of an alignment that pulls the
target onto the source's other classes shows here directly, apart from any confusion among the target's own classes.
Read from each run's confusion matrix (rows: true classes, columns: predicted), whose all-zero rows are the classes
absent from the target."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dmp.tables.render import row_label
from studies.records import records, task_of


def absent_share(confusion) -> float:
    """Percentage of the target images predicted as a class with no target image (an all-zero row)."""
    c = np.asarray(confusion, dtype=float)
    present = c.sum(axis=1) > 0
    return float(100 * c[:, ~present].sum() / c.sum())


def shares(results: Path, dataset: str, methods: list[str]) -> pd.DataFrame:
    """One row per finished partial run of ``methods`` under ``results``: method, task, seed, share (%)."""
    rows = []
    for _, m in records(Path(results) / "runs" / dataset / "partial", "*/*/*/*/seed*/metrics.json"):
        if m["config"]["method"] in methods and m.get("confusion_matrix"):
            rows.append({"method": m["config"]["method"], "task": task_of(m["config"]), "seed": m["config"]["seed"],
                         "share": absent_share(m["confusion_matrix"])})
    return pd.DataFrame(rows, columns=["method", "task", "seed", "share"])


def absent_lines(forms: dict[str, Path], dataset: str, methods: list[str], tasks: list[str]) -> list[str]:
    """A table: per form (its name -> its results folder) and method with every task, the share of the target
    predicted as an absent class per task (mean over seeds) and on average."""
    lines = []
    for form, results in forms.items():
        df = shares(results, dataset, methods)
        for method in methods:
            by_task = df[df["method"] == method].groupby("task")["share"].mean()
            if not set(tasks) <= set(by_task.index):
                continue
            lines.append(f"| {row_label('partial', method)}, {form} | "
                         + " | ".join(f"{by_task[t]:.1f}" for t in tasks) + f" | {by_task[tasks].mean():.1f} |")
    if not lines:
        return []
    return ["Where the target images go: the share (%) of them predicted as one of the classes the target does not "
            "have, from each run's confusion matrix (mean over the seeds run).", "",
            "| run | " + " | ".join(tasks) + " | Avg |", "|---|" + "---|" * (len(tasks) + 1), *lines, ""]
