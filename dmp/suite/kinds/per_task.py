"""Tables of methods (rows) by tasks (columns) in one setting, one block per dataset: the paper's vanilla and partial
tables. A block's columns are its tasks and their Mean, or (``columns: classes``) the class-wise accuracies of its
one task and their mean."""
from __future__ import annotations

from typing import ClassVar

from ..runs import Cell, Run, default_split, reported_key
from .base import TableKind, block_schema
from .notes import TASK_CELLS, method_notes, metric_notes

SCHEMA = block_schema(["methods", "metric", "datasets"], ("methods", "metric"), """
datasets:
  type: object
  minProperties: 1
  propertyNames: {$ref: "#/$defs/name"}
  additionalProperties:
    type: object
    additionalProperties: false
    required: [tasks]
    properties:
      tasks: {$ref: "#/$defs/tasks"}
      columns: {enum: [tasks, classes], description: "classes: class-wise columns + mean of classes"}
      labels: {type: object, additionalProperties: {type: string}, description: "task -> printed column"}
      reported_as: {$ref: "#/$defs/name", description: "the paper dataset whose reported numbers this block
        is printed beside (a stand-in of it, e.g. a backbone trunk's activations of its images)"}
      methods: {type: array, items: {$ref: "#/$defs/method"}, minItems: 1, uniqueItems: true,
                description: "this block's rows, when not the table's methods (the paper's rows of it)"}
""")


class PerTask(TableKind):
    """Methods by tasks in the setting ``setting``; every run is a full-source run with the setting's target split."""

    setting: ClassVar[str] = "vanilla"
    schema = SCHEMA
    headline = True

    def cells(self, suite, spec):
        table, setting, cells = self.name, self.setting, []
        for dataset, block in spec["datasets"].items():
            labels, paper = block.get("labels", {}), block.get("reported_as", dataset)
            for method in suite.table_methods(block.get("methods", spec["methods"])):
                row = []
                for task in block["tasks"]:
                    run = Run(dataset, setting, task, method, spec["metric"], "full", default_split(setting))
                    if block.get("columns", "tasks") == "classes":
                        for name in suite.class_names(dataset):
                            col = suite.class_label(dataset, name)
                            row.append(Cell(table, dataset, method, col, run, ("per_class_accuracy", name),
                                            reported_key(table, paper, setting, method, "", task, col)))
                        row.append(Cell(table, dataset, method, "Mean", run, ("mean_class_accuracy",),
                                        reported_key(table, paper, setting, method, "", task, "Mean")))
                    else:
                        col = labels.get(task, task)
                        row.append(Cell(table, dataset, method, col, run, ("accuracy",),
                                        reported_key(table, paper, setting, method, "", col, col)))
                if len(block["tasks"]) > 1:
                    row.append(Cell(table, dataset, method, "Mean", None, ("accuracy",),
                                    reported_key(table, paper, setting, method, "", "Mean", "Mean")))
                cells += row
        return cells

    def notes(self, agg):
        return [TASK_CELLS, *metric_notes(agg), *method_notes(agg["row"])]
