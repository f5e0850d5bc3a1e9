"""Learning-rate schedules, and the training schedule (length, warm-ups, anchor period) in one unit."""
from __future__ import annotations

import math

from .. import methods


def lr_factor(schedule: str, progress: float) -> float:
    """``constant``: 1. ``anneal`` (Ganin et al., used by the paper on VisDA): :math:`(1 + 10 p)^{-0.75}` with
    ``p`` the training progress in [0, 1]."""
    if schedule == "constant":
        return 1.0
    if schedule == "anneal":
        return (1.0 + 10.0 * progress) ** -0.75
    raise ValueError(f"unknown lr schedule {schedule!r}")


def set_lr(optimizer, factor: float):
    for group in optimizer.param_groups:
        group["lr"] = group["initial_lr"] * factor


# -- the training schedule in one unit --------------------------------------------------------------------
# An *epoch* is ``epoch_iterations`` iterations when the config fixes it (VisDA-2017: 1000, as peers do for a
# 152k-image source), otherwise one pass over the source training split: ``ceil(n_s / batch_size)``
# iterations. Training length, warm-ups and the anchor period are all given in epochs ("<E>ep") or
# iterations, and converted here, once, for the trainer and for `python -m dmp config --schedule`.

def at_iteration(value, iterations_per_epoch: int) -> int:
    """An iteration count, or ``"<E>ep"`` for E epochs, as an iteration index."""
    if isinstance(value, str):
        return int(round(float(value[:-2]) * iterations_per_epoch))
    return int(value)


def schedule(cfg: dict, n_source: int) -> dict:
    """The resolved schedule of a run whose source training split has ``n_source`` samples.

    Returns ``iterations`` (T_max), ``iterations_per_epoch``, ``epochs`` (T_max in epochs),
    ``intra_start_iteration``, ``inter_start_iteration``, ``anchor_period`` (T_up, iterations) and
    ``anchor_refreshes`` (how many times the anchors and/or the mean target prediction are computed during the
    run, for a method that needs them: a full pass runs at iterations 0, T_up, 2 T_up, ...; accumulation windows
    close at T_up, 2 T_up, ...)."""
    per_epoch = cfg["epoch_iterations"] or math.ceil(n_source / cfg["batch_size"])
    total = cfg["iterations"] or max(1, int(round(cfg["epochs"] * per_epoch)))
    period = max(1, at_iteration(cfg["anchor_period"], per_epoch))
    refreshes = math.ceil(total / period) - (1 if cfg["anchor_mode"] == "accumulate" else 0)
    return {
        "iterations": total,
        "iterations_per_epoch": per_epoch,
        "epochs": total / per_epoch,
        "intra_start_iteration": at_iteration(cfg["intra_start"], per_epoch),
        "inter_start_iteration": at_iteration(cfg["inter_start"], per_epoch),
        "anchor_period": period,
        "anchor_refreshes": refreshes if methods.get(cfg["method"]).needs(cfg).refreshes else 0,
    }
