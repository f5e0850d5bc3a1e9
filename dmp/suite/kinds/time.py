"""The paper's time table: methods by (dataset, task) columns, seconds per source epoch (s/E) or per batch (s/B)
of vanilla runs, in one block; the lowest time of a column is the best."""
from __future__ import annotations

from ..runs import Cell, Run, default_split, reported_key
from . import register
from .base import TableKind, block_schema
from .notes import method_notes

BLOCK = "all"  # the one block: its columns are tasks of several datasets


@register
class Time(TableKind):
    name = "time"
    title = "Training time: seconds per source epoch (s/E) or per batch (s/B)"
    order = 5
    best = "min"
    unit_headers = True
    schema = block_schema(["methods", "columns"], ("methods", "setting", "metric"), """
columns:
  type: array
  minItems: 1
  items:
    type: object
    additionalProperties: false
    required: [dataset, task, unit]
    properties:
      dataset: {$ref: "#/$defs/name"}
      task: {$ref: "#/$defs/task"}
      unit: {enum: [s/E, s/B], description: "seconds per source epoch or per batch"}
""")

    def cells(self, suite, spec):
        cells = []
        for method in suite.table_methods(spec["methods"]):
            for col in spec["columns"]:
                setting = spec.get("setting", "vanilla")
                run = Run(col["dataset"], setting, col["task"], method, spec.get("metric", "G"), "full",
                          default_split(setting))
                key = "seconds_per_iter" if col["unit"] == "s/B" else "seconds_per_epoch"
                cells.append(Cell(self.name, BLOCK, method, col["task"], run, (key,),
                                  reported_key(self.name, col["dataset"], setting, method, "", col["task"],
                                               col["task"]), unit=col["unit"], group=col["dataset"]))
        return cells

    def block_label(self, block):
        return "Per task (vanilla runs)" if block == BLOCK else super().block_label(block)

    def notes(self, agg):
        return [*method_notes(agg["row"]),
                "s/E = seconds per source epoch, s/B = seconds per batch (iteration), from metrics.json "
                "seconds_per_epoch / seconds_per_iter; they depend on the machine."]
