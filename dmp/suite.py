"""The logic behind the Snakemake suite: which training runs each paper table needs, where each run lives, and the
``python -m dmp train`` arguments of a run.  The Snakefile and ``workflow/rules/*.smk`` only call these functions.

A *run* is one training job (dataset, setting, task, method, metric, source/target split, seed); it lives in
``<results>/runs/<dataset>/<setting>/<S-T>/<method>/<metric>/<source_split>-<target_split>/seed<seed>/`` and its
``metrics.json`` is the only file the tables read.  A *cell* is one printed number of a table: it names the run (all
seeds) it comes from and the path of the value inside ``metrics.json``.

``python -m dmp.suite prepare RUN_DIR SIGNATURE`` is called by the train rule before the trainer: it removes a
checkpoint that was written for other code or other arguments, so a resumed run never mixes the two.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import yaml

from .commands import command_main

TABLES = ("vanilla", "partial", "manifold_ablation", "sample_size", "time", "interpolation")
PACKAGE_DIR = Path(__file__).resolve().parent
# Code that does not change a training result: editing it must not rerun the (expensive) training jobs.
NOT_TRAINING_CODE = ("tables", "figures", "suite.py", "metrics.py")


def task_slug(task: str) -> str:
    """'A->W' (paper letters) -> 'A-W' (the run folder name)."""
    return task.replace("->", "-")


def task_from_slug(slug: str) -> str:
    """'A-W' -> 'A->W'."""
    source, target = slug.split("-")
    return f"{source}->{target}"


@dataclass(frozen=True, order=True)
class Run:
    """One training job; ``seed=None`` stands for the run on every seed (what a table cell averages)."""
    dataset: str
    setting: str
    task: str  # paper letters, e.g. "A->W"
    method: str
    metric: str
    source_split: str
    target_split: str
    seed: int | None = None
    # Non-default trainer settings of a figure's run (``lambda1=0.5,lambda2=100``, ``k=3``; see
    # :func:`variant_name`), a folder of its own before ``seed<k>``; "" for every table run.
    variant: str = ""

    def folder(self, results: str) -> str:
        """Run directory (``seed`` must be set)."""
        if self.seed is None:
            raise ValueError(f"run {self} has no seed: cannot name its folder")
        variant = f"/{self.variant}" if self.variant else ""
        return (f"{results}/runs/{self.dataset}/{self.setting}/{task_slug(self.task)}/{self.method}/{self.metric}/"
                f"{self.source_split}-{self.target_split}{variant}/seed{self.seed}")

    def metrics_path(self, results: str) -> str:
        return f"{self.folder(results)}/metrics.json"

    def with_seed(self, seed: int) -> "Run":
        return replace(self, seed=seed)


RUN_PATTERN = ("{results}/runs/{dataset}/{setting}/{task}/{method}/{metric}/{source_split}-{target_split}/"
               "seed{seed}/metrics.json")
# Runs of the figures with non-default trainer settings (rule train_variant, workflow/rules/figures.smk).
VARIANT_RUN_PATTERN = RUN_PATTERN.replace("/seed{seed}", "/{variant}/seed{seed}")
VARIANT_RE = r"[a-z0-9_]+=[A-Za-z0-9_.+-]+(,[a-z0-9_]+=[A-Za-z0-9_.+-]+)*"


def variant_name(values: dict) -> str:
    """The folder name of a run with trainer settings ``values`` (``{"lambda1": 0.5, "k": 3}`` ->
    ``k=3,lambda1=0.5``): keys sorted, values in YAML flow syntax (read back by :func:`variant_values`)."""
    return ",".join(f"{k}={yaml_value(values[k])}" for k in sorted(values))


def variant_values(variant: str) -> dict:
    """The trainer settings of a variant folder name (inverse of :func:`variant_name`)."""
    if not variant:
        return {}
    return {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in variant.split(","))}


@dataclass(frozen=True)
class Cell:
    """One printed number: ``table/block/row/column`` place it, ``run`` (seed None) and ``value`` (a key path into
    metrics.json) compute it, ``reported`` is its key in dmp/tables/reported_results.csv.  ``run`` is None for a
    derived "Mean" column (the mean over the row's other cells, per seed)."""
    table: str
    block: str  # dataset name (one sub-table per dataset)
    row: str  # row id: method (vanilla/partial/time), "<setting>_<metric>" (ablation), source split, alpha
    column: str  # printed column: task, class (as printed), "Mean"
    run: Run | None
    value: tuple[str, ...]
    reported: tuple[tuple[str, str], ...]  # (("table", ..), ("dataset", ..), ...) key into the reported CSV
    unit: str = "%"
    group: str = ""  # column group (sample size: the task)

    @property
    def reported_key(self) -> dict[str, str]:
        return dict(self.reported)


def _reported(table, dataset, setting, method, variant, task, column):
    return (("table", table), ("dataset", dataset), ("setting", setting), ("method", method), ("variant", variant),
            ("task", task), ("column", column))


def default_split(setting: str) -> str:
    """The trainer's default target split for a setting (see the training CLI contract)."""
    return "partial" if setting == "partial" else "full"


# Trainer keys the suite sets for every run from the tables, ``seeds`` and ``threads``: a config's ``train:`` or
# ``overrides[].set`` must not set them (they would be overridden, or would relabel the run).
RUN_KEYS = ("dataset", "source", "target", "setting", "method", "metric", "seed", "source_split", "target_split")
SUITE_KEYS = (*RUN_KEYS, "threads")


def results_folder(value) -> str:
    """The config's ``results`` folder, checked: a non-empty path other than the filesystem root (every output is
    planned under it) without braces (Snakemake would read ``{name}`` in an output path as a wildcard)."""
    if not isinstance(value, str) or not value.strip() or not value.strip("/") or any(c in value for c in "{}"):
        raise ValueError(f"config results = {value!r:.60}: the folder of every output must be a non-empty path, not "
                         f"the filesystem root, without braces {{ }} (Snakemake wildcards)")
    return value


SCHEMA_FILE = "workflow/schemas/config.schema.yaml"  # the suite config's schema (the Snakefile checks against it)
# The strings Snakemake gives for `--config key=true` / `key=false` (it reads only True and False as booleans).
BOOLEAN_WORDS = {"true": True, "false": False}


def ready_for_schema(config: dict, schema_path) -> None:
    """Make the config Snakemake gives (the config file, then each ``--config key=value``) ready for the schema check,
    in place: a top-level key the schema does not know is refused in one line naming the closest known key (the
    schema's own error quotes the whole schema); ``--config comparison_methods=false`` gives the string 'false',
    taken as the boolean for the schema's boolean keys."""
    known = (yaml.safe_load(Path(schema_path).read_text()) or {}).get("properties", {})
    unknown = [k for k in config if k not in known]
    if unknown:
        raise ValueError(unknown_key_message(str(unknown[0]), "", known))
    for key, value in config.items():
        if known[key].get("type") == "boolean" and isinstance(value, str) and value.lower() in BOOLEAN_WORDS:
            config[key] = BOOLEAN_WORDS[value.lower()]



def unknown_key_message(key: str, where: str, known) -> str:
    """The one line for a key the suite config's schema has no place for (``where``: the dotted path above it)."""
    from .config import did_you_mean

    keys = f"; the keys there: {', '.join(known)}" if known else ""
    return (f"config key {(where + '.' if where else '') + key!r} is not a key of the suite config"
            f"{did_you_mean(key, known)}{keys} (see {SCHEMA_FILE})")


def schema_problem(err: Exception) -> str:
    """One line for a suite config the schema check refused: the key's path and what is wrong with it, instead of
    the whole schema that ``snakemake.utils.validate``'s error quotes (it raises its ``WorkflowError`` while
    handling jsonschema's error); any other error: its own text."""
    import jsonschema

    found = [e for e in (err, err.__cause__, err.__context__) if isinstance(e, jsonschema.exceptions.ValidationError)]
    if not found:
        return " ".join(str(err).split())
    error = found[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        extra = [k for k in error.instance if k not in known]
        if extra:
            return unknown_key_message(str(extra[0]), where, known)
    message = " ".join(error.message.split())
    message = message if len(message) <= 200 else message[:197] + "..."
    return f"config {'key ' + repr(where) if where else 'file'}: {message} (see {SCHEMA_FILE})"


class Suite:
    """A validated suite configuration (config/config.yaml or config/demo.yaml, already schema-checked)."""

    def __init__(self, config: dict, registry=None):
        if not isinstance(config, dict) or not isinstance(config.get("seeds"), list) \
                or not isinstance(config.get("tables"), dict):
            raise ValueError("a suite config needs `seeds` (a list) and `tables` (a mapping): see "
                             "workflow/schemas/config.schema.yaml")
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

    # ---------------------------------------------------------------- registry
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
            from .config import did_you_mean

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

    def validate_methods(self):
        """Every method a table names is registered (dmp/methods/); the error names the config key."""
        from . import methods

        def check(where, name):
            if name not in methods.names():
                raise ValueError(f"config {where}: {methods.unknown(name)}")

        for table, spec in self.tables.items():
            single = spec.get("method") if isinstance(spec, dict) else None
            listed = spec.get("methods", []) if isinstance(spec, dict) else []
            listed = listed.values() if isinstance(listed, dict) else listed
            for name in ([single] if single else []) + list(listed):
                check(f"tables.{table}.method(s)", name)
            for dataset, block in (spec.get("datasets") or {}).items() if isinstance(spec, dict) else []:
                for name in block.get("methods", []):
                    check(f"tables.{table}.datasets.{dataset}.methods", name)

    def table_methods(self, listed) -> list[str]:
        """The rows of a table or block: ``listed``, without the comparison methods when ``comparison_methods`` is
        false."""
        if self.comparison_methods:
            return list(listed)
        from . import methods
        return [m for m in listed if not methods.get(m).comparison]

    def validate_training(self):
        """Check the trainer settings before any job runs: every key of ``train:`` and ``overrides[].set`` against
        the trainer's registry (dmp/config.py), then the config each run of the tables would train with (what
        ``python -m dmp train`` will resolve, its weights file included, and ``k`` <= the dataset's classes).  Errors
        name the config key."""
        from .config import ConfigError, check_values, parse_overrides, resolve

        sections = [("train", self.config.get("train") or {})] + [
            (f"overrides[{i}].set", e["set"]) for i, e in enumerate(self.config.get("overrides", []))]
        for where, values in sections:
            reserved = [k for k in SUITE_KEYS if isinstance(values, dict) and k in values]
            if reserved:
                raise ConfigError(f"config {where}.{reserved[0]}: '{reserved[0]}' is set for each run by the suite "
                                  f"(from the tables, `seeds` and `threads`), it cannot be given in `train` or "
                                  f"`overrides`")
            check_values(values, f"config {where}")
        for run in sorted({r.with_seed(self.seeds[0]) for r in self.all_runs()}):
            user = parse_overrides(self.train_args(run))
            try:  # a weights file is checked unless it is the demo's, which rule demo_weights writes first
                cfg = resolve(user, check_files=user.get("weights_path") != self.demo_weights())
            except ConfigError as err:
                where = " and ".join(w for w, _ in self._layers(run))
                raise ConfigError(f"config {where}, run {run.folder(self.results)}: {err}") from None
            classes = len(self.class_names(run.dataset))
            if cfg["k"] > classes > 0:  # 0: a user dataset whose classes are read from its data, not fetched yet
                where = next((f"config {w}.k" for w, v in reversed(self._layers(run)) if "k" in v), "preset k")
                raise ConfigError(f"{where} = {cfg['k']} is larger than the number of classes of dataset "
                                  f"{run.dataset!r} ({classes}), used by the tables (run {run.folder(self.results)})")

    # ---------------------------------------------------------------- tables -> cells
    def table_cells_by_table(self) -> dict[str, list[Cell]]:
        return {t: self.table_cells(t) for t in TABLES if t in self.tables}

    def table_cells(self, table: str) -> list[Cell]:
        """Every printed cell of ``table`` (ours only; reported baseline rows come from the CSV)."""
        if table not in self.tables:
            raise KeyError(f"table {table!r} is not in this config's 'tables' (has: {sorted(self.tables)})")
        spec = self.tables[table]
        return getattr(self, f"_cells_{table}")(spec)

    def _cells_per_task(self, table: str, spec: dict) -> list[Cell]:
        setting = "partial" if table == "partial" else "vanilla"
        cells = []
        for dataset, block in spec["datasets"].items():
            labels, paper = block.get("labels", {}), block.get("reported_as", dataset)
            for method in self.table_methods(block.get("methods", spec["methods"])):
                row = []
                for task in block["tasks"]:
                    run = Run(dataset, setting, task, method, spec["metric"], "full", default_split(setting))
                    if block.get("columns", "tasks") == "classes":
                        for name in self.class_names(dataset):
                            col = self.class_label(dataset, name)
                            row.append(Cell(table, dataset, method, col, run, ("per_class_accuracy", name),
                                            _reported(table, paper, setting, method, "", task, col)))
                        row.append(Cell(table, dataset, method, "Mean", run, ("mean_class_accuracy",),
                                        _reported(table, paper, setting, method, "", task, "Mean")))
                    else:
                        col = labels.get(task, task)
                        row.append(Cell(table, dataset, method, col, run, ("accuracy",),
                                        _reported(table, paper, setting, method, "", col, col)))
                if len(block["tasks"]) > 1:
                    row.append(Cell(table, dataset, method, "Mean", None, ("accuracy",),
                                    _reported(table, paper, setting, method, "", "Mean", "Mean")))
                cells += row
        return cells

    def _cells_vanilla(self, spec):
        return self._cells_per_task("vanilla", spec)

    def _cells_partial(self, spec):
        return self._cells_per_task("partial", spec)

    def _cells_manifold_ablation(self, spec):
        dataset, cells = spec["dataset"], []
        for setting, method in spec["methods"].items():
            for metric in spec["metrics"]:
                row = f"{setting}_{metric}"
                for task in spec["tasks"]:
                    run = Run(dataset, setting, task, method, metric, "full", default_split(setting))
                    cells.append(Cell("manifold_ablation", dataset, row, task, run, ("accuracy",),
                                      _reported("manifold_ablation", dataset, setting, method, metric, task, task)))
                cells.append(Cell("manifold_ablation", dataset, row, "Mean", None, ("accuracy",),
                                  _reported("manifold_ablation", dataset, setting, method, metric, "Mean", "Mean")))
        return cells

    def _cells_sample_size(self, spec):
        dataset, setting, method, cells = spec["dataset"], spec.get("setting", "vanilla"), spec["method"], []
        for source_split in spec["source_splits"]:
            for task in spec["tasks"]:
                for target_split in spec["target_splits"]:
                    run = Run(dataset, setting, task, method, spec.get("metric", "G"), source_split, target_split)
                    variant = f"ns{source_split.lstrip('n')}_nt{target_split.lstrip('n')}"
                    cells.append(Cell("sample_size", dataset, source_split, f"{task} {target_split}", run,
                                      ("accuracy",), _reported("sample_size", dataset, setting, method, variant,
                                                               task, task), group=task))
        return cells

    def _cells_time(self, spec):
        cells = []
        for method in self.table_methods(spec["methods"]):
            for col in spec["columns"]:
                setting = spec.get("setting", "vanilla")
                run = Run(col["dataset"], setting, col["task"], method, spec.get("metric", "G"), "full",
                          default_split(setting))
                key = "seconds_per_iter" if col["unit"] == "s/B" else "seconds_per_epoch"
                cells.append(Cell("time", "all", method, col["task"], run, (key,),
                                  _reported("time", col["dataset"], setting, method, "", col["task"], col["task"]),
                                  unit=col["unit"], group=col["dataset"]))
        return cells

    def _cells_interpolation(self, spec):
        dataset, cells = spec["dataset"], []
        run = Run(dataset, "vanilla", spec["task"], spec["method"], spec.get("metric", "G"), "full", "full")
        for alpha in spec["alphas"]:
            alpha = str(alpha)
            for name in self.class_names(dataset):
                col = self.class_label(dataset, name)
                cells.append(Cell("interpolation", dataset, alpha, col, run,
                                  ("interpolation", alpha, "per_class_accuracy", name),
                                  _reported("interpolation", dataset, "vanilla", spec["method"], f"alpha{alpha}",
                                            spec["task"], col)))
            cells.append(Cell("interpolation", dataset, alpha, "Mean", run,
                              ("interpolation", alpha, "mean_class_accuracy"),
                              _reported("interpolation", dataset, "vanilla", spec["method"], f"alpha{alpha}",
                                        spec["task"], "Mean")))
        return cells

    # ---------------------------------------------------------------- runs
    def table_runs(self, table: str) -> list[Run]:
        """The distinct runs (every seed) a table reads, sorted."""
        keys = {c.run for c in self.table_cells(table) if c.run is not None}
        return sorted(k.with_seed(s) for k in keys for s in self.seeds)

    def all_runs(self) -> list[Run]:
        return sorted({r for t in self.tables for r in self.table_runs(t)})

    def rows(self) -> dict[str, tuple[str, str, str]]:
        """Row targets: ``row_<table>_<dataset>_<row>`` -> (table, block, row)."""
        out = {}
        for table in self.tables:
            for cell in self.table_cells(table):
                name = f"row_{table}_{cell.block}_{cell.row}".replace(".", "p")
                out[name] = (table, cell.block, cell.row)
        return out

    def row_runs(self, table: str, block: str, row: str) -> list[Run]:
        keys = {c.run for c in self.table_cells(table) if c.run is not None and (c.block, c.row) == (block, row)}
        return sorted(k.with_seed(s) for k in keys for s in self.seeds)

    def run_from_wildcards(self, w) -> Run:
        """The Run of the train rule's wildcards (``task`` as the folder slug 'A-W'; ``variant`` for the figures'
        rule train_variant)."""
        return Run(w.dataset, w.setting, task_from_slug(w.task), w.method, w.metric, w.source_split,
                   w.target_split, int(w.seed), getattr(w, "variant", ""))

    def demo_weights(self) -> str:
        """The demo backbone's pre-trained weights (rule demo_weights), used by demo runs with ``demo_data``."""
        return f"{self.results}/weights/smallcnn_demo.pt"

    def _layers(self, run: Run) -> list[tuple[str, dict]]:
        """The config sections that set trainer keys of ``run``, in order (later wins): ``train``, then each
        ``overrides[i].set`` whose ``when`` matches the run."""
        fields = {"dataset": run.dataset, "setting": run.setting, "task": run.task, "method": run.method,
                  "metric": run.metric}
        return [("train", self.config.get("train") or {})] + [
            (f"overrides[{i}].set", e["set"]) for i, e in enumerate(self.config.get("overrides", []))
            if all(fields[k] == v for k, v in e["when"].items())]

    def overrides(self, run: Run) -> dict:
        """Trainer overrides of a run: config ``train``, then each ``overrides`` entry whose ``when`` matches.
        Demo runs of a suite that generates the demo (``demo_data``) load the backbone from :meth:`demo_weights`.
        Two suite-wide speed switches reach the runs they apply to, the others run without them (instead of every
        other job stopping on a config error; both are runtime keys, so no run's signature changes): a compiled mode
        (``compile: loss | step``) the methods that declare ``compilable``, ``input_cache: on`` the image datasets."""
        (_, values), *matching = self._layers(run)
        values = dict(values)
        if run.dataset == "demo" and self.config.get("demo_data", False):
            values.setdefault("weights_path", self.demo_weights())
        for _, layer in matching:
            values.update(layer)
        values.update(variant_values(run.variant))
        if values.get("compile") in ("loss", "step"):
            from . import methods
            if not methods.get(run.method).compilable:
                values["compile"] = "off"
        if values.get("input_cache") is not None:
            from .config import PARAMS, spelled
            wanted = spelled(PARAMS["input_cache"], values["input_cache"]) is True
            if wanted and self.spec(run.dataset).kind != "images":
                values["input_cache"] = False
        return values

    def run_config(self, run: Run) -> dict:
        """The trainer keys that identify a run (:data:`RUN_KEYS`), as its ``metrics.json`` records them."""
        source, target = self.domains(run.dataset, run.task, f"run {run.folder(self.results)}")
        return {"dataset": run.dataset, "source": source, "target": target, "setting": run.setting,
                "source_split": run.source_split, "target_split": run.target_split, "method": run.method,
                "metric": run.metric, "seed": run.seed}

    def expected_config(self, run: Run) -> dict:
        """The whole config ``python -m dmp train`` resolves for ``run`` (seed set) from :meth:`train_args`: every
        key that changes a result. A table or figure uses a metrics.json only if its recorded config is this one
        (:func:`dmp.metrics.read_metrics`; the runtime keys aside)."""
        if run not in self._expected:
            from .config import parse_overrides, resolve
            self._expected[run] = resolve(parse_overrides(self.train_args(run)))
        return self._expected[run]

    def unjustified(self, run: Run) -> str | None:
        """Why the metrics.json in ``run``'s folder is no result of ``run`` (another config, unfinished, damaged,
        impossible values: what the tables would footnote), None if it is one or there is none yet."""
        from .metrics import read_metrics

        path = run.metrics_path(self.results)
        if not os.path.exists(path):
            return None
        metrics, why = read_metrics(path, self.expected_config(run), ())
        return why or self.data_changed(run, metrics)

    def data_changed(self, run: Run, metrics: dict) -> str | None:
        """Why a finished run's ``dataset_version`` is not the version of the data in place now (images replaced
        in place, lists prepared again, a version edited by hand), else None. Checked where the data is in place and
        the recorded version has a version's form (12 hex digits; a fabricated run's placeholder is not checked)."""
        import re
        recorded = metrics.get("dataset_version")
        if not (isinstance(recorded, str) and re.fullmatch(r"[0-9a-f]{12}", recorded)):
            return None
        now = self.version_in_place(run)
        if now is None or now == recorded:
            return None
        return f"trained on dataset version {recorded}, the data in place is version {now}"

    def version_in_place(self, run: Run) -> str | None:
        """The dataset version a run of ``run`` would record now (:func:`dmp.data.inputs.build_task`: its lists and,
        for images, the bytes they name), None where the data is not in place."""
        cfg = self.run_config(run)
        from .data.splits import run_lists
        spec = self.spec(run.dataset)
        lists = tuple(run_lists(spec, cfg["source"], cfg["source_split"], cfg["target"], cfg["target_split"]).values())
        key = (run.dataset, lists)
        if key not in self._in_place:
            try:
                images = spec.kind == "images"
                self._in_place[key] = self.registry.dataset_version(spec, *([list(lists), True] if images else []))
            except FileNotFoundError:  # the data (or a list) is not in place here: nothing to compare with
                self._in_place[key] = None
        return self._in_place[key]

    def stale_marks(self, run: Run) -> list[str]:
        """Inputs of the train rule that make Snakemake retrain a run whose metrics.json it would otherwise keep
        although it is no result of the run (placed by hand, another config, damaged: Snakemake has no record of
        such a file, so none of its rerun triggers fires): ``[<run folder>/STALE_MARK]``, written now (saying why),
        so that it is an input newer than the metrics.json; nothing for a run that is its own result or not done.
        The train job's prepare step removes the run's files and the mark (:func:`prepare`)."""
        why = self.unjustified(run)
        mark = f"{run.folder(self.results)}/{STALE_MARK}"
        if not why:
            if os.path.exists(mark):  # the run is its own result again (the data restored): the mark would make the
                os.unlink(mark)      # next train job of this folder delete it
            return []
        from .io import write_text

        write_text(mark, f"{run.metrics_path(self.results)} is no result of this run: {why}\n")
        return [mark]

    def train_args(self, run: Run) -> list[str]:
        """``key=value`` arguments of ``python -m dmp train`` for a run (values in YAML flow syntax).  The rule adds
        ``threads=`` itself: the thread count changes speed, not results, so it must not make a run stale."""
        values = {**self.overrides(run), **self.run_config(run)}
        return [f"{k}={yaml_value(v)}" for k, v in values.items()]

    def data_version(self, dataset: str, lists=None) -> str:
        """The dataset version a run's signature covers: only the ``(domain, split)`` lists the run reads, so
        preparing other splits retrains nothing."""
        return _data_version(self.registry, self.spec(dataset), tuple(lists) if lists else None)

    def config_text(self, run: Run) -> str:
        """:meth:`expected_config` without the runtime keys, as canonical JSON (the signature's part of a run)."""
        from .train.checkpoint import RUNTIME_KEYS

        cfg = self.expected_config(run)
        return json.dumps({k: v for k, v in cfg.items() if k not in RUNTIME_KEYS}, sort_keys=True, default=str)

    def signature(self, run: Run) -> str:
        """Hash of what decides a run's result: training code, dataset version (the lists the run reads) and the
        whole config the run trains with (:meth:`expected_config`, the runtime keys aside: the keys a table checks).
        Snakemake reruns a job when it changes (it is a rule parameter) and ``prepare`` drops a checkpoint written
        under another."""
        cfg = self.run_config(run)
        from .data.splits import run_lists
        lists = tuple(run_lists(self.spec(run.dataset), cfg["source"], cfg["source_split"], cfg["target"],
                                cfg["target_split"]).values())  # an eval_lists target: both parts
        text = "\n".join([training_code_version(), self.data_version(run.dataset, lists), self.config_text(run)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@lru_cache(maxsize=None)
def _data_version(registry, spec, lists=None) -> str:
    return registry.dataset_version(spec, lists)


def table_config_json(config: dict, table: str) -> str:
    """The part of a suite config that ``python -m dmp.tables build TABLE`` needs, as JSON (a rule parameter:
    the table is rebuilt when it changes).  The config's key order is kept: it is the order of the table's blocks and
    rows (``python -m dmp.tables build --config`` reads the same YAML in the same order).  The keys that decide a
    run's arguments (``train``, ``overrides``, ``demo_data``) come along: a table uses a metrics.json only if its
    config is the one the suite's arguments resolve to (:meth:`Suite.expected_config`)."""
    keys = ("results", "seeds", "class_labels", "demo_data", "train", "overrides")
    part = {k: config[k] for k in keys if k in config}
    part["tables"] = {table: config["tables"][table]}
    return json.dumps(part, separators=(",", ":"))


def yaml_value(value) -> str:
    """A value in YAML flow syntax that ``yaml.safe_load`` reads back equal (``1e-05`` would read as a string)."""
    return _yaml_value(json.dumps(value, sort_keys=True))


@lru_cache(maxsize=4096)
def _yaml_value(value_json: str) -> str:
    value = json.loads(value_json)
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9).strip()
    if text.endswith("\n..."):
        text = text[:-4].strip()
    if yaml.safe_load(text) != value:
        raise ValueError(f"cannot write {value!r} as a YAML value that reads back equal")
    return text


@lru_cache(maxsize=None)
def training_code_version() -> str:
    """sha256 (16 hex) of the ``dmp/**/*.py`` files that can change a training result (all but dmp/tables/ and
    dmp/suite.py): editing them makes every run stale."""
    from .train.provenance import code_version
    return code_version(exclude=tuple(NOT_TRAINING_CODE), root=PACKAGE_DIR)


SIGNATURE_FILE = "suite_signature.txt"
STALE_FILES = ("checkpoint.pt", "metrics.json", "log.csv", "features.npz")
# Written into a run folder whose metrics.json is no result of its run (Suite.stale_marks): the train job reruns, and
# its prepare step removes that run's files (STALE_FILES and config.yaml) first.
STALE_MARK = "stale.txt"


def prepare(run_dir: str | os.PathLike, signature: str, log: str | os.PathLike | None = None) -> bool:
    """Make ``run_dir`` safe to resume: if it holds files of a run with another signature (other code or
    arguments) or of unknown origin, remove them; then record ``signature``.  Returns True if something was
    removed.  ``log`` (the train job's log) is started afresh, holding what was removed, only once the folder's lock
    is held: a job refused on a folder in use (another checkout's Snakemake on the same results folder) leaves the
    running job's log as it is."""
    from .run_lock import run_lock

    run_dir = Path(run_dir)
    with run_lock(run_dir):  # never under a training process
        removed = _prepare(run_dir, signature)
        if log is not None:
            Path(log).write_text(_removed_note(run_dir, signature) + "\n" if removed else "")
        return removed


def _removed_note(run_dir, signature: str) -> str:
    return f"{run_dir}: removed files of a run with other code/arguments (signature {signature})"


def _prepare(run_dir: Path, signature: str) -> bool:
    stamp = run_dir / SIGNATURE_FILE
    old = stamp.read_text().strip() if stamp.exists() else None
    removed = False
    foreign = (run_dir / STALE_MARK).exists()  # a metrics.json of another run (Suite.stale_marks): start afresh
    if old != signature and not foreign and (run_dir / "metrics.json").exists():
        # Snakemake removes a job's metrics.json (its output) before it reruns the job: one still here is a finished
        # run that no train job is about to replace
        raise ValueError(f"{run_dir / 'metrics.json'} is a finished run (signature {old or 'unrecorded'}, not "
                         f"{signature}): prepare clears unfinished runs only; to retrain it, move its metrics.json "
                         f"away first")
    if old != signature or foreign:
        for name in STALE_FILES + (("config.yaml", STALE_MARK) if foreign else ()):
            if (run_dir / name).exists():
                (run_dir / name).unlink()
                removed = True
        tmp = stamp.with_name(stamp.name + ".tmp")
        tmp.write_text(signature + "\n")
        os.replace(tmp, stamp)
    return removed


def timing(results: str) -> str:
    """Where the time of a finished suite went, per job and in total: Snakemake's benchmark wall time of each
    train job vs. the trainer's own ``train_seconds`` (optimisation steps) and ``anchor_seconds`` (anchor /
    class-weight passes); the rest is Python start-up, data loading, evaluation and writing."""
    import pandas as pd
    from tabulate import tabulate

    rows = []
    for bench in sorted(Path(results, "runs").rglob("benchmark.tsv")):
        metrics_path = bench.with_name("metrics.json")
        if not metrics_path.exists():
            continue
        seconds = _timing_metrics(metrics_path)
        wall, cpu = _benchmark_seconds(bench)
        rows.append({"run": str(bench.parent.relative_to(Path(results, "runs"))), "wall_s": wall, "cpu_s": cpu,
                     **seconds, "other_s": wall - seconds["train_s"] - seconds["anchor_s"]})
    if not rows:
        raise FileNotFoundError(f"no finished run with a benchmark.tsv under {results}/runs")
    df = pd.DataFrame(rows)
    total = df[["wall_s", "cpu_s", "train_s", "anchor_s", "other_s"]].sum()
    summary = pd.DataFrame({"jobs": [len(df)], **{f"sum {k}": [round(v, 1)] for k, v in total.items()},
                            "mean wall_s/job": [round(df["wall_s"].mean(), 1)],
                            "other share": [f"{total['other_s'] / total['wall_s']:.0%}"]})
    return tabulate(summary, headers="keys", tablefmt="github", showindex=False)


def _number(text, where: str) -> float:
    """A finite number >= 0 (a time in seconds) or a ValueError naming ``where``."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not (isinstance(text, (str, int, float)) and not isinstance(text, bool) and 0 <= value < float("inf")):
        raise ValueError(f"{where} = {str(text)[:40]!r} is not a time in seconds (a finite number >= 0)")
    return value


def _benchmark_seconds(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the last row of Snakemake's ``benchmark.tsv`` (header ``s ... cpu_time``); a damaged
    file names its line and column."""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    header = lines[0].split("\t") if lines else []
    if "s" not in header or len(lines) < 2:
        raise ValueError(f"{path}: not a Snakemake benchmark file (a header with column 's' and a row of times); "
                         f"delete it, Snakemake writes it again with the job")
    row = lines[-1].split("\t")
    if len(row) != len(header):
        raise ValueError(f"{path} line {len(lines)}: {len(row)} fields, the header has {len(header)}")
    cells = dict(zip(header, row))
    wall = _number(cells["s"], f"{path} line {len(lines)} column 's'")
    cpu = (_number(cells["cpu_time"], f"{path} line {len(lines)} column 'cpu_time'") if cells.get("cpu_time", "NA")
           not in ("NA", "-", "") else float("nan"))
    return wall, cpu


def _timing_metrics(path: Path) -> dict:
    """``train_seconds`` / ``anchor_seconds`` of a run's metrics.json; a damaged file names the file and key."""
    import json as _json

    try:
        metrics = _json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a metrics file (cut off or corrupt: {exc})") from None
    if not isinstance(metrics, dict):
        raise ValueError(f"{path} holds a JSON {type(metrics).__name__}, not a run's metrics (an object)")
    return {f"{k}_s": _number(metrics.get(f"{k}_seconds"), f"{path} key '{k}_seconds'") for k in ("train", "anchor")}


def add_subparsers(sub) -> None:
    """Adds ``dmp suite {prepare,timing}`` (also ``python -m dmp.suite ...``)."""
    suite = sub.add_parser("suite", help="helpers of the Snakemake suite (stale checkpoints, where the time went)",
                           description="Helpers of the Snakemake suite (docs/workflow.md): the train rule calls "
                           "`prepare` before the trainer, so a resumed run never mixes code or arguments; `timing` "
                           "says where the time of a finished suite went.")
    suite.set_defaults(func=_run)
    sub = suite.add_subparsers(dest="suite_command", required=True, metavar="COMMAND")
    p = sub.add_parser("prepare", help="drop a stale checkpoint from an unfinished run's folder before (re)starting "
                                       "the trainer (a finished run is refused)")
    p.add_argument("run_dir", help="the run's folder")
    p.add_argument("signature", help="the run's code and arguments signature (the train rule's)")
    p.add_argument("--log", default=None, help="the train job's log: emptied (then holding what was removed) once "
                   "the folder is this job's; a refusal (the folder in use) goes to stderr, never into it")
    p = sub.add_parser("timing", help="summarise where the time of the finished train jobs went")
    p.add_argument("results", help="the suite's results folder (e.g. results/demo)")


def main(argv=None):
    """``python -m dmp.suite ARGV``: the same as ``dmp suite ARGV``."""
    command_main("suite", add_subparsers, argv)


def _run(args):
    if args.suite_command == "timing":
        print(timing(args.results))
    elif not re.fullmatch(r"[0-9a-f]{16}", args.signature):
        raise ValueError(f"signature {args.signature!r}: expected the train rule's 16 hex digits (Suite.signature)")
    elif prepare(args.run_dir, args.signature, args.log) and args.log is None:
        print(_removed_note(args.run_dir, args.signature), file=sys.stderr)


if __name__ == "__main__":
    main()
