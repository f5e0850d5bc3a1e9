"""The run folder's lock: one training process writes into a run folder at a time (no torch import here, so the
Snakemake job's ``python -m dmp.suite prepare`` starts in a fraction of a second)."""
from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

# The run folder's lock (fcntl.flock, :func:`run_lock`): one training process per folder at a time. The file stays
# (removing a lock file races with a process that has just opened it); it holds nothing.
LOCK_FILE = ".dmp-run.lock"


class RunFolderBusy(ValueError):
    """Another process is training into the run folder (it holds :data:`LOCK_FILE`)."""


_HELD: dict[str, list] = {}  # run folder (resolved) -> [lock file descriptor, depth] of the locks this process holds


@contextlib.contextmanager
def run_lock(out):
    """Hold the lock of run folder ``out`` (created if needed) for the ``with`` block: an exclusive
    ``fcntl.flock`` on ``out/.dmp-run.lock``, which the system releases on any exit, a crash or a kill included.
    A folder locked by another process raises :class:`RunFolderBusy` at once (no waiting); the same process may
    nest the block (``train`` holds it from its first check to the end of ``Trainer.run``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    key = str(out.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    try:
        import fcntl
    except ImportError:  # not on a POSIX system: no lock
        yield
        return
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise RunFolderBusy(f"{out} is in use by another training process (it holds {out / LOCK_FILE}); wait "
                            f"until it ends or use another --out folder") from None
    _HELD[key] = [fd, 1]
    try:
        yield
    finally:
        del _HELD[key]
        os.close(fd)  # releases the lock


def holds_run_lock(method):
    """Decorator of a method of an object with an ``out`` folder: the method runs under :func:`run_lock`."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with run_lock(self.out):
            return method(self, *args, **kwargs)
    return wrapper
