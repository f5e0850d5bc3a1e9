"""The paper's interpolation table: the class-wise accuracies of interpolated target features
``alpha h_i + (1 - alpha) h_j`` of one vanilla run, one row per alpha (the trainer saves alphas 0, 0.1, 0.3, 0.5)."""
from __future__ import annotations

from ..runs import Cell, Run, reported_key
from . import register
from .base import TableKind, block_schema


@register
class Interpolation(TableKind):
    name = "interpolation"
    title = "Class-wise recognition rates (%) of interpolations alpha h_i + (1 - alpha) h_j"
    order = 6
    schema = block_schema(["dataset", "task", "method", "alphas"], ("dataset", "task", "method", "metric"), """
alphas: {type: array, items: {enum: ["0", "0.1", "0.3", "0.5"]}, minItems: 1, uniqueItems: true}
""")

    def cells(self, suite, spec):
        dataset, method, task, cells = spec["dataset"], spec["method"], spec["task"], []
        run = Run(dataset, "vanilla", task, method, spec.get("metric", "G"), "full", "full")
        for alpha in spec["alphas"]:
            alpha = str(alpha)
            for name in suite.class_names(dataset):
                col = suite.class_label(dataset, name)
                cells.append(Cell(self.name, dataset, alpha, col, run,
                                  ("interpolation", alpha, "per_class_accuracy", name),
                                  reported_key(self.name, dataset, "vanilla", method, f"alpha{alpha}", task, col)))
            cells.append(Cell(self.name, dataset, alpha, "Mean", run, ("interpolation", alpha, "mean_class_accuracy"),
                              reported_key(self.name, dataset, "vanilla", method, f"alpha{alpha}", task, "Mean")))
        return cells

    def row_label(self, row, tex=False):
        return f"$\\alpha={row}$" if tex else f"alpha={row}"

    def notes(self, agg):
        if not (agg["key_column"] != agg["key_task"]).any():
            return []
        return ["Class-wise blocks: per-class target accuracy; their Mean is the mean of the per-class accuracies "
                "(the paper's VisDA definition), not the overall accuracy."]
