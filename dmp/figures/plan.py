"""Which runs each figure needs: the figures' part of a suite config (``figures:``), checked against the dataset
registry and the trainer's config registry, and turned into :class:`dmp.suite.Run` s.

A figure run whose trainer settings are the ones the suite gives that run anyway (the hyper-parameter grid's point
at the preset's ``(lambda1, lambda2)``, ``k`` = the preset's ``k``) *is* the table's run: one job, one folder.  Any
other setting makes a *variant* run, in a folder of its own (``.../<source>-<target>/<variant>/seed<k>``, e.g.
``lambda1=0.5,lambda2=100.0``; :func:`dmp.suite.variant_name`)."""
from __future__ import annotations

import re
from dataclasses import replace

from dmp.suite import Run, Suite, default_split, variant_name

FIGURES = ("hyper", "k", "dprime", "convergence", "tsne", "confusion", "weights", "shared_classes",
           "interpolation_tsne")
# Trainer settings a figure may vary (anything else would change what a table run means).
VARIED = ("lambda1", "lambda2", "k", "log_accuracy_every")
# The table whose config block gives a figure the keys its own block leaves out (the interpolation t-SNE shows the
# interpolations of the interpolation table's run).
DEFAULTS_FROM_TABLE = {"interpolation_tsne": "interpolation"}


class FigurePlan:
    """The figures of a suite config.  ``spec(name)`` is the figure's config section with its defaults filled in,
    ``runs(name)`` every run (all seeds) it reads."""

    def __init__(self, suite: Suite | dict):
        self.suite = suite if isinstance(suite, Suite) else Suite(suite)
        self.config = self.suite.config.get("figures") or {}
        self._base: dict = {}

    # ------------------------------------------------------------------ config
    @property
    def names(self) -> list[str]:
        return [n for n in FIGURES if n in self.config]

    def spec(self, name: str) -> dict:
        if name not in self.config:
            raise KeyError(f"figure {name!r} is not in this config's 'figures' (has: {self.names})")
        spec = dict(self.config[name] or {})
        spec.setdefault("metric", "G")
        spec.setdefault("seeds", list(self.suite.seeds))
        if name == "interpolation_tsne":
            table = self.suite.tables.get(DEFAULTS_FROM_TABLE[name], {})
            for key in ("dataset", "task", "method", "alphas"):
                if key not in spec and key in table:
                    spec[key] = table[key]
            missing = [k for k in ("dataset", "task", "method", "alphas") if k not in spec]
            if missing:
                raise ValueError(f"config figures.interpolation_tsne: set {', '.join(missing)} (or configure "
                                 f"tables.interpolation, whose values are the default)")
            spec["alphas"] = [str(a) for a in spec["alphas"]]
        if name in ("dprime", "tsne", "interpolation_tsne"):  # one seed's features
            spec.setdefault("seed", spec["seeds"][0])
        if name in ("tsne", "interpolation_tsne"):
            spec.setdefault("per_class", 100)
        if name == "dprime":
            spec.setdefault("batches", 20)
        return spec

    # ------------------------------------------------------------------ runs
    def run(self, dataset, setting, task, method, metric="G", source_split="full", target_split=None,
            **settings) -> Run:
        """The run (seed None) of these arguments with trainer ``settings`` (keys of :data:`VARIED`): the plain run
        when the settings are what that run has anyway, else a variant run."""
        base = Run(dataset, setting, task, method, metric, source_split, target_split or default_split(setting))
        if not settings:
            return base
        resolved = self._resolved(base)
        from dmp.config import resolve
        changed = resolve({**resolved, **settings})
        variant = {k: changed[k] for k in sorted(settings) if changed[k] != resolved[k]}
        return replace(base, variant=variant_name(variant)) if variant else base

    def _resolved(self, run: Run) -> dict:
        """The trainer config of the plain run ``run`` (cached)."""
        if run not in self._base:
            from dmp.config import parse_overrides, resolve
            self._base[run] = resolve(parse_overrides(self.suite.train_args(run.with_seed(0))))
        return self._base[run]

    def runs(self, name: str) -> list[Run]:
        """Every run (each seed) that figure ``name`` reads, sorted."""
        spec = self.spec(name)
        keys = getattr(self, f"_runs_{name}")(spec)
        seeds = [spec["seed"]] if "seed" in spec else spec["seeds"]
        return sorted({k.with_seed(s) for k in keys for s in seeds})

    def all_runs(self) -> list[Run]:
        return sorted({r for n in self.names for r in self.runs(n)})

    def hyper_points(self, spec):
        """(panel index, panel, task, lambda1, lambda2, run) of the hyper-parameter grids."""
        for i, panel in enumerate(spec["panels"]):
            for task in panel["tasks"]:
                for l1 in panel["lambda1"]:
                    for l2 in panel["lambda2"]:
                        yield i, panel, task, l1, l2, self.run(panel["dataset"], panel["setting"], task,
                                                              panel["method"], panel.get("metric", spec["metric"]),
                                                              lambda1=float(l1), lambda2=float(l2))

    def _runs_hyper(self, spec):
        return [p[-1] for p in self.hyper_points(spec)]

    def _runs_k(self, spec):
        return [self.run(spec["dataset"], spec.get("setting", "vanilla"), t, spec["method"], spec["metric"], k=int(k))
                for t in spec["tasks"] for k in spec["ks"]]

    def _runs_dprime(self, spec):
        return [self.run(spec["dataset"], spec.get("setting", "vanilla"), spec["task"], spec["method"], spec["metric"])]

    def _runs_convergence(self, spec):
        return [self.run(spec["dataset"], spec.get("setting", "vanilla"), spec["task"], spec["method"], spec["metric"],
                         log_accuracy_every=int(spec["log_accuracy_every"]))]

    def _runs_tsne(self, spec):
        return [self.run(spec["dataset"], spec.get("setting", "vanilla"), spec["task"], m, spec["metric"])
                for m in spec["methods"]]

    def _runs_confusion(self, spec):
        return [self.run(spec["dataset"], p["setting"], spec["task"], p["method"], spec["metric"])
                for p in spec["panels"]]

    def _runs_weights(self, spec):
        return [self.run(spec["dataset"], "partial", spec["task"], m, spec["metric"]) for m in spec["methods"]]

    def _runs_shared_classes(self, spec):
        return [self.run(spec["dataset"], "partial", t, m, spec["metric"], target_split=split)
                for t in spec["tasks"] for m in spec["methods"] for split in spec["target_splits"]]

    def _runs_interpolation_tsne(self, spec):
        return [self.run(spec["dataset"], "vanilla", spec["task"], spec["method"], spec["metric"])]

    # ------------------------------------------------------------------ helpers
    def n_classes(self, dataset: str, split: str) -> int:
        """Number of target classes of a split: ``first<N>`` -> N, ``partial`` -> the registry's partial classes,
        anything else -> all classes."""
        spec = self.suite.spec(dataset)
        m = re.fullmatch(r"first(\d+)", split)
        if m:
            return int(m.group(1))
        if split == "partial" and spec.partial_classes:
            return len(spec.partial_classes)
        return len(spec.classes)

    def validate(self) -> None:
        """What the schema cannot check: datasets, tasks and splits against the registry, and each distinct run's
        trainer config (``k`` <= classes, valid values); errors name the figure's config key."""
        from dmp.config import ConfigError, parse_overrides, resolve

        for name in self.names:
            where = f"figures.{name}"
            try:
                spec = self.spec(name)
                runs = {r.with_seed(0) for r in self.runs(name)}
            except (KeyError, ValueError) as err:
                raise ValueError(f"config {where}: {err}") from None
            for run in sorted(runs):
                self.suite.domains(run.dataset, run.task, where)
                ds = self.suite.spec(run.dataset)
                for split in (run.source_split, run.target_split):
                    if ds.kind == "images" and split not in ds.splits:
                        raise ValueError(f"config {where}: dataset {run.dataset!r} has no split {split!r} "
                                         f"(its splits: {', '.join(ds.splits)})")
                try:
                    cfg = resolve(parse_overrides(self.suite.train_args(run)))
                except ConfigError as err:
                    raise ConfigError(f"config {where}, run {run.folder(self.suite.results)}: {err}") from None
                if cfg["k"] > len(ds.classes):
                    raise ConfigError(f"config {where}: k = {cfg['k']} is larger than the number of classes of "
                                      f"dataset {run.dataset!r} ({len(ds.classes)})")
            if name == "interpolation_tsne":
                bad = [a for a in spec["alphas"] if a not in ("0", "0.1", "0.3", "0.5")]
                if bad:
                    raise ValueError(f"config {where}.alphas: {bad} (the runs save the interpolations of alpha "
                                     f"0, 0.1, 0.3 and 0.5)")
