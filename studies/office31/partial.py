"""The Office-31 study's partial setting on the same stored trunk (31 source classes, the target's 10 shared with
Caltech-256): the table beside the paper's, the gains, DANN against PADA, PADA's cross-entropy as the official code
weights it, the class weights' momentum, and how near the real classes are (source-only's most confused pairs,
beside the demo's of the lock-in study)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dmp.metrics import load_record
from studies import lockin
from studies.office31.common import (PARTIAL_METHODS, STUDY, STUDY_DATASET, TASKS, gain_table, provenance, reported,
                                     study_table, task_cells)
from studies.records import office31_runs, records, task_of

PARTIAL_HEADING = "## Office-31 partial, real images, EfficientNet-Lite0 head fine-tuned"


def partial_section(vanilla: dict | None = None, root: Path = STUDY) -> list[str]:
    """The partial setting on the same stored trunk (31 source classes, the target's 10 shared with Caltech-256);
    ``vanilla``: the vanilla table's per-seed averages (:func:`study_table`), for DANN's vanilla gain; ``root``: the
    study's folder."""
    runs = office31_runs(f"runs/{STUDY_DATASET}/partial/*/*/G/full-partial/seed*/metrics.json", root)
    if runs.empty:
        return []
    paper = reported("partial")
    table, avgs = study_table(runs, paper, PARTIAL_METHODS)
    gains = gain_table(avgs, paper, PARTIAL_METHODS)
    lines = [PARTIAL_HEADING, "",
             "The same stored trunk, the paper's partial protocol: all 31 source classes, the target's images of the 10 "
             "classes Office-31 shares with Caltech-256 (the `partial` split), the paper's partial preset (lambda2 1, "
             "the class-weighted intra-class term), the same schedule and model (config/office31_lite_t128.yaml, table "
             "`partial`). ETN has no Office-31 row in the paper's table. " + provenance(runs), "", *table, ""]
    if gains:
        lines += ["Gains over source-only (Avg of the 6 tasks, per seed):", "", *gains, ""]
    return (lines + dann_reading(avgs, paper, vanilla or {}, root) + pada_check(runs, root) + momentum_check(runs, root)
            + confusable_pairs(root))


def dann_reading(avgs: dict, paper: pd.DataFrame, vanilla: dict, root: Path = STUDY) -> list[str]:
    """DANN (every source class weighted 1) beside PADA (the same adversarial term, class-weighted) and source-only:
    how much of the partial setting's negative transfer PADA's class weights take back, ours beside the paper's."""
    if any(m not in avgs or avgs[m][1] is None for m in ("source_only", "dann", "pada")):
        return []
    so, dann, pada = (avgs[m][1] for m in ("source_only", "dann", "pada"))
    seeds = sorted(set(so.index) & set(dann.index) & set(pada.index))
    if not seeds:
        return []
    ours = {m: (avgs[m][1][seeds] - so[seeds]).mean() for m in ("dann", "pada")}
    vso, vdann = (vanilla.get(m, (None, None))[1] for m in ("source_only", "dann"))
    in_vanilla = (f" (DANN gains {(vdann - vso).dropna().mean():+.1f} in the vanilla table of the same form)"
                  if vso is not None and vdann is not None else "")
    theirs = {m: paper.loc[m, "Avg"] - paper.loc["source_only", "Avg"] for m in ("dann", "pada")}
    return [f"**DANN and PADA.** DANN aligns all 31 source classes with the 10 of the target; PADA is the same "
            f"adversarial term with its class weights. Over source-only (Avg, seeds {', '.join(map(str, seeds))}): "
            f"DANN {ours['dann']:+.1f} (paper {theirs['dann']:+.1f}), PADA {ours['pada']:+.1f} (paper "
            f"{theirs['pada']:+.1f}); PADA's weights take back {ours['pada'] - ours['dann']:+.1f} points of DANN's "
            f"(paper {theirs['pada'] - theirs['dann']:+.1f}). So PADA's weighting works here; what differs from the "
            "paper is how far an unweighted alignment of the 31 source classes with the 10 of the target falls in "
            f"this form{in_vanilla}." + _weights_reading(ours, root),
            ""]


def _weights_reading(ours: dict, root: Path) -> str:
    """PADA's last class weights on the target's classes and on the outliers, and the cost DANN's loss would give
    the outliers' share of the weight if the cost scaled with it (a reading, not a measurement)."""
    weights = _class_weight_split("pada", root)
    if not weights:
        return ""
    (shared, other), (k, rest), n = weights
    share = rest * other / (rest * other + k * shared)
    return (f" PADA's last class weights (the mean target prediction over its largest entry, {n} runs of the table) "
            f"average {shared:.2f} on the target's {k} classes and {other:.2f} on the {rest} others, who thus keep "
            f"{100 * share:.0f} % of the summed class weight of the source rows of its adversarial term; were the "
            f"cost proportional to that share, it would be {share * ours['dann']:+.1f} points, against PADA's "
            f"{ours['pada']:+.1f} measured.")


def momentum_check(runs: pd.DataFrame, root: Path = STUDY) -> list[str]:
    """DMP with the class weights' mean prediction averaged across refreshes (``mean_prediction_momentum`` 0.9, the
    demo's stabiliser; check ``momentum_0.9`` of :mod:`studies.office31.declared`) beside the table's DMP (the paper's weights), on the
    seeds the check ran: accuracy and the runs where a target class ends at ``COLLAPSE`` % or less."""
    check = office31_runs("checks/momentum_0.9/*/*/seed*/metrics.json", root)
    if check.empty:
        return []
    seeds = sorted(check["seed"].unique())
    rows = {"DMP (momentum 0, the paper's), the table's runs": ("dmp", runs[runs["method"] == "dmp"]),
            "DMP, momentum 0.9": ("momentum_0.9", check)}
    counts = []
    lines = ["| run | " + " | ".join(TASKS) + f" | Avg | runs with a target class at {lockin.COLLAPSE:g} % or less |",
             "|---|" + "---|" * (len(TASKS) + 2)]
    for name, (where, part) in rows.items():
        part = part[part["seed"].isin(seeds)]
        cells, avg = task_cells(part)
        low = _collapsed(part)
        counts.append((low, len(part)))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {avg} | {low} of {len(part)} |")
    return ["The class weights' momentum on real data (`mean_prediction_momentum` 0.9, as measured on the demo "
            "in the section \"The partial setting's lock-in\" below), DMP, seeds "
            f"{', '.join(map(str, seeds))}, `snakemake study_office31_checks`. " + provenance(check), "", *lines,
            "", _momentum_reading(counts), ""]


def _momentum_reading(counts: list[tuple[int, int]]) -> str:
    """The collapse counts of the paper's weights and of momentum 0.9, with Fisher's exact test."""
    from scipy.stats import fisher_exact
    (k0, n0), (k1, n1) = counts
    p = fisher_exact([[k0, n0 - k0], [k1, n1 - k1]])[1]
    return (f"Runs ending with a target class at {lockin.COLLAPSE:g} % or less: {k0} of {n0} with the paper's weights, {k1} "
            f"of {n1} with momentum 0.9 (Fisher's exact test p = {p:.2f}). `mean_prediction_momentum` stays 0 by "
            "default, the paper's Eq. ClassWeight.")


def _collapsed(part: pd.DataFrame) -> int:
    """How many of the runs end with a target class at ``COLLAPSE`` % or less (the demo's lock-in threshold)."""
    count = 0
    for file in part["file"]:
        per_class = load_record(file, ("per_class_accuracy",))["per_class_accuracy"]
        count += any(v is not None and v <= lockin.COLLAPSE for v in per_class.values())
    return count


def confusable_pairs(root: Path = STUDY, top: int = 3) -> list[str]:
    """The target's most confused class pairs under source-only (true -> predicted, the confusion matrices of the
    table's runs summed over seeds, rates per true class), per setting: how near the real data's classes are, beside
    the demo's near pairs (the lock-in section)."""
    found, pairs_all = [], []
    for setting, split in (("vanilla", "full-full"), ("partial", "full-partial")):
        pooled = {}
        for _, m in records(root, f"runs/*/{setting}/*/source_only/G/{split}/seed*/metrics.json"):
            if not m.get("confusion_matrix"):
                continue                                      # a run that recorded none
            task = task_of(m["config"])
            cm = np.asarray(m["confusion_matrix"], dtype=float)
            pooled[task] = (pooled[task][0] + cm, m["class_names"]) if task in pooled else (cm, m["class_names"])
        pairs = []
        for task, (cm, names) in pooled.items():
            rate = cm / np.maximum(cm.sum(1, keepdims=True), 1)
            np.fill_diagonal(rate, 0)
            pairs += [(rate[i, j], task, names[i], names[j], int(cm[i].sum())) for i, j in zip(*np.nonzero(rate))]
        pairs.sort(key=lambda p: (-p[0], p[1], p[2], p[3]))
        pairs_all += pairs
        if pairs:
            found.append(f"{setting}: " + ", ".join(f"{a} -> {b} {100 * r:.1f} % ({task}, {n} images over the seeds)"
                                                     for r, task, a, b, n in pairs[:top]))
    if not found:
        return []
    demo = lockin.near_pairs(lockin.collect(), top=1)
    office = max((p[0] for p in pairs_all), default=0.0)
    beside = (f" The demo's nearest pair, {demo[0][1]} -> {demo[0][2]} {100 * demo[0][0]:.1f} % (the lock-in "
              f"section), is confused {'less' if demo[0][0] < office else 'more'} often than Office-31's nearest."
              if demo else "")
    return ["**How near the real classes are.** Source-only's most confused target class pairs (true -> predicted, "
            "summed over seeds): " + "; ".join(found) + "." + beside, ""]


def pada_check(runs: pd.DataFrame, root: Path = STUDY) -> list[str]:
    """PADA with the official code's weighted cross-entropy (check ``pada_ce_code``) beside the
    table's PADA (the paper's objective) and source-only, on the seeds the check ran."""
    check = office31_runs("checks/pada_ce_code/*/*/seed*/metrics.json", root)
    if check.empty:
        return []
    seeds = sorted(check["seed"].unique())
    rows = {"Source only, the table's runs": runs[runs["method"] == "source_only"], "PADA (pada_ce=paper), the table's runs":
            runs[runs["method"] == "pada"], "PADA (pada_ce=code)": check}
    lines = ["| run | " + " | ".join(TASKS) + " | Avg |", "|---|" + "---|" * (len(TASKS) + 1)]
    for name, part in rows.items():
        cells, avg = task_cells(part[part["seed"].isin(seeds)])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {avg} |")
    return ["PADA's cross-entropy as the official code weights it (`pada_ce=code`: sum gamma CE / sum gamma, where the "
            "paper's objective averages gamma CE over the batch and so shrinks the supervised term with gamma), "
            f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}, "
            "`snakemake study_office31_checks`. " + provenance(check), "", *lines, ""]


def _class_weight_split(method: str, root: Path):
    """Mean class weight (``target_mean_prediction`` / its max, at the end of a run) over the target's classes (those
    with a per-class accuracy) and over the others, averaged over ``method``'s partial runs; None without runs."""
    shared, other = [], []
    for _, m in records(root, f"runs/*/partial/*/{method}/G/full-partial/seed*/metrics.json"):
        p = np.asarray(m.get("target_mean_prediction") or [], dtype=float)
        if not len(p) or p.max() <= 0:
            continue
        g = p / p.max()
        mask = np.array([m["per_class_accuracy"].get(n) is not None for n in m["class_names"]])
        shared.append(g[mask].mean())
        other.append(g[~mask].mean())
        counts = (int(mask.sum()), int((~mask).sum()))
    return ((float(np.mean(shared)), float(np.mean(other))), counts, len(shared)) if shared else None
