"""What the step benchmarks share: the reference step they compare DMP's with (the two-domain cross-entropy step)
and the counter of the ATen operations and host reads a step dispatches (benchmarks/op_count.py,
benchmarks/throughput.py, benchmarks/step_overhead.py)."""
from __future__ import annotations

import collections

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


def ce_objective(trainer, xs, ys, xt):
    _, logits_s = trainer.forward(xs)
    _, logits_t = trainer.forward(xt)
    return F.cross_entropy(logits_s, ys) + 0.0 * logits_t.sum()


def both_ce(trainer, xs, ys, xt):
    """The two-domain cross-entropy step: the trainer's model, autocast and optimiser, both batches forward and
    backward, no DMP term (the reference of the DMP / two-domain CE goal); under ``--compile step`` its forward and
    loss compiled as the DMP step's are (``trainer.ce_objective``)."""
    trainer.model.train()
    loss = getattr(trainer, "ce_objective", ce_objective)(trainer, xs, ys, xt)
    trainer.opt.zero_grad(set_to_none=True)
    loss.backward()
    trainer.opt.step()


# Operations that wait for the device: a scalar read, an output whose shape depends on the values, or a tensor made
# from Python data (``torch.tensor``/``torch.as_tensor`` of numbers: on a GPU a blocking copy from pageable host
# memory, which waits for the stream).
SYNC_OPS = frozenset({"_local_scalar_dense", "item", "nonzero", "masked_select", "_unique", "_unique2",
                      "unique_dim", "unique_consecutive", "unique_dim_consecutive", "repeat_interleave",
                      "equal", "is_nonzero", "_assert_async", "bincount", "histc", "lift_fresh", "lift_fresh_copy"})
# Indexing with a boolean mask is a nonzero() inside the kernel.
MASK_INDEXED_OPS = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})


# Python-level reads of tensor memory: on the CPU ``tolist``/``numpy`` dispatch no ATen op (on a GPU they copy to
# the host and wait), so they are caught one level up, as torch functions.
HOST_READ_METHODS = frozenset({"tolist", "numpy", "item", "__bool__", "__float__", "__int__", "__index__",
                               "__complex__", "__array__"})


class _HostReads(TorchFunctionMode):
    def __init__(self, syncs: collections.Counter):
        super().__init__()
        self.syncs = syncs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READ_METHODS:
            self.syncs[f"Tensor.{name}"] += 1
        return func(*args, **(kwargs or {}))


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched inside the ``with`` block (``counts``: op name -> calls) and the
    host reads among them (``syncs``: op name -> calls): the syncing ATen ops of :data:`SYNC_OPS` and the
    Python-level reads of :data:`HOST_READ_METHODS`."""

    def __init__(self):
        super().__init__()
        self.counts: collections.Counter = collections.Counter()
        self.syncs: collections.Counter = collections.Counter()
        self._reads = _HostReads(self.syncs)

    def __enter__(self):
        self._reads.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._reads.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        self.counts[name] += 1
        if name in SYNC_OPS or (name in MASK_INDEXED_OPS and _has_bool_index(args)):
            self.syncs[name if name in SYNC_OPS else f"{name} (boolean mask)"] += 1
        return func(*args, **kwargs)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _has_bool_index(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (indices or ()))


def count(fn) -> OpCounter:
    """The :class:`OpCounter` of one call of ``fn()``."""
    with OpCounter() as counter:
        fn()
    return counter
