"""One GPU per training job on a multi-GPU machine.

Snakemake's ``--resources gpu=N`` lets N training jobs (``gpu: 1`` each) run at once, but nothing tells a job which
GPU is its own: every job would train on ``cuda:0``. The pipeline therefore exports ``DMP_GPU_SLOTS=N`` to its jobs
(workflow/rules/common.smk), and each ``dmp train`` process claims one free device under a file lock before CUDA is
initialised (:func:`gpu_slot`): it exports that device alone as ``CUDA_VISIBLE_DEVICES``, and holds the lock until
the process ends, however it ends (the operating system releases an ``flock`` with its process, so a crashed job
frees its slot).

- Devices: ``0 .. N-1``, or the first N of ``CUDA_VISIBLE_DEVICES`` when the whole pipeline was started with a list
  (``CUDA_VISIBLE_DEVICES=2,3,5,7 snakemake --resources gpu=4 ...``).
- A job that already sees exactly one device is left alone: SLURM's own assignment (``--gpus=1``) or a user's pin.
- Locks: one file per device in ``$DMP_GPU_LOCK_DIR`` (default: ``<tmp>/dmp-gpu-slots-<uid>``), shared by every
  pipeline of the user on the machine, so two Snakemake calls do not pile their jobs on one device.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sys
import tempfile
import time
from pathlib import Path

SLOTS_ENV = "DMP_GPU_SLOTS"
LOCK_DIR_ENV = "DMP_GPU_LOCK_DIR"
VISIBLE = "CUDA_VISIBLE_DEVICES"
MAX_SLOTS = 1024


class GpuSlotError(ValueError):
    """The GPU slots asked for cannot be honoured (a bad ``DMP_GPU_SLOTS``, too few visible devices)."""


def lock_dir(env=os.environ) -> Path:
    return Path(env.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / f"dmp-gpu-slots-{os.getuid()}")


def slot_devices(env=os.environ) -> list[str] | None:
    """The devices the job may claim one of, or ``None`` when it claims none (no ``DMP_GPU_SLOTS``, or the job
    already sees exactly one device)."""
    raw = env.get(SLOTS_ENV, "").strip()
    if not raw or raw == "0":
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise GpuSlotError(f"{SLOTS_ENV}={raw[:40]!r}: expected the number of GPUs (an integer >= 0)")
    if len(raw) > 4 or int(raw) > MAX_SLOTS:  # bounded before any list is built
        raise GpuSlotError(f"{SLOTS_ENV}={raw[:40]}: at most {MAX_SLOTS} GPUs (snakemake --resources gpu=N with N "
                           f"the machine's GPUs)")
    n = int(raw)
    visible = env.get(VISIBLE)
    if visible is not None:
        listed = [d.strip() for d in visible.split(",") if d.strip()]
        if len(listed) <= 1:
            return None  # assigned already (SLURM, or the user), or no device at all: left alone
        if len(listed) < n:
            raise GpuSlotError(f"{SLOTS_ENV}={n} (snakemake --resources gpu={n}) but {VISIBLE}={visible} lists "
                               f"{len(listed)} devices: ask for at most {len(listed)} GPUs")
        return listed[:n]
    return [str(i) for i in range(n)]


def lock_name(device: str) -> str:
    """The lock file of ``device`` (an index, a GPU UUID, or a MIG name such as ``MIG-GPU-<uuid>/1/0``): ``gpu<device>
    .lock`` with every character but letters, digits, ``.``, ``_`` and ``-`` written as ``_``."""
    return "gpu" + re.sub(r"[^A-Za-z0-9._-]", "_", device) + ".lock"


@contextlib.contextmanager
def gpu_slot(env=os.environ, poll: float = 1.0):
    """Claim one of :func:`slot_devices` for the ``with`` block (waiting while all are taken) and export it as
    ``CUDA_VISIBLE_DEVICES``; yields ``{"slot", "device"}``, or ``None`` when no slot is to be claimed. Must be
    entered before anything initialises CUDA in this process."""
    devices = slot_devices(env)
    if devices is None:
        yield None
        return
    folder = lock_dir(env)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, or no permission
        raise GpuSlotError(f"{LOCK_DIR_ENV}: cannot use {folder} as the GPU slots' lock folder ({exc.strerror}); "
                           f"point {LOCK_DIR_ENV} at a folder") from None
    waited = False
    while True:
        for slot, device in enumerate(devices):
            fh = open(folder / lock_name(device), "a+")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                continue
            before = env.get(VISIBLE)
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            env[VISIBLE] = device
            try:
                yield {"slot": slot, "device": device}
            finally:
                if before is None:
                    env.pop(VISIBLE, None)
                else:
                    env[VISIBLE] = before
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
            return
        if not waited:
            print(f"all {len(devices)} GPU slots in {folder} are taken; waiting for one", file=sys.stderr)
            waited = True
        time.sleep(poll)


def cpu_info() -> dict:
    """What metrics.json records of the CPU a run used: its model name and the kernel family torch dispatches to.
    CPU kernels round differently on another family or vendor (docs/workflow.md, "The same numbers, on the same kind
    of CPU"), so a run is bit-for-bit reproducible on the same kind of CPU only."""
    import platform

    import torch

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    except OSError:
        pass
    return {"model": model, "capability": torch.backends.cpu.get_cpu_capability()}


def gpu_info(device) -> dict | None:
    """What metrics.json records of the GPU a run used: the visible device(s), the device's name and index."""
    if getattr(device, "type", str(device)) != "cuda":
        return None
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    return {"cuda_visible_devices": os.environ.get(VISIBLE), "index": index,
            "name": torch.cuda.get_device_name(index), "slots": os.environ.get(SLOTS_ENV)}
