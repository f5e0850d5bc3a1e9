"""A run's signature: the hash of what decides its result (the training code, the version of the data lists it reads
and the whole config it trains with). Snakemake reruns a train job whose signature changed (it is a rule parameter)."""
from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path

from .runs import Run

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# Code that does not change a training result: editing it must not rerun the (expensive) training jobs.
NOT_TRAINING_CODE = ("tables", "figures", "suite", "metrics.py")
# The train rule's signature of a run whose dataset's files are not in place here and whose version is those files'
# hash (a features or arrays dataset): ABSENT_DATA + the dataset's name, which `prepare` refuses (absent_data_error).
ABSENT_DATA = "absent-data:"
SIGNATURE_RE = re.compile(r"[0-9a-f]{16}")  # a signature (Signatures.signature)


@lru_cache(maxsize=None)
def training_code_version() -> str:
    """sha256 (16 hex) of the ``dmp/**/*.py`` files that can change a training result (all but dmp/tables/,
    dmp/figures/, dmp/suite/ and dmp/metrics.py): editing them makes every run stale."""
    from ..train.provenance import code_version
    return code_version(exclude=tuple(NOT_TRAINING_CODE), root=PACKAGE_DIR)


@lru_cache(maxsize=None)
def _data_version(registry, spec, lists=None) -> str:
    return registry.dataset_version(spec, lists)


class Signatures:
    """The signatures of a :class:`~dmp.suite.Suite`'s runs."""

    def data_version(self, dataset: str, lists=None) -> str:
        """The dataset version a run's signature covers: only the ``(domain, split)`` lists the run reads, so
        preparing other splits retrains nothing."""
        return _data_version(self.registry, self.spec(dataset), tuple(lists) if lists else None)

    def config_text(self, run: Run) -> str:
        """:meth:`expected_config` without the runtime keys, as canonical JSON (the signature's part of a run)."""
        from ..train.checkpoint import RUNTIME_KEYS

        cfg = self.expected_config(run)
        return json.dumps({k: v for k, v in cfg.items() if k not in RUNTIME_KEYS}, sort_keys=True, default=str)

    def signature(self, run: Run) -> str:
        """Hash of what decides a run's result: training code, dataset version (the lists the run reads) and the
        whole config the run trains with (:meth:`expected_config`, the runtime keys aside: the keys a table checks).
        Snakemake reruns a job when it changes (it is a rule parameter) and ``prepare`` drops a checkpoint written
        under another."""
        cfg = self.run_config(run)
        from ..data.splits import run_lists
        lists = tuple(run_lists(self.spec(run.dataset), cfg["source"], cfg["source_split"], cfg["target"],
                                cfg["target_split"]).values())  # an eval_lists target: both parts
        text = "\n".join([training_code_version(), self.data_version(run.dataset, lists), self.config_text(run)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def job_signature(self, run: Run) -> str:
        """:meth:`signature` as the train rule's parameter. Where it cannot be known here - the run's dataset is a
        features or arrays dataset (its version is its files' hash) whose files are not in place - the job is
        still planned (a dry run lists it, as a job of an image dataset not fetched yet): a finished run keeps the
        signature its folder records (Snakemake's rerun trigger "params" would otherwise remove its metrics.json
        before a job that cannot train), any other gets ``absent-data:NAME``, which ``prepare`` refuses in one line
        naming the missing files and the command that makes them, before it touches the run folder."""
        from .records import SIGNATURE_FILE

        try:
            return self.signature(run)
        except self.registry.DatasetMissingError:
            folder = Path(run.folder(self.results))
            stamp = folder / SIGNATURE_FILE
            recorded = stamp.read_text().strip() if stamp.is_file() else ""
            if (folder / "metrics.json").is_file() and SIGNATURE_RE.fullmatch(recorded):
                return recorded
            return ABSENT_DATA + run.dataset


def bring_command(registry, spec) -> str:
    """How the files of dataset ``spec`` get in place, as one says it to a user: ``python -m dmp data fetch NAME``,
    for a features dataset ``make it: move ... aside, then dmp data extract-features ...``, or where only the user
    can place them, ``placed by hand: docs/datasets.md``."""
    from ..data import cli as data_cli

    how = data_cli.place_command(registry, spec) or "placed by hand: docs/datasets.md"
    return ("python -m dmp " if how.startswith("data ") else "") + how


def absent_data_error(signature: str, registry=None) -> str:
    """The one line of ``prepare`` refusing the signature ``absent-data:NAME`` (:meth:`Signatures.job_signature`):
    what of dataset NAME is missing and the command that makes it; or, where the files arrived since Snakemake
    planned the job, that it has to plan again (the job's signature covers the files' version)."""
    if registry is None:
        from ..data import registry
    name = signature[len(ABSENT_DATA):]
    spec = registry.get_dataset(name)
    try:
        registry.require_dataset(spec)
    except registry.DatasetMissingError as err:
        how = bring_command(registry, spec)
        return f"{err}" + ("" if how.startswith("python -m dmp data ") else f" ({how})")
    return (f"dataset {name!r} was not in place when Snakemake planned this job and is now: run Snakemake again "
            f"(the run's signature covers the dataset's files)")
