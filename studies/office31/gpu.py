"""The paper's protocol on a lent GPU (every layer fine-tuned, 224 px crops; workflow/gpu/gpu_office31.sh): source-only
and DMP per task, seed and BatchNorm mode, DMP's gain beside the paper's on that task, the cells a device command
started but did not finish, and the BatchNorm mode's effect."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from studies.office31.common import METHODS, STUDY, TASKS, provenance
from studies.records import office31_runs

GPU_RESULTS = {"train": "office31_gpu", "frozen": "office31_gpu_bnfrozen"}
"""The folders beside :data:`STUDY` where `workflow/gpu/gpu_office31.sh` runs are committed: the backbone's BatchNorm
layers training (its default) and on their ImageNet statistics (``EXTRA=backbone_bn=frozen``)."""


BN_MODES = {"train": "BatchNorm training", "frozen": "BatchNorm on ImageNet statistics"}


def gpu_section(paper: pd.DataFrame, root: Path = STUDY) -> list[str]:
    """The paper's protocol on a lent GPU (every layer fine-tuned, 224 px crops): source-only and DMP per task, seed
    and BatchNorm mode where both finished, DMP's gain beside the paper's on that task; the cells a device command
    started but did not finish (their logs under ``failed/``); the BatchNorm mode's effect where both modes ran a
    task. The GPU runs are committed beside the study's folder ``root``."""
    roots = {b: root.parent / name for b, name in GPU_RESULTS.items()}
    runs = pd.concat([office31_runs("runs/*/vanilla/*/*/G/full-full/seed*/metrics.json", where)
                      for where in roots.values()])
    if runs.empty:
        return []
    acc = {(b, m, t, s): a for b, m, t, s, a in zip(runs["bn"], runs["method"], runs["task"], runs["seed"],
                                                     runs["accuracy"])}
    cells = sorted({(b, t, s) for b, m, t, s in acc if m == "source_only"},
                   key=lambda k: (TASKS.index(k[1]), k[2], list(BN_MODES).index(k[0])))
    keys = [k for k in cells if (k[0], "dmp", *k[1:]) in acc]    # source-only and DMP both finished
    lines = ["| task | seed | backbone | source-only | DMP | DMP - source-only | paper: source-only | DMP | gain |",
             "|---|---|---|---|---|---|---|---|---|"]
    for b, t, s in cells:
        so, dmp = acc[(b, "source_only", t, s)], acc.get((b, "dmp", t, s))
        p_so, p_dmp = paper.loc["source_only", t], paper.loc["dmp", t]
        ours = "– | –" if dmp is None else f"{dmp:.1f} | {dmp - so:+.1f}"
        lines.append(f"| {t} | {s} | {BN_MODES[b]} | {so:.1f} | {ours} | {p_so:.1f} | {p_dmp:.1f} | "
                     f"{p_dmp - p_so:+.1f} |")
    logs = {(b, *_cell(f.name)): f for b, where in roots.items() for f in where.glob("failed/*.log")}
    unfinished = [f"{t} {METHODS[m]} seed {s} ({BN_MODES[b]}; {_last_step(logs[(b, m, t, s)])})" for b, m, t, s in
                  sorted(set(logs) - set(acc), key=lambda c: (TASKS.index(c[2]), c[1] != "source_only", c[3],
                                                                list(BN_MODES).index(c[0])))]
    text = ["### The paper's protocol on a lent GPU: every layer fine-tuned, 224 px", "",
            "`workflow/gpu/gpu_office31.sh` (docs/benchmarks.md): EfficientNet-Lite0 with every layer fine-tuned (0.1x "
            "lr), 224 px crops of the images resized to 256 px (`office31_256`: Office-31's 4,110 images re-encoded "
            "at that size to travel to the GPU; another dataset version than the CPU form's `office31`, so these "
            "runs are tabled on their own), Office-31's preset and schedule, the last iterate. A run's dataset version "
            "hashes the lists of the two domains it reads, so each pair of domains has a version of its own. "
            + provenance(runs)
            + f" GPU: {', '.join(sorted(set(runs['gpu']) - {''})) or 'not recorded'}.", "", *lines, ""]
    text += _gpu_averages(acc, paper)
    if unfinished:
        text += ["Started but not finished within the device command (logs under `failed/`, no result; the lease's "
                 f"timings: docs/benchmarks.md): {', '.join(unfinished)}.", ""]
    both = sorted({(t, s) for _, t, s in keys if all((b, t, s) in keys for b in BN_MODES)},
                  key=lambda k: (TASKS.index(k[0]), k[1]))
    if both:
        diff = {m: sum(acc[("train", m, t, s)] - acc[("frozen", m, t, s)] for t, s in both) / len(both)
                for m in ("source_only", "dmp")}
        text += [f"**BatchNorm training against ImageNet statistics** ({', '.join(f'{t} seed {s}' for t, s in both)}): "
                 f"source-only {diff['source_only']:+.1f} points, DMP {diff['dmp']:+.1f}.", ""]
    return text


def _gpu_averages(acc: dict, paper: pd.DataFrame) -> list[str]:
    """Per BatchNorm mode and seed: source-only's Avg where it finished all six tasks, beside the paper's; DMP's mean
    gain over source-only on the tasks where both finished, beside the paper's mean gain on those same tasks (a mean
    over fewer tasks is named by its tasks, never read as the six-task Avg)."""
    out = []
    for b, s in sorted({(b, s) for b, _, _, s in acc}, key=lambda k: (list(BN_MODES).index(k[0]), k[1])):
        so = {t: acc[(b, "source_only", t, s)] for t in TASKS if (b, "source_only", t, s) in acc}
        both = [t for t in so if (b, "dmp", t, s) in acc]
        parts = []
        if len(so) == len(TASKS):
            parts.append(f"source-only Avg of the six tasks {sum(so.values()) / len(so):.1f} (paper "
                         f"{paper.loc['source_only', 'Avg']:.1f})")
        if both:
            ours = sum(acc[(b, "dmp", t, s)] - so[t] for t in both) / len(both)
            theirs = sum(paper.loc["dmp", t] - paper.loc["source_only", t] for t in both) / len(both)
            parts.append(f"DMP's gain over source-only, mean over {', '.join(both)} ({len(both)} of {len(TASKS)} "
                         f"tasks): {ours:+.1f}, the paper's on the same tasks {theirs:+.1f}")
        if parts:
            out += [f"**{BN_MODES[b]}, seed {s}**: {'; '.join(parts)}.", ""]
    return out


def _last_step(log: Path) -> str:
    """How far a killed run got: the last iteration its ``log.csv`` (kept beside its log as ``<cell>.log.csv``)
    recorded."""
    rows = log.with_name(log.name + ".csv")
    last = rows.read_text().split()[-1].split(",")[0] if rows.is_file() else ""
    return f"logged to iteration {last}" if last.isdigit() else "no iteration logged"


def _cell(name: str) -> tuple[str, str, int]:
    """``(method, task, seed)`` of a ``failed/`` log named ``<S>-<T>_<method>_<seed>.log`` (task as ``S->T``)."""
    task, rest = name.rsplit(".log", 1)[0].split("_", 1)
    method, seed = rest.rsplit("_", 1)
    return method, task.replace("-", "->"), int(seed)
