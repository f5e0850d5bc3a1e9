"""Training: :func:`train` runs one configured task end to end (resumable)."""
from __future__ import annotations

from pathlib import Path

from ..config import resolve
from .checkpoint import check_run_folder, config_changes, read_metrics_file, run_lock
from .trainer import Trainer


def train(user_cfg: dict, out, task=None, progress: bool = True, stop_after: int | None = None):
    """Resolve ``user_cfg``, build the task's data (unless ``task`` is given), train into ``out``.

    Returns the metrics dict, or ``None`` when stopped early by ``stop_after``. A finished run
    (``out/metrics.json`` with status complete and the same run identity, :func:`config_changes`: options recorded
    before they existed count as their defaults) is not trained again; a folder holding another run's files is
    refused with a ``ConfigError``."""
    cfg = resolve(user_cfg)
    out = Path(out)
    with run_lock(out):  # one writer per run folder: a second process is refused at once
        check_run_folder(out, cfg)  # before building the task, which can take long
        done = out / "metrics.json"
        if done.exists():
            metrics = read_metrics_file(done)
            if metrics.get("status") == "complete" and not config_changes(metrics.get("config") or {}, cfg):
                return metrics
        if task is None:
            from ..data.inputs import build_task
            task = build_task(cfg)
        return Trainer(cfg, task, out, progress=progress).run(stop_after=stop_after)


__all__ = ["Trainer", "train"]
