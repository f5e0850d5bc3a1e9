"""Per-cell aggregation over seeds with pandas: read each run's metrics.json, pick the cell's value, and reduce
to mean, sample std (ddof=1) and the number of seeds that finished."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from dmp.suite import Cell, Suite


def read_metrics(path: Path) -> dict | None:
    """A finished run's metrics (``status == "complete"``), else None (missing, unfinished or unreadable)."""
    try:
        metrics = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return metrics if metrics.get("status") == "complete" else None


def lookup(metrics: dict, keys: tuple[str, ...]) -> float | None:
    """The number at ``keys`` in a metrics dict, None if absent or not finite."""
    value = metrics
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def seed_values(suite: Suite, cells: list[Cell], runs_root: str) -> pd.DataFrame:
    """Long table: one row per (cell, seed) with a value; derived "Mean" cells (run None) get, per seed, the mean
    over the row's other cells when that seed has all of them."""
    cache: dict[str, dict | None] = {}
    rows = []
    for i, cell in enumerate(cells):
        if cell.run is None:
            continue
        for seed in suite.seeds:
            path = cell.run.with_seed(seed).metrics_path(runs_root)
            if path not in cache:
                cache[path] = read_metrics(Path(path))
            value = lookup(cache[path], cell.value) if cache[path] is not None else None
            if value is not None:
                rows.append({"cell": i, "seed": seed, "value": value})
    long = pd.DataFrame(rows, columns=["cell", "seed", "value"])
    for i, cell in enumerate(cells):
        if cell.run is not None:
            continue
        parts = [j for j, c in enumerate(cells) if (c.block, c.row) == (cell.block, cell.row) and c.run is not None]
        sub = long[long["cell"].isin(parts)].groupby("seed")["value"].agg(["mean", "count"])
        sub = sub[sub["count"] == len(parts)]
        long = pd.concat([long, pd.DataFrame({"cell": i, "seed": sub.index, "value": sub["mean"].to_numpy()})],
                         ignore_index=True)
    return long


def aggregate(suite: Suite, cells: list[Cell], runs_root: str) -> pd.DataFrame:
    """One row per cell (in ``cells`` order): place, unit, mean, std (NaN below 2 seeds), n and expected seeds,
    and the reported-CSV key columns."""
    long = seed_values(suite, cells, runs_root)
    stats = long.groupby("cell")["value"].agg(mean="mean", std="std", n="count")
    frame = pd.DataFrame([{"block": c.block, "row": c.row, "column": c.column, "group": c.group, "unit": c.unit,
                           "derived": c.run is None, **{f"key_{k}": v for k, v in c.reported}} for c in cells])
    frame = frame.join(stats, how="left")
    frame["n"] = frame["n"].fillna(0).astype(int)
    frame["expected"] = len(suite.seeds)
    return frame
