"""What a run folder holds: whether its metrics.json is a result of the run the suite plans there (the same config,
finished, on the data in place), the mark that makes Snakemake retrain one that is not, and ``prepare``, which the
train rule calls before the trainer so that a resumed run never mixes code or arguments."""
from __future__ import annotations

import os
import re
from pathlib import Path

from .runs import Run

SIGNATURE_FILE = "suite_signature.txt"
STALE_FILES = ("checkpoint.pt", "metrics.json", "log.csv", "features.npz")
# Written into a run folder whose metrics.json is no result of its run (Suite.stale_marks): the train job reruns, and
# its prepare step removes that run's files (STALE_FILES and config.yaml) first.
STALE_MARK = "stale.txt"


class RunRecords:
    """Whether the metrics.json files of a :class:`~dmp.suite.Suite`'s runs are results of those runs."""

    def unjustified(self, run: Run) -> str | None:
        """Why the metrics.json in ``run``'s folder is no result of ``run`` (another config, unfinished, damaged,
        impossible values: what the tables would footnote), None if it is one or there is none yet."""
        from ..metrics import read_metrics

        path = run.metrics_path(self.results)
        if not os.path.exists(path):
            return None
        metrics, why = read_metrics(path, self.expected_config(run), ())
        return why or self.data_changed(run, metrics)

    def data_changed(self, run: Run, metrics: dict) -> str | None:
        """Why a finished run's ``dataset_version`` is not the version of the data in place now (images replaced
        in place, lists prepared again, a version edited by hand), else None. Checked where the data is in place and
        the recorded version has a version's form (12 hex digits; a fabricated run's placeholder is not checked)."""
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
        from ..data.splits import run_lists
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
        from ..io import write_text

        write_text(mark, f"{run.metrics_path(self.results)} is no result of this run: {why}\n")
        return [mark]


def prepare(run_dir: str | os.PathLike, signature: str, log: str | os.PathLike | None = None) -> bool:
    """Make ``run_dir`` safe to resume: if it holds files of a run with another signature (other code or
    arguments) or of unknown origin, remove them; then record ``signature``.  Returns True if something was
    removed.  ``log`` (the train job's log) is started afresh, holding what was removed, only once the folder's lock
    is held: a job refused on a folder in use (another checkout's Snakemake on the same results folder) leaves the
    running job's log as it is."""
    from ..run_lock import run_lock

    run_dir = Path(run_dir)
    with run_lock(run_dir):  # never under a training process
        removed = _prepare(run_dir, signature)
        if log is not None:
            Path(log).write_text(removed_note(run_dir, signature) + "\n" if removed else "")
        return removed


def removed_note(run_dir, signature: str) -> str:
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
