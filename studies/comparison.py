"""The comparison study: the registered comparison methods of the paper's tables (dmp/methods/, each with its own
paper's hyper-parameters: the registry's defaults, nothing tuned per task) on the main study's tasks, presets and
seeds 0..2, the model at the last iteration, tabled beside the source-only and DMP rows of the same tasks, seeds,
presets and weights that this study runs with them (so that a table's rows share one data version, weights file and
code version)."""
from __future__ import annotations

import itertools

import pandas as pd

from dmp import methods as registry
from studies.runs import DEMO, DIGITS, OC10, SEEDS, run
from studies.tables import NAMES, avg, lower_pairs, table, versions

# (dataset, setting, tasks, comparison methods) of each table; the report takes a table's COMPARISON_BASE rows from
# this study where they have all run, else from the main study's runs
COMPARISON = [("office_caltech10", "vanilla", OC10, ["dann", "cdan_e", "safn", "cdan", "bsp_dann", "hafn"]),
              ("demo", "vanilla", DEMO, ["dann", "cdan_e"]), ("demo", "partial", DEMO, ["pada"]),
              ("mnist_usps", "vanilla", DIGITS, ["dann", "cdan_e"])]
# The rows of DMP and source-only each comparison table shows beside the comparison methods (the same seeds)
COMPARISON_BASE = {"vanilla": ["source_only", "dmp_no_al", "dmp"], "partial": ["source_only", "dmp", "dmp_ent"]}
# Published numbers on the same data under their own protocol, quoted beside ours: (dataset, task, method) ->
# accuracy (%) exactly as printed, with the source in PUBLISHED_SOURCE. Empty: the digits tables of the comparison
# methods' papers (e.g. Long et al., "Conditional Adversarial Domain Adaptation", NeurIPS 2018) could not be checked
# against the papers offline, and no number is quoted unchecked.
PUBLISHED: dict[tuple[str, str, str], float] = {}
PUBLISHED_SOURCE = {}


def runs(only=None) -> list:
    """Every run of the study, in the order listed: each table's :data:`COMPARISON_BASE` methods first, then its
    comparison methods (each method's tasks and seeds complete before the next starts); ``only``: these methods alone."""
    return [run("comparison", dataset, setting, task, method, seed)
            for dataset, setting, tasks, names in COMPARISON
            for method, task, seed in itertools.product(COMPARISON_BASE[setting] + names, tasks, range(SEEDS))
            if not only or method in only]


def _comparison_base(df: pd.DataFrame, dataset: str, setting: str, tasks, seeds) -> tuple[pd.DataFrame, bool]:
    """A comparison table's :data:`COMPARISON_BASE` rows of ``tasks`` x ``seeds``: (rows, whether they are the
    comparison study's own). Its own where every method, task and seed of them has run there, else the main
    study's."""
    names = COMPARISON_BASE[setting]
    sel = (df["dataset"] == dataset) & (df["setting"] == setting) & (df["variant"] == "default") & df["method"].isin(
        names) & df["seed"].isin(seeds) & df["task"].isin(tasks)
    own = df[sel & (df["study"] == "comparison")]
    if own.groupby(["method", "task", "seed"]).ngroups == len(names) * len(tasks) * len(seeds):
        return own, True
    return df[sel & (df["study"] == "main")], False


def section(df: pd.DataFrame) -> list[str]:
    """The tables of the comparison study: each comparison method beside the source-only and DMP rows of the same
    tasks and seeds (:func:`_comparison_base`: the study's own runs of them, else the main study's), with where DMP
    is lower than each, and the published numbers on the same data."""
    comp = df[(df["study"] == "comparison") & (df["variant"] == "default")]
    if not len(comp):
        return []
    lines, own_base, footnotes = [], {}, {}
    for (dataset, setting), part in comp.groupby(["dataset", "setting"], sort=False):
        listed = [m for d, s, _, ms in COMPARISON if (d, s) == (dataset, setting) for m in ms]
        part = part[part["method"].isin(listed)]
        tasks, seeds = sorted(part["task"].unique()), sorted(part["seed"].unique())
        done = [m for m, g in part.groupby("method") if g.groupby(["task", "seed"]).ngroups == len(tasks) * len(seeds)]
        if not done:
            continue
        base, own_base[f"{dataset}, {setting}"] = _comparison_base(df, dataset, setting, tasks, seeds)
        order = COMPARISON_BASE[setting] + [m for m in listed if m in done]
        both = pd.concat([base, part[part["method"].isin(done)]])
        md, wins = table(both, "method", order)
        avgs = {m: avg(g) for m, g in both.groupby("method")}
        above, below = versions(both, "method", order)
        lines += [f"### {dataset}, {setting}", "", f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), "
                  f"{len(tasks)} tasks.", "", *above, md, "", *below]
        top = max(avgs[m] for m in order if m in avgs)
        notes = [f"Highest Avg ({top:.1f}): {', '.join(NAMES[m] for m in order if avgs.get(m) == top)}."]
        if "dmp" in avgs:
            for m in (m for m in order if m in done):
                below = [t for t in wins.columns if wins.loc["dmp", t] < wins.loc[m, t]]
                notes.append(f"DMP against {NAMES[m]}: Avg {avgs['dmp'] - avgs[m]:+.1f}; DMP lower on "
                             f"{len(below)} of {len(tasks)} tasks{' (' + ', '.join(below) + ')' if below else ''}, "
                             f"and on {lower_pairs(both, 'dmp', m)}.")
        quoted = [(t, m, v) for (d, t, m), v in PUBLISHED.items() if d == dataset and m in done]
        if quoted:
            notes.append(f"Published on the same data under its own protocol ({PUBLISHED_SOURCE[dataset]}): "
                         + "; ".join(f"{NAMES[m]} {t} {v:.1f} (ours {wins.loc[m, t]:.1f}, {wins.loc[m, t] - v:+.1f})"
                                     for t, m, v in quoted) + ".")
        elif dataset == "mnist_usps":
            notes.append("Published digits numbers of these methods (e.g. Long et al., \"Conditional Adversarial "
                         "Domain Adaptation\", NeurIPS 2018) use another protocol (the full MNIST and USPS training "
                         "sets, 28 x 28 images, LeNet trained from scratch; ours: the JDA subsets of 2000 MNIST / 1800 "
                         "USPS samples, 16 x 16, a small GroupNorm CNN pre-trained on the demo's shapes) and are not "
                         "quoted here: they could not be checked against the papers offline.")
        for m in done:
            if registry.get(m).footnote:
                footnotes[m] = registry.get(m).footnote
        lines += [f"- {n}" for n in notes] + [""]
    if footnotes:
        lines += ["Rows not faithful to their paper (docs/method.md): " + " ".join(
            f"{NAMES[m]}: {text}" + ("" if text.endswith(".") else ".") for m, text in footnotes.items()), ""]
    def tables(own):
        names = [f'"{t}"' for t, o in own_base.items() if o == own]
        return f"the table{'s' * (len(names) > 1)} " + " and ".join(
            [", ".join(names[:-1]), names[-1]] if len(names) > 1 else names) if names else ""
    same = ("this study's own runs of the same tasks, seeds, presets and backbone weights (`COMPARISON_BASE` in "
            "studies/comparison.py, run with the comparison methods)")
    where = (f"{same} in {tables(True)}, and the main study's runs of the same seeds in {tables(False)} (where "
             "this study has not run them for every task and seed)" if tables(True) and tables(False)
             else same if tables(True) else "the main study's runs of the same seeds")
    return ["## The comparison methods in the same harness", "",
            "`snakemake study_comparison` (methods and tasks: `COMPARISON` in "
            "studies/comparison.py): each comparison method of the paper's tables as registered in "
            "`dmp/methods/` (docs/method.md, \"Comparison methods\"), with its own paper's hyper-parameters (the "
            "registry's defaults; nothing tuned per task or dataset), on the main study's tasks with the same "
            "presets (backbone, bottleneck, optimiser, schedule, batch size), seeds and model (the last iterate, no "
            f"target labels). The source-only and DMP rows are {where}. A method "
            "is shown only once all its tasks and seeds have run. Below each table, per method: DMP's Avg minus the "
            "method's, the tasks where DMP's mean is lower, and the paired comparison over (task, seed).", ""] + lines
