"""Per-cell aggregation over seeds with pandas: read each run's metrics.json, check it, pick the cell's value, and
reduce to mean, sample std (ddof=1) and the number of seeds that finished.

A metrics.json is used only if it is a finished run (``status: complete``) of the run the table expects (its recorded
config names the same dataset, domains, setting, method, metric, seed and splits) with a finite number at every key
the table reads from it; any other file is skipped, and the table's footnote names it and says why."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from dmp.suite import Cell, Run, Suite


def read_metrics(path, expected: dict, keys) -> tuple[dict | None, str | None]:
    """``(metrics, None)`` if ``path`` holds a finished run whose recorded config matches ``expected`` (the run's
    :meth:`~dmp.suite.Suite.run_config`) with a finite number at each key path of ``keys``; ``(None, why)`` if it
    holds anything else; ``(None, None)`` if there is no file (a run not done yet)."""
    path = Path(path)
    if not path.exists():
        return None, None
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(metrics, dict):
        return None, "not a JSON object"
    if metrics.get("status") != "complete":
        return None, f"status {metrics.get('status')!r}, not 'complete'"
    config = metrics.get("config")
    if not isinstance(config, dict):
        return None, "no recorded config"
    foreign = [f"{k} {config.get(k)!r} (expected {v!r})" for k, v in expected.items() if config.get(k) != v]
    if foreign:
        return None, "a run of another config: " + ", ".join(foreign)
    bad = ["/".join(k) for k in keys if lookup(metrics, k) is None]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return None, "no finite number at " + ", ".join(bad[:3]) + more
    return metrics, None


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


def seed_values(suite: Suite, cells: list[Cell], runs_root: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """Long table: one row per (cell, seed) with a value; derived "Mean" cells (run None) get, per seed, the mean
    over the row's other cells when that seed has all of them.  Also returns the skipped files: path (relative to
    ``runs_root``) -> why."""
    keys: dict[Run, list[tuple[str, ...]]] = {}
    for cell in cells:
        if cell.run is not None:
            keys.setdefault(cell.run, []).append(cell.value)
    found, skipped = {}, {}
    for run, run_keys in keys.items():
        for seed in suite.seeds:
            path = Path(run.with_seed(seed).metrics_path(runs_root))
            found[run, seed], why = read_metrics(path, suite.run_config(run.with_seed(seed)), run_keys)
            if why:
                skipped[str(path.relative_to(runs_root))] = why
    rows = [{"cell": i, "seed": seed, "value": lookup(found[cell.run, seed], cell.value)}
            for i, cell in enumerate(cells) if cell.run is not None
            for seed in suite.seeds if found[cell.run, seed] is not None]
    long = pd.DataFrame(rows, columns=["cell", "seed", "value"])
    for i, cell in enumerate(cells):
        if cell.run is not None:
            continue
        parts = [j for j, c in enumerate(cells) if (c.block, c.row) == (cell.block, cell.row) and c.run is not None]
        sub = long[long["cell"].isin(parts)].groupby("seed")["value"].agg(["mean", "count"])
        sub = sub[sub["count"] == len(parts)]
        long = pd.concat([long, pd.DataFrame({"cell": i, "seed": sub.index, "value": sub["mean"].to_numpy()})],
                         ignore_index=True)
    return long, skipped


def aggregate(suite: Suite, cells: list[Cell], runs_root: str) -> pd.DataFrame:
    """One row per cell (in ``cells`` order): place, unit, mean, std (NaN below 2 seeds), n and expected seeds,
    ``value_key`` (the cell's key path into metrics.json, joined with "/"; for a derived Mean, the key its parts
    read) and the reported-CSV key columns.  ``attrs["skipped"]``: the metrics.json files not used (path -> why)."""
    long, skipped = seed_values(suite, cells, runs_root)
    stats = long.groupby("cell")["value"].agg(mean="mean", std="std", n="count")
    frame = pd.DataFrame([{"block": c.block, "row": c.row, "column": c.column, "group": c.group, "unit": c.unit,
                           "derived": c.run is None, "value_key": "/".join(c.value),
                           **{f"key_{k}": v for k, v in c.reported}} for c in cells])
    frame = frame.join(stats, how="left")
    frame["n"] = frame["n"].fillna(0).astype(int)
    frame["expected"] = len(suite.seeds)
    frame.attrs["skipped"] = skipped
    return frame
