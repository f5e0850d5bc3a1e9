"""Every study that trains, by name, and the runs it declares (the data Snakemake's rules read,
workflow/rules/studies.smk): a run is found by the file it writes, and run by :func:`make`."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from studies import comparison, geometry, lockin, main_study, prototypes, runs, shared_copies, variants, weak
from studies import weak_features
from studies.office31 import declared as office31
from studies.office31 import pseudo_label_runs
from studies.records import ROOT

STUDIES = {"main": main_study.runs, "weak": weak.runs, "weak_variants": weak.variant_runs,
           "anchors": variants.anchor_runs, "weights": variants.weight_runs, "grid": variants.grid_runs,
           "prototypes": prototypes.runs, "digits_init": variants.digits_init_runs,
           "geometry": lambda: geometry.runs(main_study.runs()), "comparison": comparison.runs, "lockin": lockin.runs,
           "office31_departures": office31.departure_runs, "office31_checks": office31.check_runs,
           "pseudo_labels": office31.pseudo_label_runs}
"""Study -> its declared runs (:class:`studies.runs.Run`), in the order they are listed."""


def _pseudo_labels(declared_run: runs.Run) -> None:
    c = declared_run.config
    pseudo_label_runs.run(c["task"], c["method"], c["fraction"], c["seed"], overrides=c["overrides"])


MAKERS = {"train": runs.train, "dmp train": runs.dmp_train, "prototypes": prototypes.write,
          "geometry": geometry.write, "pseudo labels": _pseudo_labels}
"""A run's kind -> what makes it."""


def declared(study: str) -> list[runs.Run]:
    """The runs of ``study``."""
    if study not in STUDIES:
        raise KeyError(f"unknown study {study!r}; studies: {', '.join(STUDIES)}")
    return STUDIES[study]()


def target(declared_run: runs.Run) -> str:
    """The file ``declared_run`` writes, relative to the repository."""
    return str((declared_run.path / declared_run.output).relative_to(ROOT))


@lru_cache(maxsize=1)
def _by_target() -> dict[str, runs.Run]:
    return {target(r): r for study in STUDIES for r in declared(study)}


def find(path) -> runs.Run:
    """The declared run that writes ``path`` (the file or its folder; relative to the repository or absolute)."""
    path = Path(path).resolve() if Path(path).is_absolute() else (ROOT / path).resolve()
    rel = str(path.relative_to(ROOT))
    found = _by_target().get(rel) or next((r for t, r in _by_target().items() if str(Path(t).parent) == rel), None)
    if found is None:
        raise KeyError(f"{rel}: no study declares this run (python -m studies runs STUDY lists them)")
    return found


def needs(declared_run: runs.Run) -> list[str]:
    """The files of other runs a run reads (relative to the repository): for a geometry run, the record of the run
    it measures. What a run reads that no run writes (a pre-trained CNN, a weak-feature dataset) is made on demand
    by :func:`make`."""
    if declared_run.kind == "geometry":
        return [target(declared_run._replace(output="metrics.json", kind="train"))]
    return []


def prepare(declared_run: runs.Run) -> None:
    """Make what the run reads where it is absent: the developers' copies of office_caltech10 and mnist_usps linked
    (where they have them), its pre-trained CNN, its weak-feature dataset (two jobs wait for one another)."""
    from dmp.data import registry
    shared_copies.link()
    if declared_run.weights:
        runs.make_weights(declared_run.weights)
    dataset = declared_run.config.get("dataset")
    if dataset in weak.WEAK:
        with runs.waiting_lock(runs.MAKE_LOCK):
            if not (Path(registry.DATASETS_DIR) / dataset / "dataset.yaml").is_file():
                weak_features.main([dataset.split("_")[0]])


def make(path) -> None:
    """Run the declared run that writes ``path``: train it, or write its diagnosis (one Snakemake job)."""
    declared_run = find(path)
    prepare(declared_run)
    MAKERS[declared_run.kind](declared_run)
