"""What the Office-31 study's sections share: the study's forms and methods, its runs (one row each, read through
:func:`studies.records.office31_runs`), the paper's numbers, a table of our rows beside the paper's, the gains over
source-only, and where a table's runs come from."""
from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from dmp.tables.reported import load_reported
from dmp.train.provenance import code_version
from studies.records import OFFICE31, ROOT, office31_runs

STUDY = OFFICE31
STUDY_DATASET = "office31_lite0_t128"
"""The study's head-only form: the trunk stored before the head (4 crops + flips per image)."""

DEEPER_DATASET = "office31_lite0_s5v20_t128"
"""The deeper form's data: the trunk stored before stage 5 (20 crops + flips per image); config/office31_lite_t128.yaml's
second vanilla block, so the suite trains and tables its runs like the study's."""


SUITE_RUNS = "runs/{}/vanilla/*/*/G/full-full/seed*/metrics.json"

TASKS = ["A->W", "D->W", "W->D", "A->D", "D->A", "W->A"]

METHODS = {"source_only": "Source only", "dann": "DANN", "cdan_e": "CDAN+E", "dmp_no_al": "DMP (No AL)",
           "dmp_no_ds": "DMP (No DS)", "dmp": "DMP"}

PARTIAL_METHODS = {"source_only": "Source only", "dann": "DANN", "pada": "PADA", "etn": "ETN", "dmp": "DMP", "dmp_ent": "DMP+ent"}

GAIN_TOLERANCE = 2.0  # points: a gain within this of the paper's counts as reproduced

DEEPER = "stages_5_on_v20"
"""The departure run on all six tasks: stages 5 and 6 fine-tuned with the head, 20 stored crops per image."""

HELD = "stages_5_on_v20_lr0"
"""The deeper form with the backbone's weights held, its BatchNorm layers tracking the source in training mode."""

FROZEN = "stages_5_on_v20_bnfrozen"
"""The deeper form with the backbone's BatchNorm layers frozen on their ImageNet statistics."""

ALL_LAYERS = "all_layers"
"""Every layer fine-tuned from the images (the paper's protocol but for the backbone and the 128 px crops)."""

ALL_FROZEN = "all_layers_bnfrozen"
"""Every layer fine-tuned, the backbone's BatchNorm layers on their ImageNet statistics."""

MEAN_ONE = "stages_5_on_v20_mean_one"
"""The deeper form with the vanilla intra-class term's class weights at c times the printed 1/c (weight_norm =
mean_one): DMP only, read against the deeper form's runs of the same task and seed."""


SAME_WITHIN = 3.0
"""Points: a change of source-only's accuracy below this does not count as the cause's (4 against 20 stored crops;
the deeper form's weights held against fine-tuned)."""


def departure_runs(root: Path = STUDY) -> pd.DataFrame:
    """The runs of every departure, one row each with its ``form``: ``departures/<form>/...``, and the deeper form
    :data:`DEEPER` from the suite's runs on :data:`DEEPER_DATASET` (with the runs of methods outside the table, such
    as source-only whose BatchNorm statistics see the target, that the departures study declares there)."""
    frames = [office31_runs("departures/*/*/*/seed*/metrics.json", root),
              office31_runs(SUITE_RUNS.format(DEEPER_DATASET), root)]
    forms = [lambda f: f["path"].map(lambda p: p[1]), lambda f: DEEPER]
    frames = [f.assign(form=form) for f, form in zip(frames, forms) if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def reported(setting: str = "vanilla") -> pd.DataFrame:
    """The paper's Office-31 table of ``setting`` (dmp/tables/reported_results.csv): a row per method, a column per
    task and ``Avg``."""
    rep = load_reported()
    rep = rep[(rep["table"] == setting) & (rep["dataset"] == "office31") & (rep["setting"] == setting)]
    return rep.pivot_table(index="method", columns="task", values="value_num").rename(columns={"Mean": "Avg"})


def fmt(values: pd.Series) -> str:
    """Mean ± sample std (one value: the value), one decimal."""
    return f"{values.mean():.1f} ± {values.std(ddof=1):.1f}" if len(values) > 1 else f"{values.mean():.1f}"


def study_table(runs: pd.DataFrame, paper: pd.DataFrame, methods: dict = METHODS) -> tuple[list[str], dict]:
    """Our mean ± std over seeds per task and Avg (per seed, the mean over the 6 tasks), the paper's row under it."""
    lines = ["| method | " + " | ".join(TASKS) + " | Avg | seeds |", "|---|" + "---|" * (len(TASKS) + 2)]
    avgs = {}
    for method, name in methods.items():
        part = runs[runs["method"] == method]
        if part.empty:
            continue
        per_task = part.pivot_table(index="seed", columns="task", values="accuracy")
        complete = per_task.dropna()
        avg = complete[[t for t in TASKS if t in complete]].mean(axis=1) if len(complete.columns) == 6 else None
        avgs[method] = (per_task, avg)
        cells = [fmt(per_task[t].dropna()) if t in per_task else "–" for t in TASKS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {fmt(avg) if avg is not None else '–'} | "
                     f"{part['seed'].nunique()} |")
        if method in paper.index:
            lines.append(f"| {name}, paper (ResNet-50, reported) | " + " | ".join(
                f"{paper.loc[method, t]:.1f}" for t in TASKS) + f" | {paper.loc[method, 'Avg']:.1f} | |")
    return lines, avgs


def gain_table(avgs: dict, paper: pd.DataFrame, methods: dict = METHODS) -> list[str]:
    """Each method's gain over source-only: per seed, its Avg minus source-only's Avg of the same seed, on the seeds
    both ran all six tasks (the count in the last column); the tasks where it is above source-only compare the two
    on those seeds too."""
    if "source_only" not in avgs or avgs["source_only"][1] is None:
        return []
    so_tasks, so = avgs["source_only"]
    lines = ["| method | gain over source-only, ours (Avg, mean ± std over seeds) | paper's gain | ours - paper | "
             f"within {GAIN_TOLERANCE:g} points | tasks above source-only (ours) | seeds |", "|---|---|---|---|---|---|---|"]
    for method, (per_task, avg) in avgs.items():
        if method == "source_only" or avg is None:
            continue
        gain = (avg - so).dropna()
        if gain.empty:
            continue
        seeds = list(gain.index)
        above = sum(per_task.loc[seeds, t].mean() > so_tasks.loc[seeds, t].mean() for t in TASKS)
        if method not in paper.index:  # a row the paper's table has not (ETN on Office-31)
            lines.append(f"| {methods[method]} - Source only | {fmt(gain)} | – | – | – | {above} of 6 | {len(seeds)} |")
            continue
        paper_gain = paper.loc[method, "Avg"] - paper.loc["source_only", "Avg"]
        diff = gain.mean() - paper_gain
        lines.append(f"| {methods[method]} - Source only | {fmt(gain)} | {paper_gain:+.1f} | {diff:+.1f} | "
                     f"{'yes' if abs(diff) <= GAIN_TOLERANCE else 'no'} | {above} of 6 | {len(seeds)} |")
    return lines if len(lines) > 2 else []       # no method ran all six tasks beside source-only


def task_cells(part: pd.DataFrame) -> tuple[list[str], str]:
    """One row of a check table: mean ± std over seeds per task (TASKS order, "–" where none ran) and the Avg over
    the seeds that ran every task ("–" unless some did)."""
    per_task = part.pivot_table(index="seed", columns="task", values="accuracy")
    cells = [fmt(per_task[t].dropna()) if t in per_task else "–" for t in TASKS]
    complete = per_task.dropna()
    avg = fmt(complete[TASKS].mean(axis=1)) if len(complete.columns) == len(TASKS) and len(complete) else "–"
    return cells, avg


def six_task_seeds(runs: pd.DataFrame) -> list[int]:
    """The seeds whose source-only and DMP each ran all six tasks (none without runs): a seed one of them has not
    finished would give the two rows different seeds on some task."""
    if runs.empty:
        return []
    six = [{s for s, g in runs[runs["method"] == m].groupby("seed") if set(g["task"]) >= set(TASKS)}
           for m in ("source_only", "dmp")]
    return sorted(six[0] & six[1])


def counted(n: int, noun: str) -> str:
    """``"1 run"``, ``"2 runs"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def provenance(runs: pd.DataFrame) -> str:
    """Where a table's runs come from: dataset and its version, weights file, commits and code versions; a run made
    in a checkout with changes (a ``-dirty`` commit) is traced by its code version to the commit whose dmp/ it is."""
    dirty = sorted({c for c, g in zip(runs["code"], runs["commit"]) if g.endswith("-dirty")})
    traced = commits_of(dirty)
    codes = ", ".join(f"{c} ({counted(n, 'run')})" for c, n in runs["code"].value_counts().items())
    text = (f"Dataset `{', '.join(runs['dataset'].unique())}` version {', '.join(runs['version'].unique())}; "
            f"weights sha256 {', '.join(w[:12] for w in runs['weights'].unique())}; commits "
            f"{', '.join(sorted(runs['commit'].unique()))}; code versions (the hash of dmp/ a run executed) "
            f"{codes}; "
            f"{counted(len(runs), 'run')}, {counted(runs['seed'].nunique(), 'seed')}.")
    if dirty:
        text += (" The runs of a `-dirty` commit ran with another commit's dmp/: " + "; ".join(
            f"code version {c} is dmp/ of commit {traced[c]}" if c in traced else f"code version {c} is dmp/ of none "
            f"of the last {TRACE_DEPTH} commits that touched dmp/" for c in dirty) + " (`git archive <commit> dmp` hashes to it).")
    return text


TRACE_DEPTH = 80
"""How many of the commits that touched dmp/ (newest first) a dirty run's code version is looked up in."""


def commits_of(codes: list[str]) -> dict[str, str]:
    """For each code version (12 hex), the newest of the last :data:`TRACE_DEPTH` commits that touched dmp/ whose dmp/
    (``git archive``, extracted) the trainer's own :func:`dmp.train.provenance.code_version` hashes to it."""
    if not codes:
        return {}
    found = {}
    log = subprocess.run(["git", "log", f"-{TRACE_DEPTH}", "--format=%H", "--", "dmp"], cwd=ROOT, capture_output=True,
                         text=True)
    for commit in log.stdout.split():
        tar = subprocess.run(["git", "archive", commit, "dmp"], cwd=ROOT, capture_output=True).stdout
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            archive.extractall(tmp, filter="data")
            code = code_version(root=Path(tmp) / "dmp")[:12]
        if code in codes and code not in found:
            found[code] = commit[:10]
        if len(found) == len(codes):
            break
    return found
