"""What the evidence report's tables share: tasks as columns with the Avg (mean ± sample std over seeds), the line
that says which data, weights and code version a table's rows ran with, the paired comparison of two methods, and
the labels of the methods (the registry's, dmp/methods/)."""
from __future__ import annotations

import pandas as pd

from dmp import methods

NAMES = {m: methods.label(m) for m in methods.names()}
"""Method -> its label in the tables (the registry's)."""


VERSIONS = {"dataset_version": "data version", "weights": "backbone weights sha256",
            "code_version": "code version (hash of dmp/)"}


def _one_version(part: pd.DataFrame, col: str) -> str | None:
    """The value of ``col`` that every row of a table shares, or None. A run's data version covers the lists it
    reads, so on one dataset it can differ by task: one version per task, the same in every row, is one version
    (written ``X (S->N), Y (S->O)``)."""
    if part[col].nunique() == 1:
        return str(part[col].iloc[0])
    if (col == "dataset_version" and {"dataset", "task"} <= set(part) and part["dataset"].nunique() == 1
            and part.groupby("task")[col].nunique().max() == 1):
        return ", ".join(f"{v} ({t})" for t, v in part.groupby("task")[col].first().items())
    return None


def versions(part: pd.DataFrame, index: str, order=None, names=None) -> tuple[list[str], list[str]]:
    """What the rows of a table (one row per value of ``index``) were run with: (the lines above the table, the
    lines below it). Rows of one data version, one weights file and one code version get one line saying so;
    otherwise a flagged line names what differs, and below the table each row lists its own values of it."""
    names = names or NAMES
    one = {col: _one_version(part, col) for col in VERSIONS}
    shared = [f"{label} {one[col]}" for col, label in VERSIONS.items() if one[col]]
    differ = {col: label for col, label in VERSIONS.items() if not one[col]}
    if not differ:
        return [f"Every row: {'; '.join(shared)}.", ""], []
    keys = list(dict.fromkeys(part[index]))
    keys = [k for k in order if k in keys] if order else keys
    above = [f"**Not one version: the rows differ in {', '.join(differ.values())}** (each row's below the table)"
             + (f"; every row: {'; '.join(shared)}" if shared else "") + ".", ""]
    below = [f"- {names.get(k, k)}: " + "; ".join(
        f"{label} {', '.join(sorted(part.loc[part[index] == k, col].unique()))}" for col, label in differ.items())
        for k in keys]
    return above, below + [""]


def select(df: pd.DataFrame, study: str, dataset: str, variant: str = "default") -> pd.DataFrame:
    """The rows of one study's dataset and variant."""
    return df[(df["study"] == study) & (df["dataset"] == dataset) & (df["variant"] == variant)]


def cell(g):
    """Each group's mean ± sample std (0 for one value), one decimal."""
    return g.mean().round(1).astype(str) + " ± " + g.std(ddof=1).fillna(0).round(1).astype(str)


def table(part: pd.DataFrame, index: str, order=None) -> tuple[str, pd.DataFrame]:
    """Tasks as columns plus Avg (the mean over tasks per seed, then mean +- std over seeds): (the Markdown table,
    the task means with one row per value of ``index``)."""
    t = cell(part.groupby([index, "task"])["accuracy"]).unstack()
    per_seed = part.groupby([index, "seed"])["accuracy"].mean().groupby(index)
    t["Avg"] = cell(per_seed)
    wins = part.groupby([index, "task"])["accuracy"].mean().unstack()
    if order:
        t = t.reindex([o for o in order if o in t.index])
    t.index = [NAMES.get(i, i) for i in t.index]
    return t.to_markdown(), wins


def variant_section(part: pd.DataFrame, by: str, order, title, head: list[str], level: str = "###") -> list[str]:
    """A study comparing variants: one table (variants x tasks) per value of ``by``."""
    if not len(part):
        return []
    lines = list(head)
    for key, sub in part.groupby(by, sort=False):
        md, _ = table(sub, "variant", order)
        above, below = versions(sub, "variant", order, {})
        lines += [f"{level} {title(key)}", "", *above, md, "", *below]
    return lines


def lower_pairs(part: pd.DataFrame, a: str, b: str) -> str:
    """'k of n (...)': on how many (task, seed) pairs method ``a`` scores below method ``b``, with the paired mean
    difference, its 95 % t interval and the two-sided sign test's p-value (ties dropped)."""
    from scipy import stats
    acc = part.pivot_table(index=["task", "seed"], columns="method", values="accuracy")[[a, b]].dropna()
    diff = acc[a] - acc[b]
    lower, higher = int((diff < 0).sum()), int((diff > 0).sum())
    lo, hi = stats.t.interval(0.95, len(diff) - 1, diff.mean(), stats.sem(diff))
    p = stats.binomtest(lower, lower + higher).pvalue
    return (f"{lower} of {len(acc)} (task, seed) pairs (paired difference {diff.mean():+.2f} points, 95 % t interval "
            f"{lo:+.2f} to {hi:+.2f}, which {'includes' if lo <= 0 <= hi else 'excludes'} 0; sign test p = {p:.2f})")


def wins_line(wins: pd.DataFrame) -> str:
    """'DMP above source-only on ...' from a table's task means."""
    if "source_only" not in wins.index or "dmp" not in wins.index:
        return ""
    above = int((wins.loc["dmp"] > wins.loc["source_only"]).sum())
    text = f"DMP above source-only on {above} of {wins.shape[1]} tasks"
    if "source_only_bn" in wins.index:
        bn = int((wins.loc["dmp"] > wins.loc["source_only_bn"]).sum())
        text += f", above source-only with BN seeing the target on {bn}"
    return text + " (task means)."


def weights_line(df: pd.DataFrame) -> list[str]:
    """The pre-trained small CNNs' files the runs loaded, each with the sha256 its runs recorded and how many runs
    ("not recorded" for runs made before the trainer recorded it); nothing when no run loaded a file."""
    files = df[df["weights_file"].fillna("") != ""] if "weights_file" in df else df.iloc[0:0]
    if files.empty:
        return []
    parts = []
    for name, part in files.groupby("weights_file"):
        counts = part["weights"].value_counts()
        shas = sorted(counts.index, key=lambda w: (w == "not recorded", w))
        parts.append(f"`{name}` " + ", ".join(
            f"{'sha256 ' + w if w != 'not recorded' else w} ({counts[w]} run{'s' * int(counts[w] != 1)})" for w in shas))
    return ["Pre-trained small CNNs, loaded through `weights_path` (`python -m dmp pretrain-demo`, `--recipe digits` "
            "for the digits' file; made on demand, not committed), as the runs recorded them: " + "; ".join(parts)
            + ". Each table's version line names the file its rows loaded.", ""]


def avg(part: pd.DataFrame) -> float:
    """The Avg column of :func:`table`: the mean over tasks per seed, then over seeds, rounded as the tables round
    it (so that a note's number, or a difference of two, is what the tables show)."""
    return float(part.groupby("seed")["accuracy"].mean().mean().round(1))


def ordering(v: dict) -> str:
    """Whether the paper's ordering holds among the Avg ``v`` (method -> Avg): DMP at least both ablations, both
    above source-only."""
    holds = v["dmp"] >= max(v["dmp_no_ds"], v["dmp_no_al"]) and min(v["dmp_no_ds"], v["dmp_no_al"]) > v["source_only"]
    return "the paper's ordering holds" if holds else "the paper's ordering does not hold"
