"""DMP's two terms in the Office-31 study: DMP and its ablations with the backbone's BatchNorm training and on its
ImageNet statistics, with stages 5-6 and with every layer fine-tuned (what L_DS adds over DMP (No DS) beside the
paper's share), and the scale of the vanilla intra-class term (the printed class weights against c times them)."""
from __future__ import annotations

import pandas as pd

from studies.office31.adapts import form_means
from studies.office31.common import ALL_FROZEN, DEEPER, FROZEN, MEAN_ONE, METHODS, TASKS, provenance

ABLATED = ("source_only", "dmp_no_al", "dmp_no_ds", "dmp")
"""The methods of :func:`_terms_by_form`: source-only, DMP and the two ablations, in the paper's table order."""


def _terms_by_form(dep: pd.DataFrame, modes: dict, paper: pd.DataFrame, column: str) -> tuple | None:
    """Source-only, DMP and its ablations in each form of ``modes`` (form -> its label) on the tasks and seeds where
    every form ran source-only, DMP (No DS) and DMP: the table (a row per task, seed and form, ``column`` naming the form, L_DS's share = DMP minus DMP (No DS); the paper's row of each task
    under them), the gains over source-only of the mean accuracies per form and for the paper (form None, on the same
    tasks), and their sentence; DMP (No AL) over the tasks and seeds where it ran in every form (named where fewer).
    None where no task and seed ran every form."""
    if dep.empty:
        return None
    acc = dep.set_index(["form", "method", "task", "seed"])["accuracy"].to_dict()
    ran = sorted({(t, s) for _, _, t, s in acc}, key=lambda k: (TASKS.index(k[0]), k[1]))
    keys, mean = form_means(acc, ran, tuple(modes), ("source_only", "dmp_no_ds", "dmp"))
    if not keys:
        return None
    al, mean_al = form_means(acc, keys, tuple(modes), ("source_only", "dmp_no_al"))
    lines = [f"| task | seed | {column} | " + " | ".join(METHODS[m] for m in ABLATED) + " | L_DS share |",
             "|---|---|---|" + "---|" * (len(ABLATED) + 1)]
    for t, s in keys:
        for f, mode in modes.items():
            cells = [f"{acc[(f, m, t, s)]:.1f}" if (f, m, t, s) in acc else "–" for m in ABLATED]
            lines.append(f"| {t} | {s} | {mode} | " + " | ".join(cells)
                         + f" | {acc[(f, 'dmp', t, s)] - acc[(f, 'dmp_no_ds', t, s)]:+.1f} |")
    for t in dict.fromkeys(t for t, _ in keys):
        lines.append(f"| {t} | | paper (ResNet-50, reported) | " + " | ".join(f"{paper.loc[m, t]:.1f}" for m in ABLATED)
                     + f" | {paper.loc['dmp', t] - paper.loc['dmp_no_ds', t]:+.1f} |")

    def with_paper(means: dict, ks: list, methods: tuple) -> dict:
        """``means`` and, as form None, the paper's mean of each method over the same tasks and seeds ``ks``."""
        return {**means, **{(None, m): sum(paper.loc[m, t] for t, _ in ks) / len(ks) for m in methods}} if ks else means

    mean = with_paper(mean, keys, ("source_only", "dmp_no_ds", "dmp"))
    mean_al = with_paper(mean_al, al, ("source_only", "dmp_no_al"))
    gain = {(f, m): mean[(f, m)] - mean[(f, "source_only")] for f in (*modes, None) for m in ("dmp_no_ds", "dmp")}
    parts = []
    for f, mode in [*modes.items(), (None, "the paper")]:
        text = (f"{mode}: DMP (No DS) {gain[(f, 'dmp_no_ds')]:+.1f}, DMP {gain[(f, 'dmp')]:+.1f}, L_DS "
                f"{gain[(f, 'dmp')] - gain[(f, 'dmp_no_ds')]:+.1f}")
        if al:
            text += f", DMP (No AL) {mean_al[(f, 'dmp_no_al')] - mean_al[(f, 'source_only')]:+.1f}"
        parts.append(text)
    where = ", ".join(f"{t} seed {s}" for t, s in keys)
    al_where = "" if not al or al == keys else (" (DMP (No AL) over " + ", ".join(f"{t} seed {s}" for t, s in al)
                                                  + ")")
    return lines, gain, f"Gains over source-only (mean over {where}){al_where}: " + "; ".join(parts)


NEARER_BY = 1.0
"""Points by which a form's gain or L_DS's share must be nearer the paper's than the other form's to be read as nearer
(:func:`ablations_by_bn`, :func:`ds_by_depth`; a departure's Avg against the headline form's:
:func:`studies.office31.headline.beside_headline`): a tenth of a point over a few runs is no difference."""


def _ds_short(gain: dict, form) -> float:
    """L_DS's share (DMP's gain minus DMP (No DS)'s) in ``form`` minus the paper's on the same tasks."""
    return (gain[(form, "dmp")] - gain[(form, "dmp_no_ds")]) - (gain[(None, "dmp")] - gain[(None, "dmp_no_ds")])


def ablations_by_bn(dep: pd.DataFrame, paper: pd.DataFrame) -> list[str]:
    """DMP and its ablations with the backbone's BatchNorm layers training (the deeper form, :data:`DEEPER`) and on
    their ImageNet statistics (:data:`FROZEN`), on each task and seed where both modes ran source-only, DMP (No DS)
    and DMP: each one's gain over source-only beside the paper's on those tasks, and L_DS's share (DMP minus DMP (No
    DS)). In the training mode the target batches re-estimate the statistics of the fine-tuned BatchNorm layers, a
    gain every method with a target batch gets (:func:`_statistics_share`); frozen, no method gets it. Whether DMP
    (No DS)'s excess over the paper's gain and L_DS's short share move with it tells the protocol from the method.
    DMP (No AL) is averaged over the tasks and seeds where it ran in both modes (named where fewer)."""
    modes = {DEEPER: "BatchNorm training (the deeper form)", FROZEN: "BatchNorm on ImageNet statistics"}
    terms = _terms_by_form(dep, modes, paper, "BatchNorm")
    if terms is None:
        return []
    lines, gain, gains = terms
    excess = {f: gain[(f, "dmp_no_ds")] - gain[(None, "dmp_no_ds")] for f in modes}
    short = {f: _ds_short(gain, f) for f in modes}
    closer = (abs(excess[FROZEN]) < abs(excess[DEEPER]) - NEARER_BY,
              abs(short[FROZEN]) < abs(short[DEEPER]) - NEARER_BY)
    verdict = {
        (True, True): "with the statistics frozen both DMP (No DS)'s gain and L_DS's share are nearer the paper's (by "
                      "more than a point): the split of DMP's gain between its terms moves with the target batches' "
                      "BatchNorm statistics, a property of this CPU form's protocol",
        (True, False): "with the statistics frozen DMP (No DS)'s gain is nearer the paper's (by more than a point) and "
                       "L_DS's share is not: DMP (No DS)'s excess goes with the target batches' BatchNorm statistics, "
                       "a property of this CPU form's protocol, while L_DS adds less than in the paper with the "
                       "statistics training or frozen",
        (False, True): "with the statistics frozen L_DS's share is nearer the paper's (by more than a point) and DMP "
                       "(No DS)'s gain is not: the statistics explain only part of the split",
        (False, False): "with the statistics frozen neither DMP (No DS)'s gain nor L_DS's share is nearer the paper's "
                        "by more than a point: the target batches' BatchNorm statistics are not why the split "
                        "differs"}[closer]
    return [f"**DMP's terms with the backbone's BatchNorm on its ImageNet statistics** (departure `{FROZEN}`, "
            "`snakemake study_office31_departures`). In the deeper form the target batches re-estimate the fine-tuned "
            "BatchNorm layers' statistics, a share every method with a target batch gets; frozen, none gets it. "
            "Target accuracy, the same task and seed in both modes, the paper's row under them:", "", *lines, "",
            gains + f". DMP (No DS) is {excess[DEEPER]:+.1f} from the paper's gain with the statistics training and "
            f"{excess[FROZEN]:+.1f} with them frozen; L_DS's share {short[DEEPER]:+.1f} and {short[FROZEN]:+.1f}: "
            + verdict + ". " + provenance(dep[dep["form"].eq(FROZEN) & dep["method"].isin(ABLATED)]), ""]


def ds_by_depth(dep: pd.DataFrame, paper: pd.DataFrame) -> list[str]:
    """L_DS's share with stages 5-6 and the head fine-tuned (:data:`FROZEN`) and with every layer fine-tuned from the
    images (:data:`ALL_FROZEN`), both with the backbone's BatchNorm on its ImageNet statistics (no method gets the
    target's), on each task and seed where both ran source-only, DMP (No DS) and DMP. The intra-class term moves the
    features of the layers that train; whether L_DS adds nearer the paper's share when every layer trains tells
    whether the depth of the CPU form's fine-tuning is part of its short share."""
    modes = {FROZEN: "stages 5-6 and the head", ALL_FROZEN: "every layer (from the images)"}
    terms = _terms_by_form(dep, modes, paper, "fine-tuned")
    if terms is None:
        return []
    lines, gain, gains = terms
    short = {f: _ds_short(gain, f) for f in modes}
    if abs(short[ALL_FROZEN]) < abs(short[FROZEN]) - NEARER_BY:
        verdict = ("with every layer fine-tuned L_DS's share is nearer the paper's: how much of the network trains is "
                   "part of why the term adds less in the deeper form")
    elif abs(short[ALL_FROZEN]) <= abs(short[FROZEN]) + NEARER_BY:
        verdict = ("L_DS's share is about as far from the paper's with every layer fine-tuned (within a point): the "
                   "depth of the fine-tuning is not why the term adds less here")
    else:
        verdict = ("with every layer fine-tuned L_DS's share is further from the paper's: the depth of the "
                   "fine-tuning is not why the term adds less here")
    return [f"**L_DS's share with every layer fine-tuned** (departures `{FROZEN}` and `{ALL_FROZEN}`, both with the "
            "backbone's BatchNorm on its ImageNet statistics). The intra-class term moves the features of the layers "
            "that train: stages 5-6 and the head in the deeper form, every layer in the paper's protocol. Target "
            "accuracy, the same task and seed in both, the paper's row under them:", "", *lines, "",
            gains + f". L_DS's share is {short[FROZEN]:+.1f} from the paper's with stages 5-6 fine-tuned and "
            f"{short[ALL_FROZEN]:+.1f} with every layer: " + verdict + ". "
            + provenance(dep[dep["form"].eq(ALL_FROZEN) & dep["method"].isin(ABLATED)]), ""]


def class_weight_check(dep: pd.DataFrame, paper: pd.DataFrame) -> list[str]:
    """DMP with the printed class weights (1/c, the default) and with c times them, beside DMP (No DS) and
    source-only of the same task and seed in the deeper form: what L_DS adds over DMP (No DS) either way, beside the
    paper's DMP minus DMP (No DS) on that task."""
    if dep.empty or (mine := dep[(dep["form"] == MEAN_ONE) & (dep["method"] == "dmp")]).empty:
        return []
    base = dep[dep["form"] == DEEPER].set_index(["task", "seed", "method"])["accuracy"]
    lines = ["| task | seed | Source only | DMP (No DS) | DMP, w = 1/c (printed, default) | DMP, c w = 1 | "
             "L_DS share, w = 1/c | L_DS share, c w = 1 | paper's L_DS share |", "|---|" + "---|" * 8]
    shares = []
    for row in mine.sort_values(["task", "seed"]).itertuples():
        got = {m: base.get((row.task, row.seed, m)) for m in ("source_only", "dmp_no_ds", "dmp")}
        if any(v is None for v in got.values()):
            continue
        printed, scaled = got["dmp"] - got["dmp_no_ds"], row.accuracy - got["dmp_no_ds"]
        ref = paper.loc["dmp", row.task] - paper.loc["dmp_no_ds", row.task]
        shares.append((printed, scaled, ref))
        lines.append(f"| {row.task} | {row.seed} | {got['source_only']:.1f} | {got['dmp_no_ds']:.1f} | "
                     f"{got['dmp']:.1f} | {row.accuracy:.1f} | {printed:+.1f} | {scaled:+.1f} | {ref:+.1f} |")
    if not shares:
        return []
    printed, scaled, ref = (sum(v) / len(shares) for v in zip(*shares))
    closer = "closer to" if abs(scaled - ref) < abs(printed - ref) else "no closer to"
    return ["**The scale of the intra-class term** (`weight_norm`): the vanilla class weights of Eq. ClassWeight "
            "are printed as 1/c, so on Office-31's 31 classes the target intra-class term is 31 times weaker than "
            "the unweighted Eq. IntraLoss&Truncated; the paper calls these weights \"useless in the vanilla setting\" "
            "and does not say which scale lambda1 = 10 was set for. DMP with c w = 1 (`weight_norm=mean_one`, "
            f"`snakemake study_office31_departures`, departure `{MEAN_ONE}`) beside the deeper form's runs of the same "
            "task and seed:", "", *lines, "",
            f"Over these runs L_DS adds {printed:+.1f} with the printed weights and {scaled:+.1f} with c w = 1, "
            f"{closer} the paper's {ref:+.1f} on the same tasks"
            + ("; the stronger term lowers DMP, so a too weak printed scale is not why L_DS adds less here than "
               "in the paper." if scaled < printed else "."), ""]
