"""The paper's ablation of the manifold metric: one row per (setting, metric) of the alignment loss (G, AG, LE), the
tasks of one dataset as columns, with their Mean."""
from __future__ import annotations

from ..runs import Cell, Run, default_split, reported_key
from . import register
from .base import TableKind, block_schema
from .notes import TASK_CELLS


@register
class ManifoldAblation(TableKind):
    name = "manifold_ablation"
    title = "Ablation of the manifold metric (G, AG, LE)"
    order = 3
    schema = block_schema(["dataset", "tasks", "methods", "metrics"], ("dataset", "tasks"), """
methods:
  type: object
  minProperties: 1
  additionalProperties: false
  properties: {vanilla: {$ref: "#/$defs/method"}, partial: {$ref: "#/$defs/method"}}
metrics: {type: array, items: {$ref: "#/$defs/metric"}, minItems: 1, uniqueItems: true}
""")

    def cells(self, suite, spec):
        dataset, cells = spec["dataset"], []
        for setting, method in spec["methods"].items():
            for metric in spec["metrics"]:
                row = f"{setting}_{metric}"
                for task in spec["tasks"]:
                    run = Run(dataset, setting, task, method, metric, "full", default_split(setting))
                    cells.append(Cell(self.name, dataset, row, task, run, ("accuracy",),
                                      reported_key(self.name, dataset, setting, method, metric, task, task)))
                cells.append(Cell(self.name, dataset, row, "Mean", None, ("accuracy",),
                                  reported_key(self.name, dataset, setting, method, metric, "Mean", "Mean")))
        return cells

    def row_label(self, row, tex=False):
        setting, metric = row.split("_", 1)
        return f"{setting.capitalize()}, {metric}"

    def notes(self, agg):
        return [TASK_CELLS]
