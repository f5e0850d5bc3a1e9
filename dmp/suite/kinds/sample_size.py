"""The paper's sample-size table: one method trained on a few images per class; rows are source splits, columns
each task with each target split."""
from __future__ import annotations

from ..runs import Cell, Run, reported_key
from . import register
from .base import TableKind, block_schema


@register
class SampleSize(TableKind):
    name = "sample_size"
    title = "Recognition rates (%) with n^s_c (rows) / n^t_c (columns) images per class"
    order = 4
    schema = block_schema(["dataset", "tasks", "method", "source_splits", "target_splits"],
                          ("dataset", "tasks", "method", "setting", "metric"), """
source_splits: {type: array, items: {$ref: "#/$defs/split"}, minItems: 1, uniqueItems: true}
target_splits: {type: array, items: {$ref: "#/$defs/split"}, minItems: 1, uniqueItems: true}
""")

    def cells(self, suite, spec):
        dataset, setting, method, cells = spec["dataset"], spec.get("setting", "vanilla"), spec["method"], []
        for source_split in spec["source_splits"]:
            for task in spec["tasks"]:
                for target_split in spec["target_splits"]:
                    run = Run(dataset, setting, task, method, spec.get("metric", "G"), source_split, target_split)
                    variant = f"ns{source_split.lstrip('n')}_nt{target_split.lstrip('n')}"
                    cells.append(Cell(self.name, dataset, source_split, f"{task} {target_split}", run,
                                      ("accuracy",), reported_key(self.name, dataset, setting, method, variant,
                                                                  task, task), group=task))
        return cells

    def row_label(self, row, tex=False):
        return f"$n^s_c$={row}" if tex else f"n_s={row}"

    def notes(self, agg):
        return ["Rows: source split (nK = K images per class); columns: task and target split."]
