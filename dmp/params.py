"""What the layers declare their config keys with: :class:`Param` (a key's default, meaning and check),
:class:`ConfigError` (a bad run configuration), the checks the declarations share, and the image pipeline's keys.

This module imports nothing of the package: the methods (dmp/methods/) and the data layer declare with it, and the
resolver (dmp/config.py), which sits above both, composes what they declare into a run's config.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable


class ConfigError(ValueError):
    """A bad run configuration, raised before any training starts."""


@dataclasses.dataclass(frozen=True)
class Param:
    default: Any
    help: str
    check: Callable[[Any], bool] | None = None
    expect: str = ""
    source: str = ""  # a method-scoped key's default: the sentence / table of its own paper or code it rests on
    choices: tuple = ()  # the values of a key with a fixed set of them (:func:`_choice`)


def _choice(*values):
    return dict(check=lambda v: v in values, expect="one of " + ", ".join(map(str, values)), choices=values)


def _nonneg(most=math.inf):
    """A finite number >= 0; with ``most``, at most that (a weight or a norm whose square must stay finite in
    float32: a larger one makes the first loss non-finite instead of naming the key)."""
    bound = f" and at most {most:g}" if most < math.inf else ""
    return dict(check=lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf
                and v <= most, expect="a finite number >= 0" + bound)


def _pos_int(allow_none=False, most=None):
    """A positive integer (or null); with ``most``, at most that (a width: bounded before anything is allocated)."""
    def check(v):
        return (allow_none and v is None) or (isinstance(v, int) and not isinstance(v, bool) and 0 < v
                                              and (most is None or v <= most))
    return dict(check=check, expect="a positive integer" + (f" <= {most}" if most is not None else "")
                + (" or null" if allow_none else ""))


# Bounds of method-scoped keys: far above any setting of a paper or its code, below what overflows or exhausts memory.
MAX_WIDTH = 16384  # a hidden layer's width: 16384 x 16384 float32 weights are 1 GiB
MAX_WEIGHT = 1e6  # a loss weight or a target norm (squared: 1e12, finite in float32)
MAX_IMAGE_SIDE = 4096  # px of resize / crop: a 4096 x 4096 RGB float32 image is 192 MiB; the paper resizes to 256


def _int_ge0():
    return dict(check=lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                expect="an integer >= 0")


# The image pipeline's keys (dmp/data/inputs.py): a dataset that is no image list refuses a value other than these
# defaults, never ignores it.
INPUT_PARAMS: dict[str, Param] = {
    "resize": Param(256, "image resize (train and test)", **_pos_int(most=MAX_IMAGE_SIDE)),
    "crop": Param(224, "image crop (random at train, centre at test)", **_pos_int(most=MAX_IMAGE_SIDE)),
    "input_cache": Param(False, "on: read images from the input cache (python -m dmp data cache DATASET --resize "
                         "RESIZE: each image decoded and resized once, uint8, 196 KB per image at 256 px on disk), "
                         "crop/flip/normalise whole batches on the training device; the same batches as off",
                         **_choice(True, False)),
    "input_device": Param(False, "on (with input_cache on): the run's domains held whole on the training device as "
                          "one uint8 tensor, each training crop and flip drawn there from a generator seeded per "
                          "iteration, no DataLoader workers: the same images per batch as off, other crops of the "
                          "same distribution (docs/benchmarks.md)", **_choice(True, False)),
}


def resolve_workers(value) -> int:
    """The DataLoader worker count of config ``num_workers``: an integer as is; ``auto`` = min(8, usable cores - 1),
    the usable cores being the CPUs this process may run on (a SLURM job's allocation, a taskset)."""
    if value != "auto":
        return int(value)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(0, min(8, cores - 1))
