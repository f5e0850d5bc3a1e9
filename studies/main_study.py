"""The main evidence study: the demo tables (vanilla and partial), Office-Caltech10's six tasks and MNIST <-> USPS,
each with source-only (both forms), DMP and its ablations (vanilla) or source-only, DMP and DMP+ent (partial), the
paper's hyper-parameters (the presets of dmp/config.py), the model at the last iteration (no target labels). Its
tables and the notes read from its runs: the partial demo's collapses, the digits, and what the target batches'
BatchNorm statistics give source-only."""
from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd

from studies.geometry import note as geometry_note
from studies.records import EVIDENCE, records
from studies.runs import DEMO, DIGITS, OC10, PARTIAL, VANILLA, run
from studies.tables import avg, lower_pairs, ordering, select, table, versions, wins_line

# (dataset, setting, tasks, methods)
MAIN = [("demo", "vanilla", DEMO, VANILLA), ("demo", "partial", DEMO, PARTIAL),
        ("office_caltech10", "vanilla", OC10, VANILLA), ("mnist_usps", "vanilla", DIGITS, VANILLA)]
# The main study's seeds per task where 3 cannot tell the methods apart: on the demo one seed in three collapses
# (partial), on digits DMP and DMP (No AL) differ by less than their seed std (docs/evidence.md)
MAIN_SEEDS = {"demo": 10, "mnist_usps": 10}


def runs() -> list:
    """Every run of the study (3 seeds per task, :data:`MAIN_SEEDS` where more)."""
    return [run("main", dataset, setting, task, method, seed)
            for dataset, setting, tasks, names in MAIN
            for task, method, seed in itertools.product(tasks, names, range(MAIN_SEEDS.get(dataset, 3)))]


def section(df: pd.DataFrame) -> list[str]:
    """One table per dataset and setting of the study's runs."""
    lines = []
    main = df[df["study"] == "main"]
    for (dataset, setting), part in main.groupby(["dataset", "setting"], sort=False):
        order = VANILLA if setting == "vanilla" else PARTIAL
        md, wins = table(part, "method", order)
        above, below = versions(part, "method", order)
        lines += [f"## {dataset}, {setting}", "", f"{part['seed'].nunique()} seeds.", "", *above, md, "", *below,
                  wins_line(wins), ""]
    return lines


def collapse_note(root: Path = EVIDENCE) -> list[str]:
    """How many partial demo runs of DMP and DMP+ent end with the shared class *circle* weighted below 0.05."""
    out = []
    collapsed = {}
    for m in ("dmp", "dmp_ent"):
        found = records(root / "main" / "demo" / "partial", f"*/{m}/default/seed*/metrics.json",
                        ("class_names", "class_weights"))
        pis = [dict(zip(r["class_names"], r["class_weights"]))["circle"] for _, r in found]
        collapsed[m] = (sum(pi < 0.05 for pi in pis), len(pis))
    if all(n for _, n in collapsed.values()):
        out.append(
            "- Partial demo: in {0} of {1} DMP runs and {2} of {3} DMP+ent runs (both tasks, all seeds) the shared "
            "class *circle* is predicted as the outlier class *hexagon* early, its weight pi falls below 0.05, and "
            "the weighting keeps it there (the paper's own caveat: the weights come from the mean prediction). "
            "Those runs are the large std.".format(*collapsed["dmp"], *collapsed["dmp_ent"]))
    return out


def digits_note(df: pd.DataFrame, geo: pd.DataFrame | None = None) -> list[str]:
    """Why the digits' source-only was weak and what the preset does about it; DMP against its ablations there."""
    out = []
    digits = select(df, "main", "mnist_usps")
    if len(digits):
        v = {m: avg(g) for m, g in digits.groupby("method")}
        task = lambda m, t: digits[(digits["method"] == m) & (digits["task"] == t)]["accuracy"]  # noqa: E731
        out.append(
            "- Digits (MNIST<->USPS): source-only was weak and unstable because a model trained "
            "on MNIST alone normalises USPS with MNIST's BatchNorm running statistics (evaluated with target batch "
            "statistics instead, a diagnostic only, the same source-only models scored far higher on every seed), "
            "because the last iterate of a constant learning rate swings, because the two datasets frame their "
            "digits differently (USPS fills the frame, MNIST keeps a margin) and nothing showed the network another "
            "framing, and because the CNN started from a random initialisation, which changed with the seed. The "
            "preset now uses per-sample normalisation, GroupNorm in the CNN, the annealed learning rate, a random "
            "shift (2 px) and scale (1 +- 0.25) of the training samples, and starts from weights pre-trained on the "
            "demo's generated shapes in grey (`python -m dmp pretrain-demo --recipe digits`; fine-tuned at the full "
            "lr, docs/method.md says why), for every method (earlier protocols, in this file's history: "
            "source-only 47.7 at first, 55.5 before the augmentation, 82.2 with a std of 3.2 / 3.1 from a random "
            "initialisation). "
            f"Source-only now averages {v['source_only']:.1f}, with a seed std of "
            f"{task('source_only', 'M->U').std():.1f} "
            f"on M->U and {task('source_only', 'U->M').std():.1f} on U->M. "
            "Removing BatchNorm from the manifold layers as well steadied source-only further but made DMP collapse "
            "to chance, so the manifold layers keep it (the authors' code has it). On digits DMP "
            f"({v['dmp']:.1f}) against DMP (No DS) ({v['dmp_no_ds']:.1f}) and DMP (No AL) ({v['dmp_no_al']:.1f}): "
            f"{ordering(v)}; DMP minus DMP (No AL) is "
            f"{task('dmp', 'M->U').mean() - task('dmp_no_al', 'M->U').mean():+.1f} points on M->U and "
            f"{task('dmp', 'U->M').mean() - task('dmp_no_al', 'U->M').mean():+.1f} on U->M, and DMP is lower on "
            f"{lower_pairs(digits, 'dmp', 'dmp_no_al')}." + geometry_note(geo))
    return out


def bn_note(df: pd.DataFrame) -> list[str]:
    """Source-only whose BatchNorm statistics also see the target batches, against standard source-only and DMP."""
    out = []
    ref = df[df["study"].isin(["main", "weak"]) & (df["variant"] == "default")]
    bn = ref[ref["method"] == "source_only_bn"]
    if len(bn):
        gaps, parts = [], []
        for (dataset, setting), b in bn.groupby(["dataset", "setting"], sort=False):
            same = ref[(ref["dataset"] == dataset) & (ref["setting"] == setting)]
            so, dmp = (same[same["method"] == m] for m in ("source_only", "dmp"))
            if len(so) and len(dmp):
                parts.append(f"{dataset} {setting} {avg(so):.1f} -> {avg(b):.1f} (DMP {avg(dmp):.1f})")
                gaps.append(avg(dmp) - avg(b))
        digits = bn[bn["dataset"] == "mnist_usps"]
        std = {t: digits[digits["task"] == t]["accuracy"].std() for t in ("M->U", "U->M")} if len(digits) else {}
        so_digits = ref[(ref["dataset"] == "mnist_usps") & (ref["method"] == "source_only")]
        so_std = {t: so_digits[so_digits["task"] == t]["accuracy"].std() for t in ("M->U", "U->M")}
        out.append(
            "- Source-only and BatchNorm statistics (the rows \"Source only, BN sees target\", method "
            "`source_only_bn`). "
            "Every DMP variant forwards the target batches, so the running statistics of its BatchNorm layers blend "
            "both domains; standard source-only's see the source only, and the target is evaluated with them. "
            "`source_only_bn` forwards each target batch through source-only without any loss: the weights "
            "it learns are bit for bit those of standard source-only (tests/test_trainer.py), only the statistics "
            "differ. Source-only average, standard -> with BN seeing the target: " + "; ".join(parts) + ". "
            + (f"On digits this baseline's seed std is {std['M->U']:.1f} on M->U and {std['U->M']:.1f} on U->M "
               f"(standard source-only: {so_std['M->U']:.1f} and {so_std['U->M']:.1f}). " if std else "")
            + f"DMP stays above it on {sum(g > 0 for g in gaps)} of {len(gaps)} tables, so part of DMP's gain over "
            "standard source-only on these small data is the statistics of the target batches, and part is its "
            "losses. The paper tables' source-only row stays the standard one (`source_only`), the baseline of the "
            "paper's ResNet rows and of every peer library; `source_only_bn` can be added to a table's methods.")
    return out
