"""The run loop of stacked runs (:class:`~dmp.train.stacked.StackedRuns`): K runs of one config but their seeds,
each with its own run folder, trained by one batched step, each ending with the checkpoint, ``log.csv`` and
``metrics.json`` it would write alone (``Trainer.run``), within the step's tolerance (dmp/train/stacked.py).

Per run, under its run folder's lock: ``Trainer.open_folder`` (the folder checked, resumed from its checkpoint).
The runs step together from one iteration: a run whose checkpoint lags behind the others' first catches up alone
(``Trainer.train_until``). Then each iteration does what ``Trainer.run`` does, in its order, from each run's own
streams: the target accuracy logged (``log_accuracy``), the anchors refreshed (each run's own pass), one stacked
step, and at each checkpoint every run's state written back to its trainer, checked finite and saved.

Times: a run's ``train_seconds`` and ``wall_seconds`` count the whole shared step (not a K-th of it), and the
provenance entry of the stretch it trained stacked names its partners (``stacked_with``: the seeds, and
``stacked_from``: the iteration the stacked stretch began at). A stacked
run's seconds are not a single run's: the tables never read them as times (dmp.metrics.read_metrics).

A run whose loss turns non-finite ends as a single run ends: no checkpoint of the diverged weights is written, its
folder keeps its last checkpoint. The others take the step again re-stacked without it (the step raises before it
changes any run, :meth:`StackedRuns.step`) and go on; the loop then raises ``FloatingPointError`` naming the
diverged seeds, after the others' ``metrics.json`` are written.
"""
from __future__ import annotations

import contextlib
import time

import torch

from ..run_lock import run_lock
from .stacked import StackedRuns


class _Clock:
    """The shared step's seconds: host time on the CPU; on CUDA the device time between two events around each
    step, read at checkpoints (as ``Trainer._timed_step``)."""

    def __init__(self, device):
        self.cuda, self.events, self.seconds = device.type == "cuda", [], 0.0

    def time(self, step):
        if not self.cuda:
            start = time.perf_counter()
            out = step()
            self.seconds += time.perf_counter() - start
            return out
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = step()
        end.record()
        self.events.append((start, end))
        return out

    def collect(self) -> float:
        """The seconds since the last call."""
        if self.events:
            self.events[-1][1].synchronize()
            self.seconds += sum(a.elapsed_time(b) for a, b in self.events) / 1e3
            self.events = []
        seconds, self.seconds = self.seconds, 0.0
        return seconds


def run_stacked(trainers, stop_after: int | None = None, progress: bool = True) -> list[dict | None]:
    """Train ``trainers`` (built, not yet run; one config but their seeds, :func:`~dmp.train.stacked.check_stackable`)
    to ``iterations`` (or ``stop_after``) stacked, and evaluate each. Returns each run's metrics (``None`` for a run
    stopped early). Raises ``FloatingPointError`` naming the seeds of any run that diverged, after the others end."""
    trainers = list(trainers)
    with contextlib.ExitStack() as locks:
        for t in trainers:
            locks.enter_context(run_lock(t.out))
        for t in trainers:
            t.open_folder()
        T = trainers[0].sched["iterations"]
        stop = T if stop_after is None else min(T, stop_after)
        start = min(max(t.iteration for t in trainers), stop)
        for t in trainers:
            if t.iteration < start:  # its checkpoint lags behind the others': it catches up alone
                t.train_until(start)
        seeds = [t.cfg["seed"] for t in trainers]
        for t in trainers:
            t.provenance[-1].update(stacked_with=seeds, stacked_from=start)
        diverged = _loop(trainers, start, stop, progress)
        live = [t for t in trainers if t not in diverged]
        results = {id(t): t.complete() for t in live}
    if diverged:
        raise FloatingPointError("non-finite loss in the stacked run(s) with seed " + ", ".join(
            f"{t.cfg['seed']} (iteration {int(t._nonfinite_at)})" for t in diverged)
            + f"; their folders keep their last checkpoint, the others finished")
    return [results.get(id(t)) for t in trainers]


def _loop(trainers, start: int, stop: int, progress: bool) -> list:
    """Iterations ``start .. stop - 1`` of ``trainers``, stacked; returns the trainers that diverged."""
    lead = trainers[0]
    stacked = StackedRuns(trainers)
    clock = _Clock(lead.device)
    pin = lead.pin_memory
    streams = {id(t): (t.source.iterate(start, stop, pin),
                       t.target.iterate(start, stop, pin) if t.needs.target != "none" else None) for t in trainers}
    rows = {id(t): [] for t in trainers}
    diverged = []
    bar = lead.progress_bar(f"{len(trainers)} stacked: {lead.cfg['method']} {lead.cfg['source']}->"
                            f"{lead.cfg['target']}")
    wall = time.perf_counter()
    for it in range(start, stop):
        accuracy, refresh, log = lead.due(it)
        if accuracy:
            paused = time.perf_counter()
            stacked.write_back()
            for t in stacked.trainers:
                t.log_accuracy()
            wall += time.perf_counter() - paused
        batches = {}
        for t in stacked.trainers:
            source, target = streams[id(t)]
            xs, ys = next(source)
            batches[id(t)] = (xs, ys, next(target)[0] if target is not None else None)
        if refresh:
            stacked.refresh_anchors()
        step_rows = None
        while stacked is not None:
            try:
                step_rows = clock.time(lambda: stacked.step(it, [batches[id(t)] for t in stacked.trainers], log=log))
                break
            except FloatingPointError:  # the step changed no run: it is taken again without the diverged ones
                stacked = _without_diverged(stacked, diverged)
        if stacked is None:
            break
        for t, row in zip(stacked.trainers, step_rows or []):
            rows[id(t)].append(row)
        for t in stacked.trainers:
            t.iteration = it + 1
        bar.update(1)
        if lead.checkpoint_due(it + 1, stop):
            seconds = clock.collect()
            stacked.write_back()
            try:
                stacked.check_finite(it)
            except FloatingPointError:
                stacked = _without_diverged(stacked, diverged)
                if stacked is None:
                    break
            now = time.perf_counter()
            for t in stacked.trainers:
                t.train_seconds += seconds
                t.wall_seconds += now - wall
                t.save_checkpoint(rows[id(t)])
            wall = time.perf_counter()
    bar.close()
    if stacked is not None:
        stacked.write_back()
    return diverged


def _without_diverged(stacked: StackedRuns, diverged: list) -> StackedRuns | None:
    """``stacked`` re-stacked without its runs whose non-finite flag is set (appended to ``diverged``), every other
    run's state written back to its trainer first; None when no run is left."""
    flags = stacked.nonfinite_at.tolist()
    stacked.write_back()
    diverged += [t for t, f in zip(stacked.trainers, flags) if f >= 0]
    live = [t for t, f in zip(stacked.trainers, flags) if f < 0]
    return StackedRuns(live) if live else None
