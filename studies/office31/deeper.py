"""The deeper fine-tune of the Office-31 study on the six tasks (stages 5 and 6 of the backbone fine-tuned with the
head, 20 stored crops per image): its table beside the paper's, the gains, what changes against the head-only form,
what the target batches' BatchNorm statistics give, and the target accuracy during training where a run measured
it; then the readings of :mod:`studies.office31.adapts`, :mod:`studies.office31.terms` and
:mod:`studies.office31.pseudo_labels` on the same form."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from dmp.metrics import load_record
from studies.office31.adapts import by_what_adapts
from studies.office31.common import (DEEPER, DEEPER_DATASET, METHODS, STUDY, TASKS, counted, gain_table, provenance,
                                     six_task_seeds, study_table)
from studies.office31.pseudo_labels import PSEUDO, pseudo_label_check
from studies.office31.terms import ablations_by_bn, class_weight_check, ds_by_depth

DEEPER_METHODS = {"source_only": "Source only", "source_only_bn": "Source only, BN sees target",
                  **{m: name for m, name in METHODS.items() if m != "source_only"}}


def deeper_section(dep: pd.DataFrame, paper: pd.DataFrame, vanilla: dict, study: pd.DataFrame,
                   root: Path = STUDY) -> list[str]:
    """The deeper fine-tune (:data:`DEEPER`) on the six tasks, on the seeds whose source-only ran all six: the table
    beside the paper's, the gains, what changes against the study's head-only form (``vanilla``: its per-seed
    averages, :func:`study_table`; ``study``: its runs), source-only by what adapts, and the target accuracy during
    training where a run measured it (``root``: the study's folder, where the pseudo-label diagnosis lives)."""
    runs = dep[dep["form"] == DEEPER] if len(dep) else dep
    seeds = six_task_seeds(runs)
    adapts = by_what_adapts(dep, study, paper)
    if not seeds and not adapts:
        return []
    lines = ["### The deeper fine-tune on the six tasks", ""]
    if seeds:
        runs = runs[runs["seed"].isin(seeds)]
        table, avgs = study_table(runs, paper, DEEPER_METHODS)
        gains = gain_table(avgs, paper, DEEPER_METHODS)
        lines += [f"The departure `{DEEPER}` (the last row above) on every task, seed{'s' if len(seeds) > 1 else ''} "
                  f"{', '.join(map(str, seeds))}, the same preset and schedule, run through the suite: the dataset "
                  f"`{DEEPER_DATASET}` is the second block of config/office31_lite_t128.yaml's vanilla table (its table "
                  "in `results/office31_lite/tables/vanilla.md`, where a run still missing prints as a dash). "
                  + provenance(runs), "", *table, "",
                  *(["Gains over source-only (Avg of the 6 tasks, per seed):", "", *gains, ""] if gains else []),
                  *_deeper_reading(avgs, vanilla, paper), *_statistics_share(avgs, paper)]
    return (lines + adapts + ablations_by_bn(dep, paper) + ds_by_depth(dep, paper) + class_weight_check(dep, paper)
            + pseudo_label_check(paper, root / PSEUDO) + (trajectory(runs) if seeds else []))


def _deeper_reading(deep: dict, head: dict, paper: pd.DataFrame) -> list[str]:
    """Each method's Avg and gain in the deeper form against the study's head-only form, on the seeds both forms and
    source-only ran (named where they are not the first row's)."""
    if "source_only" not in deep or deep["source_only"][1] is None or "source_only" not in head:
        return []
    parts, first = [], None
    for method in METHODS:
        if method not in deep or deep[method][1] is None or method not in head or head[method][1] is None:
            continue
        d, h = deep[method][1], head[method][1]
        seeds = sorted(set(d.index) & set(h.index) & set(deep["source_only"][1].index))
        first = seeds if first is None else first
        name = METHODS[method]
        if seeds != first:    # a method that ran fewer seeds: read on its own seeds, named
            name += f" (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"
        text = f"{name} {h[seeds].mean():.1f} -> {d[seeds].mean():.1f}"
        if method != "source_only":
            dg = (d[seeds] - deep["source_only"][1][seeds]).mean()
            hg = (h[seeds] - head["source_only"][1][seeds]).mean()
            pg = paper.loc[method, "Avg"] - paper.loc["source_only", "Avg"]
            text += f" (gain {hg:+.1f} -> {dg:+.1f}, paper {pg:+.1f})"
        parts.append(text)
    return [f"**Head-only against the deeper fine-tune** (Avg of the 6 tasks, the same seeds): {'; '.join(parts)}.",
            ""]


TERMS = {"L_DS (its discriminative structure loss)": "dmp_no_ds", "L_AL (its alignment loss)": "dmp_no_al"}
"""DMP's two terms and the ablation that drops each: a term's share is DMP minus that ablation."""


def _statistics_share(avgs: dict, paper: pd.DataFrame) -> list[str]:
    """Each method's gain over source-only split in two, on the seeds where source-only whose BatchNorm layers also see
    the target batches (``source_only_bn``: source-only's weight updates, the target batches' statistics) ran the six
    tasks: that row minus source-only (what the statistics alone give) plus the method minus that row (what its
    losses add), per seed, each method on the seeds it ran too; then DMP's two terms, DMP minus the ablation without
    each (on every seed both ran the six tasks), beside the paper's."""
    so, bn = (avgs.get(m, (None, None))[1] for m in ("source_only", "source_only_bn"))
    if so is None or bn is None or not (seeds := sorted(set(so.dropna().index) & set(bn.dropna().index))):
        return []
    parts = []
    for method, name in METHODS.items():
        avg = avgs.get(method, (None, None))[1]
        if method == "source_only" or avg is None or (avg := avg.reindex(seeds).dropna()).empty:
            continue
        s = list(avg.index)
        pg = paper.loc[method, "Avg"] - paper.loc["source_only", "Avg"]
        parts.append(f"{name} {(avg - so[s]).mean():+.1f} ({(bn[s] - so[s]).mean():+.1f} statistics, "
                     f"{(avg - bn[s]).mean():+.1f} losses{'' if s == seeds else ', seed ' + ', '.join(map(str, s))}; "
                     f"paper {pg:+.1f})")
    terms = []
    for term, ablation in TERMS.items():
        full, part = (avgs.get(m, (None, None))[1] for m in ("dmp", ablation))
        if full is None or part is None or (diff := (full - part).dropna()).empty:
            continue
        terms.append(f"{term} {diff.mean():+.1f} (seed{'s' if len(diff) > 1 else ''} "
                     f"{', '.join(map(str, diff.index))}; paper {paper.loc['dmp', 'Avg'] - paper.loc[ablation, 'Avg']:+.1f})")
    text = (f"**What the target batches' statistics give** (Avg of the 6 tasks, seed{'s' if len(seeds) > 1 else ''} "
            f"{', '.join(map(str, seeds))}): source-only whose fine-tuned BatchNorm layers also see the target batches "
            f"(`source_only_bn`, source-only's weight updates) is {(bn[seeds] - so[seeds]).mean():+.1f} above "
            "source-only; every method here passes the target batches through those layers, so its gain over "
            "source-only is that share plus what its losses add over `source_only_bn`: " + "; ".join(parts) + ".")
    if terms:
        text += " DMP's terms, DMP minus the ablation without each: " + "; ".join(terms) + "."
    return [text, ""]


def trajectory(runs: pd.DataFrame) -> list[str]:
    """Target accuracy during training, for the runs that measured it (``log_accuracy_every``; target labels are
    read for this diagnosis only, never to choose a model): per run its first measurement, its peak and its last."""
    rows = []
    for file, method, task, seed in zip(runs["file"], runs["method"], runs["task"], runs["seed"]):
        m = load_record(file)
        log = [r for r in m.get("accuracy_log") or [] if r["iteration"] > 0]     # iteration 0: the untrained head
        if len(log) < 2:
            continue
        peak = max(log, key=lambda r: r["accuracy"])
        rows.append(dict(method=method, task=task, seed=seed, first=log[0], peak=peak, last=m["accuracy"]))
    if not rows:
        return []
    lines = ["| run | task | seed | first measured (epoch) | peak (epoch) | last iterate | last - peak |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (list(DEEPER_METHODS).index(r["method"]), TASKS.index(r["task"]), r["seed"])):
        lines.append(f"| {DEEPER_METHODS[r['method']]} | {r['task']} | {r['seed']} | {r['first']['accuracy']:.1f} "
                     f"({r['first']['epoch']:.1f}) | {r['peak']['accuracy']:.1f} ({r['peak']['epoch']:.1f}) | "
                     f"{r['last']:.1f} | {r['last'] - r['peak']['accuracy']:+.1f} |")
    drop = pd.DataFrame([dict(method=r["method"], drop=r["last"] - r["peak"]["accuracy"]) for r in rows])
    mean = drop.groupby("method")["drop"].agg(["mean", "size"])
    return ["Target accuracy during training (measured every `log_accuracy_every` iterations for this diagnosis "
            "only; every table keeps the last iterate, no target label chooses anything):", "", *lines, "",
            "Last iterate against the run's own peak, mean over its tasks: " + "; ".join(
                f"{DEEPER_METHODS[k]} {v['mean']:+.1f} ({counted(int(v['size']), 'run')})" for k, v in mean.iterrows()) + ".", ""]
