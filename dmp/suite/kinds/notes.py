"""Notes that several table kinds print: which metrics.json value the columns of a block read, and the footnotes of
the methods whose rows are ours."""
from __future__ import annotations

from .base import DATASET_LABELS

TASK_CELLS = ("Task cells: overall target accuracy; Mean: mean over the tasks of the per-seed accuracies "
              "(no std printed, as in the paper).")
# Datasets whose paper "Mean" is the mean of the per-class accuracies (the VisDA-2017 challenge metric): their
# blocks say in a note which accuracy each column prints, as the two definitions differ on an imbalanced target.
CLASS_MEAN_DATASETS = ("visda2017",)
METRIC_TEXT = {  # the metrics.json keys a cell of a table of methods by tasks can read, as the notes name them
    "accuracy": "overall target accuracy (metrics.json `accuracy`: correct predictions / target images)",
    "mean_class_accuracy": "mean of the per-class target accuracies (metrics.json `mean_class_accuracy`)",
    "per_class_accuracy": "per-class target accuracy (metrics.json `per_class_accuracy`)"}


def method_notes(rows) -> list[str]:
    """The registry's footnote of each method whose row is ours (where it departs from its own paper)."""
    from dmp import methods
    return [f"{methods.label(m)}: {methods.get(m).footnote}" for m in dict.fromkeys(rows)
            if m in methods.names() and methods.get(m).footnote]


def metric_notes(agg) -> list[str]:
    """Which metrics.json value the columns of a block print, for class-wise blocks and for the blocks of
    :data:`CLASS_MEAN_DATASETS`, read from the cells themselves (``value_key``)."""
    if "value_key" not in agg:
        return []
    out = []
    for block in dict.fromkeys(agg["block"]):
        cells = agg[(agg["block"] == block) & ~agg["derived"].astype(bool)]
        keys = cells["value_key"].str.split("/").str[0]
        class_wise = keys.eq("per_class_accuracy")
        if not class_wise.any() and block not in CLASS_MEAN_DATASETS:
            continue
        parts = [f"class columns: {METRIC_TEXT['per_class_accuracy']}"] if class_wise.any() else []
        for column, key in dict.fromkeys(zip(cells["column"][~class_wise], keys[~class_wise])):
            text = METRIC_TEXT.get(key, f"metrics.json `{key}`")
            if block in CLASS_MEAN_DATASETS and key == "accuracy":
                text += (", not the mean of the per-class accuracies (`mean_class_accuracy`, also recorded), which "
                         "is the Mean of the paper's class-wise VisDA-2017 vanilla table")
            elif block in CLASS_MEAN_DATASETS and key == "mean_class_accuracy":
                text += ", the paper's VisDA-2017 definition, not the overall accuracy (`accuracy`, also recorded)"
            parts.append(f"{column}: {text}")
        out.append(f"{DATASET_LABELS.get(block, block)}: " + "; ".join(parts) + ".")
    return out
