"""Learning-rate schedules."""
from __future__ import annotations


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
