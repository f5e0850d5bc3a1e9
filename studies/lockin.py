"""The lock-in study: the partial setting's lock-in on the demo, and the off-by-default stabiliser of the class
weights (``mean_prediction_momentum``).

In the partial setting DMP weights the intra-class term by the mean target prediction ``pi`` of the last refresh (Eq.
ClassWeight). When a refresh falls on an epoch where two near classes of the target trade places, the weight of the
losing class drops, the Top-1 intra-class term sharpens the current pseudo-labels and the class can be lost for good:
a *collapse*, counted here as a target class whose accuracy at the end is at most ``COLLAPSE`` %. This study runs the
demo's two partial tasks for 10 seeds with the paper's ``pi`` (momentum 0) and with ``pi`` averaged across refreshes
(momentum 0.5 and 0.9, the same for every task and seed; nothing chosen on the results), all with one pre-trained CNN,
one data version and one code version; and source-only on the same seeds, whose confusions show the near class pairs.

Runs: ``results/evidence/runs/lockin/demo/partial/<task>/<method>/<variant>/seed<k>/`` (metrics.json: config, seed,
git commit, dataset version, weights sha256).
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from studies.records import EVIDENCE, records, task_of
from studies.runs import DEMO, run

STUDY = "lockin"
TASKS = DEMO
SEEDS = range(10)
VARIANTS = {"m0": 0.0, "m0.5": 0.5, "m0.9": 0.9}
"""Variant folder -> mean_prediction_momentum (m0: the paper's pi)."""


COLLAPSE = 10.0
"""A target class whose final accuracy is at most this (%) counts as collapsed."""


def runs() -> list:
    """Every run of the study: source-only and DMP at each momentum, on both tasks and every seed."""
    out = []
    for task, seed in itertools.product(TASKS, SEEDS):
        out.append(run(STUDY, "demo", "partial", task, "source_only", seed, "m0"))
        out += [run(STUDY, "demo", "partial", task, "dmp", seed, variant, mean_prediction_momentum=m)
                for variant, m in VARIANTS.items()]
    return out


def collect(root: Path = EVIDENCE) -> list[dict]:
    """The study's runs under ``root``, one dict each: task, method, momentum, seed, accuracy, the collapsed target
    classes, the class names, the confusion matrix and the versions."""
    rows = []
    for _, m in records(root / STUDY, "demo/partial/*/*/*/seed*/metrics.json"):
        c = m["config"]
        per_class = m["per_class_accuracy"]
        low = {k: v for k, v in per_class.items() if v is not None and v <= COLLAPSE}
        rows.append(dict(task=task_of(c), method=c["method"],
                         momentum=float(c.get("mean_prediction_momentum", 0.0)), seed=c["seed"],
                         accuracy=m["accuracy"], collapsed=sorted(low), classes=m["class_names"],
                         confusion=np.array(m["confusion_matrix"], dtype=float), version=m["dataset_version"],
                         weights=m.get("weights_sha256") or "", code=m.get("code_version", "")[:12],
                         commit=m["git_commit"][:10]))
    return rows


def near_pairs(rows: list[dict], top: int = 3) -> list[tuple[float, str, str]]:
    """The largest off-diagonal confusion rates of source-only on the target: (rate, true, predicted), over all seeds
    and both tasks (the demo's tasks share their classes)."""
    so = [r for r in rows if r["method"] == "source_only"]
    if not so:
        return []
    cm = sum(r["confusion"] for r in so)
    rate = cm / np.maximum(cm.sum(1, keepdims=True), 1)
    np.fill_diagonal(rate, 0)
    names = so[0]["classes"]
    order = np.dstack(np.unravel_index(np.argsort(-rate, axis=None, kind="stable"), rate.shape))[0][:top]
    return [(float(rate[i, j]), names[i], names[j]) for i, j in order if rate[i, j] > 0]


def section(root: Path = EVIDENCE) -> list[str]:
    """The study's section of docs/evidence.md (no runs: no lines)."""
    rows = collect(root)
    dmp = [r for r in rows if r["method"] == "dmp"]
    if not dmp:
        return []
    prov = (f"Dataset `demo` versions {', '.join(sorted({r['version'] for r in rows}))} (one per task: the lists a "
            f"run reads); weights sha256 "
            f"{', '.join(sorted({r['weights'][:12] for r in rows}))}; code versions "
            f"{', '.join(sorted({r['code'] for r in rows}))}; commits {', '.join(sorted({r['commit'] for r in rows}))}; "
            f"{len(rows)} runs.")
    lines = ["## The partial setting's lock-in and the class weights' momentum (demo)", "",
             "`snakemake study_lockin` (studies/lockin.py says what it runs): DMP in the demo's partial tasks, "
             f"seeds {min(SEEDS)}-{max(SEEDS)}, with the paper's class weights (`mean_prediction_momentum` 0: `pi` is "
             "the mean target prediction of the last refresh, Eq. ClassWeight) and with `pi` averaged across "
             "refreshes (`pi <- m pi_previous + (1 - m) pi_pass`); a run *collapses* when a target class ends at "
             f"{COLLAPSE:g} % or less. The same pre-trained CNN, data and code for every row. "
             + prov, "",
             "| task | mean_prediction_momentum | accuracy (mean ± std) | min | collapsed runs | collapsed classes |",
             "|---|---|---|---|---|---|"]
    for task in sorted({r["task"] for r in dmp}, reverse=True):
        for m in sorted({r["momentum"] for r in dmp}):
            part = [r for r in dmp if r["task"] == task and r["momentum"] == m]
            acc = np.array([r["accuracy"] for r in part])
            hit = [r for r in part if r["collapsed"]]
            classes = sorted({c for r in hit for c in r["collapsed"]})
            lines.append(f"| {task} | {m:g}{' (paper)' if m == 0 else ''} | {acc.mean():.1f} ± "
                         f"{acc.std(ddof=1) if len(acc) > 1 else 0:.1f} | {acc.min():.1f} | {len(hit)} of {len(part)} | "
                         f"{', '.join(classes) or '–'} |")
    total = {m: (sum(bool(r["collapsed"]) for r in dmp if r["momentum"] == m),
                 sum(1 for r in dmp if r["momentum"] == m)) for m in sorted({r["momentum"] for r in dmp})}
    from scipy.stats import fisher_exact
    k0, n0 = total.get(0.0, (0, 0))
    tests = {m: fisher_exact([[k0, n0 - k0], [k, n - k]])[1] for m, (k, n) in total.items() if m != 0 and n0}
    lines += ["", "Collapsed runs over both tasks: " + "; ".join(
        f"momentum {m:g}: {k} of {n}" + (f" (against the paper's: Fisher's exact test p = {tests[m]:.2f})"
                                         if m in tests else "") for m, (k, n) in total.items()) + "."]
    lines += ["", "`mean_prediction_momentum` stays 0 by default: Eq. ClassWeight's `pi` is \"the mean value of the "
              "target prediction P^t\" of the pass; the collapse counts above are read with their p-values (the "
              "momenta were fixed before the runs, the same for every task and seed)."]
    pairs = ", ".join(f"{a} -> {b} {100 * r:.1f} %" for r, a, b in near_pairs(rows))
    if pairs:
        lines += ["", f"Source-only on the same seeds confuses, on the target (true -> predicted): {pairs}."]
    return lines + [""]
