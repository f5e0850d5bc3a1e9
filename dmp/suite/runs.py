"""Runs and cells, and where a run lives.

A *run* is one training job (dataset, setting, task, method, metric, source/target split, seed); it lives in
``<results>/runs/<dataset>/<setting>/<S-T>/<method>/<metric>/<source_split>-<target_split>/seed<seed>/`` and its
``metrics.json`` is the only file the tables read.  A *cell* is one printed number of a table: it names the run (all
seeds) it comes from and the path of the value inside ``metrics.json``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache

import yaml


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


def reported_key(table, dataset, setting, method, variant, task, column) -> tuple[tuple[str, str], ...]:
    """A cell's key into dmp/tables/reported_results.csv (:attr:`Cell.reported`)."""
    return (("table", table), ("dataset", dataset), ("setting", setting), ("method", method), ("variant", variant),
            ("task", task), ("column", column))


def default_split(setting: str) -> str:
    """The trainer's default target split for a setting (see the training CLI contract)."""
    return "partial" if setting == "partial" else "full"


# Trainer keys the suite sets for every run from the tables, ``seeds`` and ``threads``: a config's ``train:`` or
# ``overrides[].set`` must not set them (they would be overridden, or would relabel the run).
RUN_KEYS = ("dataset", "source", "target", "setting", "method", "metric", "seed", "source_split", "target_split")
SUITE_KEYS = (*RUN_KEYS, "threads")


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
