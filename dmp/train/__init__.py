"""Training: :func:`train` runs one configured task end to end (resumable); :func:`train_stacked` runs several
seeds of one config stacked into one batched step (dmp/train/stacked_loop.py)."""
from __future__ import annotations

import contextlib
from pathlib import Path

from .. import methods
from ..config import ConfigError, resolve
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
        metrics = _finished(out, cfg)
        if metrics is not None:
            return metrics
        if task is None:
            from ..data.inputs import build_task
            task = build_task(cfg)
        return Trainer(cfg, task, out, progress=progress).run(stop_after=stop_after)


def _finished(out, cfg) -> dict | None:
    """``out/metrics.json`` if it records a finished run of ``cfg`` (:func:`config_changes`), else None."""
    done = out / "metrics.json"
    if done.exists():
        metrics = read_metrics_file(done)
        if metrics.get("status") == "complete" and not config_changes(metrics.get("config") or {}, cfg):
            return metrics
    return None


def train_stacked(user_cfg: dict, seeds, out_pattern: str, task=None, progress: bool = True,
                  stop_after: int | None = None) -> list[dict | None]:
    """:func:`train` of ``user_cfg`` with each seed of ``seeds``, into ``out_pattern`` with ``{seed}`` replaced by
    the seed, the unfinished runs stacked into one batched step (an execution choice: each run folder holds what the
    run alone writes, within dmp/train/stacked.py's tolerance, and resumes under either path). Returns each seed's
    metrics (``None`` for a run stopped by ``stop_after``). Refused before any work: a pattern without ``{seed}``,
    a repeated seed, a ``seed`` key in ``user_cfg``, a method that cannot be stacked, a folder of another run."""
    from .stacked import check_stackable
    from .stacked_loop import run_stacked

    seeds = [int(s) for s in seeds]
    if "{seed}" not in str(out_pattern):
        raise ConfigError(f"--out {out_pattern!r}: several seeds need a folder each; put {{seed}} in it "
                          f"(e.g. results/runs/mine/seed{{seed}})")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {','.join(map(str, seeds))}: a seed given twice")
    if "seed" in user_cfg:
        raise ConfigError("config key 'seed' and --seeds both given: use one")
    cfgs = [resolve({**user_cfg, "seed": s}) for s in seeds]
    outs = [Path(str(out_pattern).replace("{seed}", str(s))) for s in seeds]
    with contextlib.ExitStack() as locks:
        for out, cfg in zip(outs, cfgs):
            locks.enter_context(run_lock(out))
            check_run_folder(out, cfg)
        results = [_finished(out, cfg) for out, cfg in zip(outs, cfgs)]
        todo = [i for i, r in enumerate(results) if r is None]
        if not todo:
            return results
        method = methods.get(cfgs[0]["method"])
        if method.build_modules(cfgs[0], list(cfgs[0]["bottleneck_dims"]), 2) is not None:  # before the data loads
            raise ConfigError(f"--seeds: method {method.name!r} trains modules besides the network (a domain "
                              f"discriminator), which are not stacked: not stackable; train its seeds one by one")
        if task is None:
            from ..data.inputs import build_task
            task = build_task(cfgs[todo[0]])  # the task does not depend on the seed (dmp/data/inputs.py)
        trainers = [Trainer(cfgs[i], task, outs[i], progress=progress) for i in todo]
        try:
            check_stackable(trainers)
        except ValueError as exc:
            raise ConfigError(f"--seeds: {exc}") from None
        ran = run_stacked(trainers, stop_after=stop_after, progress=progress) if len(trainers) > 1 else \
            [trainers[0].run(stop_after=stop_after)]
        for i, metrics in zip(todo, ran):
            results[i] = metrics
    return results


__all__ = ["Trainer", "train", "train_stacked"]
