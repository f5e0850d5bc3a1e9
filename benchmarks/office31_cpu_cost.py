"""The CPU cost of a suite config's runs, from what the runs themselves recorded: seconds per run (the training loop's
wall time, ``wall_seconds`` of each metrics.json) by method and task, and per table and seed (their sum), with the
seconds per iteration. Prints Markdown; reads only finished runs, so it measures what was run, on the machine named in
each run's record.

    python benchmarks/office31_cpu_cost.py [--config config/office31_lite.yaml]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from dmp.metrics import RecordError, load_record  # noqa: E402
from dmp.suite import Suite  # noqa: E402


def costs(config_path: Path) -> pd.DataFrame:
    """One row per finished run of the config's tables: table, method, task, seed, wall seconds, s/iteration,
    iterations, threads, the CPU's model name (metrics.json ``cpu``; "not recorded" for a record without it)."""
    config = yaml.safe_load(config_path.read_text())
    suite = Suite(config)
    rows, expected = [], {}
    for table in ("vanilla", "partial"):
        if table not in suite.tables:
            continue
        expected[table] = len(suite.table_runs(table)) // len(suite.seeds)   # runs of one seed
        for run in suite.table_runs(table):
            path = ROOT / run.metrics_path(suite.results)
            if not path.exists():
                continue
            try:
                m = load_record(path, ("wall_seconds", "seconds_per_iter", "iterations"))
            except RecordError as err:
                raise SystemExit(f"error: {err}") from None
            rows.append({"table": table, "method": run.method, "task": run.task, "seed": run.seed,
                         "wall_s": m["wall_seconds"], "s_per_iter": m["seconds_per_iter"],
                         "iterations": m["iterations"], "threads": m.get("threads"),
                         "cpu": (m.get("cpu") or {}).get("model", "not recorded")})
    out = pd.DataFrame(rows)
    out.attrs["expected"] = expected
    return out


def report(df: pd.DataFrame) -> str:
    if df.empty:
        return "no finished runs\n"
    per_method = df.groupby(["table", "method"], sort=False).agg(
        runs=("wall_s", "size"), wall_s_per_run=("wall_s", "mean"), s_per_iter=("s_per_iter", "mean"))
    expected = df.attrs.get("expected", {})
    complete = df.groupby(["table", "seed"]).filter(lambda g: len(g) == expected.get(g["table"].iloc[0]))
    per_table = complete.groupby(["table", "seed"]).agg(runs=("wall_s", "size"), wall_s=("wall_s", "sum"),
                                                        cpu=("cpu", lambda c: ", ".join(sorted(set(c)))))
    return "\n".join([
        "Per method (mean over its finished runs; 1 thread each):", "",
        per_method.round(3).to_markdown(), "",
        "Per table and seed where every run finished (sum of the runs' wall seconds, one core):", "",
        per_table.round(0).to_markdown() if len(per_table) else "(none complete)", ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "office31_lite.yaml"), help="suite config")
    args = ap.parse_args(argv)
    print(report(costs(Path(args.config))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
