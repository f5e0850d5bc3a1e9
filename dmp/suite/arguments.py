"""The trainer arguments of a run: the keys that identify it (:data:`~dmp.suite.RUN_KEYS`), over the config's
``train:`` and each matching ``overrides[].set``; the config ``python -m dmp train`` resolves from them; and their
check before any job runs."""
from __future__ import annotations

from .runs import SUITE_KEYS, Run, variant_values, yaml_value


class TrainingArguments:
    """The ``python -m dmp train`` arguments of a :class:`~dmp.suite.Suite`'s runs."""

    def validate_training(self):
        """Check the trainer settings before any job runs: every key of ``train:`` and ``overrides[].set`` against
        the trainer's registry (dmp/config.py), then the config each run of the tables would train with (what
        ``python -m dmp train`` will resolve, its weights file included, and ``k`` <= the dataset's classes).  Errors
        name the config key."""
        from ..config import ConfigError, check_values, parse_overrides, resolve

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
            from .. import methods
            if not methods.get(run.method).compilable:
                values["compile"] = "off"
        if values.get("input_cache") is not None:
            from ..config import PARAMS, spelled
            wanted = spelled(PARAMS["input_cache"], values["input_cache"]) is True
            if wanted and self.spec(run.dataset).kind != "images":
                values["input_cache"] = False
        return values

    def run_config(self, run: Run) -> dict:
        """The trainer keys that identify a run (:data:`~dmp.suite.RUN_KEYS`), as its ``metrics.json`` records
        them."""
        source, target = self.domains(run.dataset, run.task, f"run {run.folder(self.results)}")
        return {"dataset": run.dataset, "source": source, "target": target, "setting": run.setting,
                "source_split": run.source_split, "target_split": run.target_split, "method": run.method,
                "metric": run.metric, "seed": run.seed}

    def expected_config(self, run: Run) -> dict:
        """The whole config ``python -m dmp train`` resolves for ``run`` (seed set) from :meth:`train_args`: every
        key that changes a result. A table or figure uses a metrics.json only if its recorded config is this one
        (:func:`dmp.metrics.read_metrics`; the runtime keys aside)."""
        if run not in self._expected:
            from ..config import parse_overrides, resolve
            self._expected[run] = resolve(parse_overrides(self.train_args(run)))
        return self._expected[run]

    def train_args(self, run: Run) -> list[str]:
        """``key=value`` arguments of ``python -m dmp train`` for a run (values in YAML flow syntax).  The rule adds
        ``threads=`` itself: the thread count changes speed, not results, so it must not make a run stale."""
        values = {**self.overrides(run), **self.run_config(run)}
        return [f"{k}={yaml_value(v)}" for k, v in values.items()]
