"""Where the time of a finished suite went (``dmp suite timing RESULTS``): Snakemake's benchmark of each train job
beside the trainer's own times in its metrics.json."""
from __future__ import annotations

from pathlib import Path


def timing(results: str) -> str:
    """Where the time of a finished suite went, per job and in total: Snakemake's benchmark wall time of each
    train job vs. the trainer's own ``train_seconds`` (optimisation steps) and ``anchor_seconds`` (anchor /
    class-weight passes); the rest is Python start-up, data loading, evaluation and writing."""
    import pandas as pd
    from tabulate import tabulate

    rows = []
    for bench in sorted(Path(results, "runs").rglob("benchmark.tsv")):
        metrics_path = bench.with_name("metrics.json")
        if not metrics_path.exists():
            continue
        seconds = _timing_metrics(metrics_path)
        wall, cpu = _benchmark_seconds(bench)
        rows.append({"run": str(bench.parent.relative_to(Path(results, "runs"))), "wall_s": wall, "cpu_s": cpu,
                     **seconds, "other_s": wall - seconds["train_s"] - seconds["anchor_s"]})
    if not rows:
        raise FileNotFoundError(f"no finished run with a benchmark.tsv under {results}/runs")
    df = pd.DataFrame(rows)
    total = df[["wall_s", "cpu_s", "train_s", "anchor_s", "other_s"]].sum()
    summary = pd.DataFrame({"jobs": [len(df)], **{f"sum {k}": [round(v, 1)] for k, v in total.items()},
                            "mean wall_s/job": [round(df["wall_s"].mean(), 1)],
                            "other share": [f"{total['other_s'] / total['wall_s']:.0%}"]})
    return tabulate(summary, headers="keys", tablefmt="github", showindex=False)


def _number(text, where: str) -> float:
    """A finite number >= 0 (a time in seconds) or a ValueError naming ``where``."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not (isinstance(text, (str, int, float)) and not isinstance(text, bool) and 0 <= value < float("inf")):
        raise ValueError(f"{where} = {str(text)[:40]!r} is not a time in seconds (a finite number >= 0)")
    return value


def _benchmark_seconds(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the last row of Snakemake's ``benchmark.tsv`` (header ``s ... cpu_time``); a damaged
    file names its line and column."""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    header = lines[0].split("\t") if lines else []
    if "s" not in header or len(lines) < 2:
        raise ValueError(f"{path}: not a Snakemake benchmark file (a header with column 's' and a row of times); "
                         f"delete it, Snakemake writes it again with the job")
    row = lines[-1].split("\t")
    if len(row) != len(header):
        raise ValueError(f"{path} line {len(lines)}: {len(row)} fields, the header has {len(header)}")
    cells = dict(zip(header, row))
    wall = _number(cells["s"], f"{path} line {len(lines)} column 's'")
    cpu = (_number(cells["cpu_time"], f"{path} line {len(lines)} column 'cpu_time'") if cells.get("cpu_time", "NA")
           not in ("NA", "-", "") else float("nan"))
    return wall, cpu


def _timing_metrics(path: Path) -> dict:
    """``train_seconds`` / ``anchor_seconds`` of a run's metrics.json; a damaged file names the file and key."""
    import json as _json

    try:
        metrics = _json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a metrics file (cut off or corrupt: {exc})") from None
    if not isinstance(metrics, dict):
        raise ValueError(f"{path} holds a JSON {type(metrics).__name__}, not a run's metrics (an object)")
    return {f"{k}_s": _number(metrics.get(f"{k}_seconds"), f"{path} key '{k}_seconds'") for k in ("train", "anchor")}

