"""Source-only and DMP of the Office-31 study by what adapts: the head-only form, the deeper form with the backbone's
weights held, with Adam, with SGD and with its BatchNorm on the ImageNet statistics, and every layer fine-tuned from
the images; each form's gain on the tasks and seeds every compared form ran, and why source-only falls in the
deeper form."""
from __future__ import annotations

import pandas as pd

from studies.office31.common import (ALL_FROZEN, ALL_LAYERS, DEEPER, FROZEN, HELD, METHODS, SAME_WITHIN, TASKS,
                                     provenance)

FORMS = {"study": "head only (the study's)", HELD: "stages 5-6, weights held (lr 0)",
         DEEPER: "stages 5-6, Adam (the form above)", "stages_5_on_v20_sgd": "stages 5-6, SGD",
         FROZEN: "stages 5-6, BatchNorm on ImageNet statistics", ALL_LAYERS: "every layer (128 px, from the images)",
         ALL_FROZEN: "every layer, BatchNorm on ImageNet statistics"}


def by_what_adapts(dep: pd.DataFrame, study: pd.DataFrame, paper: pd.DataFrame) -> list[str]:
    """Source-only and DMP on each task and seed where a deeper form other than :data:`DEEPER` ran them: the study's
    head-only run, the deeper form with the backbone's weights held (its BatchNorm layers still tracking the source),
    with Adam, with SGD, and with the backbone's BatchNorm on its ImageNet statistics, and every layer fine-tuned from
    the images, with its BatchNorm layers training or on their ImageNet statistics; "–" where a form has no run."""
    runs = dep[dep["method"].isin(["source_only", "dmp"])] if len(dep) else dep
    if runs.empty:
        return []
    form = runs["form"]
    keys = sorted({(m, t, s) for m, t, s, f in zip(runs["method"], runs["task"], runs["seed"], form)
                   if f in FORMS and f != DEEPER}, key=lambda k: (k[0] != "source_only", TASKS.index(k[1]), k[2]))
    if not keys:
        return []
    cells = {("study", m, t, s): a for m, t, s, a in zip(study["method"], study["task"], study["seed"],
                                                          study["accuracy"])}
    cells.update({(f, m, t, s): a for f, m, t, s, a in zip(form, runs["method"], runs["task"], runs["seed"],
                                                            runs["accuracy"])})
    lines = ["| run | task | seed | " + " | ".join(FORMS.values()) + " |", "|---|---|---|" + "---|" * len(FORMS)]
    for m, t, s in keys:
        lines.append(f"| {METHODS[m]} | {t} | {s} | " + " | ".join(
            f"{cells[(f, m, t, s)]:.1f}" if (f, m, t, s) in cells else "–" for f in FORMS) + " |")
    other = runs[form.isin([f for f in FORMS if f not in ("study", DEEPER)])]
    tasks = sorted({(t, s) for _, t, s in keys}, key=lambda k: (TASKS.index(k[0]), k[1]))
    return ["Source-only and DMP by what adapts (target accuracy, last iterate; the deeper forms' runs: "
            + provenance(other) + ")", "", *lines, "",
            *_statistics_reading(cells, tasks),
            *_gain_by_form(cells, tasks, paper, ("study", DEEPER, FROZEN),
                           "The deeper form with the backbone's BatchNorm on its ImageNet statistics"),
            *_all_layers_reading(cells, tasks, paper)]


def form_means(cells: dict, keys: list, forms: tuple, methods: tuple) -> tuple[list, dict]:
    """The (task, seed) keys where every form ran every method (``cells``: (form, method, task, seed) -> accuracy),
    and each (form, method)'s mean accuracy over them."""
    keys = [(t, s) for t, s in keys if all((f, m, t, s) in cells for f in forms for m in methods)]
    return keys, {(f, m): sum(cells[(f, m, t, s)] for t, s in keys) / len(keys)
                  for f in forms for m in methods} if keys else {}


def _gain_by_form(cells: dict, keys: list, paper: pd.DataFrame, forms: tuple, title: str) -> list[str]:
    """Over the tasks and seeds where source-only and DMP ran in every one of ``forms``: the mean of each accuracy
    and of DMP's gain per form, beside the paper's mean gain on those tasks."""
    keys, mean = form_means(cells, keys, forms, ("source_only", "dmp"))
    if not keys:
        return []
    paper_gain = sum(paper.loc["dmp", t] - paper.loc["source_only", t] for t, _ in keys) / len(keys)
    parts = [f"{FORMS[f]}: source-only {mean[(f, 'source_only')]:.1f}, DMP {mean[(f, 'dmp')]:.1f}, gain "
             f"{mean[(f, 'dmp')] - mean[(f, 'source_only')]:+.1f}" for f in forms]
    return [f"**{title}** (mean over {', '.join(f'{t} seed {s}' for t, s in keys)}): " + "; ".join(parts)
            + f". The paper's gain on these tasks: {paper_gain:+.1f}.", ""]


def _all_layers_reading(cells: dict, keys: list, paper: pd.DataFrame) -> list[str]:
    """Every layer fine-tuned against the head-only and the deeper forms (and every layer with the backbone's
    BatchNorm on its ImageNet statistics, where that ran on the same tasks and seeds); and, where the frozen mode ran
    on more tasks or seeds than the default, the frozen mode alone against the head-only and deeper forms there."""
    forms = ("study", DEEPER, ALL_LAYERS)
    both = form_means(cells, keys, forms + (ALL_FROZEN,), ("source_only", "dmp"))[0]
    lines = _gain_by_form(cells, keys, paper, forms + ((ALL_FROZEN,) if both else ()), "Every layer fine-tuned (the "
                          "paper's protocol at 128 px crops, EfficientNet-Lite0)")
    if len(form_means(cells, keys, ("study", DEEPER, ALL_FROZEN), ("source_only", "dmp"))[0]) > len(both):
        lines += _gain_by_form(cells, keys, paper, ("study", DEEPER, ALL_FROZEN), "Every layer fine-tuned with the "
                               "backbone's BatchNorm on its ImageNet statistics, on every task and seed it ran")
    return lines


def _statistics_reading(cells: dict, keys: list) -> list[str]:
    """Where the deeper form ran with the weights held: whether source-only's fall from the head-only form comes
    with the weights held too, as far or further (the BatchNorm statistics), or needs the weight updates."""
    held, mean = form_means(cells, keys, ("study", HELD, DEEPER), ("source_only",))
    if not held:
        return []
    fall_held = mean[(HELD, "source_only")] - mean[("study", "source_only")]
    fall = mean[(DEEPER, "source_only")] - mean[("study", "source_only")]
    where = ", ".join(f"{t} seed {s}" for t, s in held)
    if fall < -SAME_WITHIN and fall_held <= fall + SAME_WITHIN:
        verdict = ("the fall comes with the weights held, as far or further: it is the BatchNorm layers of stages 5 "
                   "and 6 re-estimating their statistics on the source batches (in the head-only form these layers "
                   f"keep their ImageNet statistics), not the weight updates (they change it by {fall - fall_held:+.1f})")
    else:
        verdict = "the weights held do not give the same fall: the weight updates are part of it"
    return [f"**Why source-only falls in the deeper form** ({where}): against the head-only form, {fall:+.1f} points "
            f"with the stages fine-tuned and {fall_held:+.1f} with their weights held; {verdict}.", ""]
