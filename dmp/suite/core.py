"""The validated suite: a suite config (config/config.yaml, config/demo.yaml, already schema-checked) with what the
schema cannot check (registered methods; datasets, tasks and splits of the dataset registry; the trainer settings)
and the dataset registry's answers the rest of the suite asks for."""
from __future__ import annotations

import os

from .arguments import TrainingArguments
from .cells import TableCells
from .records import RunRecords
from .schema import SCHEMA_FILE, results_folder
from .signature import Signatures


class Suite(TableCells, TrainingArguments, Signatures, RunRecords):
    """A validated suite configuration: its tables' cells and runs (:class:`~dmp.suite.cells.TableCells`), the
    trainer arguments of each run (:class:`~dmp.suite.arguments.TrainingArguments`), their signatures
    (:class:`~dmp.suite.signature.Signatures`) and what a run folder holds (:class:`~dmp.suite.records.RunRecords`)."""

    def __init__(self, config: dict, registry=None):
        if not isinstance(config, dict) or not isinstance(config.get("seeds"), list) \
                or not isinstance(config.get("tables"), dict):
            raise ValueError(f"a suite config needs `seeds` (a list) and `tables` (a mapping): see {SCHEMA_FILE}")
        self.config = config
        self.results = results_folder(config.get("results", "results"))
        self.seeds = [int(s) for s in config["seeds"]]
        self.tables = dict(config["tables"])
        # false: only the rows of DMP, its variants and source-only (the registry's ``comparison`` flag)
        self.comparison_methods = bool(config.get("comparison_methods", True))
        self._registry = registry
        self._specs: dict = {}
        self._expected: dict = {}
        self._in_place: dict = {}
        self.validate()

    # ---------------------------------------------------------------- dataset registry
    @property
    def registry(self):
        if self._registry is None:
            from dmp.data import registry
            self._registry = registry
        return self._registry

    def spec(self, dataset: str):
        """The registry's DatasetSpec (looked up once per suite)."""
        if dataset not in self._specs:
            self._specs[dataset] = self.registry.get_dataset(dataset)
        return self._specs[dataset]

    def domains(self, dataset: str, task: str, where: str) -> tuple[str, str]:
        """Domain config names of a task in paper letters; errors name the config key ``where``."""
        try:
            spec = self.spec(dataset)
        except KeyError as err:
            from ..config import did_you_mean

            known = self.registry.dataset_names()
            files = [os.path.join(d, dataset, "dataset.yaml") for d in self.registry.declaration_dirs()]
            places = " or ".join(f if os.path.relpath(f).startswith("..") else os.path.relpath(f) for f in files)
            raise ValueError(f"config {where}: unknown dataset {dataset!r}{did_you_mean(dataset, known)}: declare it "
                             f"in {places} (every key: docs/datasets.md, \"Bring your own image dataset\"; a folder "
                             f"of your own: DMP_DATASETS_DIR); known datasets: {', '.join(known)}") from err
        parts = task.split("->")
        shorts = {d.short: d.name for d in spec.domains}
        if len(parts) != 2 or any(p not in shorts for p in parts) or parts[0] == parts[1]:
            raise ValueError(f"config {where}: unknown task {task!r} for dataset {dataset!r}; tasks are "
                             f"'S->T' with S != T among the domains {sorted(shorts)}")
        return shorts[parts[0]], shorts[parts[1]]

    def class_names(self, dataset: str) -> tuple[str, ...]:
        return tuple(self.spec(dataset).classes)

    def class_label(self, dataset: str, name: str) -> str:
        """The class name as the paper prints it (config ``class_labels``), else the registry name."""
        return self.config.get("class_labels", {}).get(dataset, {}).get(name, name)

    # ---------------------------------------------------------------- validation
    def validate(self):
        """Check what the JSON schema cannot: methods exist in the method registry; datasets, tasks and (image
        datasets) splits exist in the dataset registry."""
        self.validate_methods()
        for table, cells in self.table_cells_by_table().items():
            for run in dict.fromkeys(c.run for c in cells if c.run is not None):
                where = f"tables.{table} ({run.dataset} {run.task})"
                self.domains(run.dataset, run.task, where)
                spec = self.spec(run.dataset)
                for split in (run.source_split, run.target_split):
                    if spec.kind == "images" and split not in spec.splits:
                        raise ValueError(f"config {where}: dataset {run.dataset!r} has no split {split!r} "
                                         f"(its splits: {', '.join(spec.splits)})")
        if "train" in self.config or "overrides" in self.config:
            self.validate_training()
