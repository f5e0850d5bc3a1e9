"""Per-cell aggregation over seeds with pandas: read each run's metrics.json, check it, pick the cell's value, and
reduce to mean, sample std (ddof=1) and the number of seeds that finished.

A metrics.json is used only if it is a result of the run the table expects (:func:`dmp.metrics.read_metrics`); any
other file is skipped, and the table's footnote names it and says why."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from dmp.metrics import lookup, read_metrics
from dmp.suite import Cell, Run, Suite


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
            found[run, seed], why = read_metrics(path, suite.expected_config(run.with_seed(seed)), run_keys)
            if found[run, seed] is not None:  # a run of data that is no longer the data in place: not ours to print
                why = suite.data_changed(run.with_seed(seed), found[run, seed])
                found[run, seed] = None if why else found[run, seed]
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
