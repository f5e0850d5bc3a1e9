"""A non-logging training step reads nothing from the device: no ``.item()``/``.tolist()``/``float(t)``/``if tensor``
(``aten::_local_scalar_dense``), no op whose output shape depends on the data (``nonzero``, boolean-mask indexing,
``unique``...). Each of these waits for the GPU (the host stalls until the queue drains); on the CPU they are
counted by a ``TorchDispatchMode`` (benchmarks/op_count.py), so the check needs no GPU."""

import pytest
import torch

from scripts_module import load_script

oc = load_script("op_count", "benchmarks")


def test_counter_sees_every_kind_of_host_read():
    """The counter is able to fail: each way of reading the device is seen."""
    x = torch.randn(6)
    reads = {
        "item": lambda: x.sum().item(),
        "tolist": lambda: x.tolist(),
        "float": lambda: float(x[0]),
        "if tensor": lambda: bool(x[0] > 0),
        "nonzero": lambda: (x > 0).nonzero(),
        "boolean mask": lambda: x[x > 0],
        "unique": lambda: torch.unique(x),
        "one_hot": lambda: torch.nn.functional.one_hot(torch.tensor([0, 2]), 3),
    }
    for name, read in reads.items():
        assert sum(oc.count(read).syncs.values()) > 0, name
    assert not oc.count(lambda: torch.softmax(x, 0) @ x + x.topk(2).values.sum()).syncs


CONFIGS = {
    "G": dict(),
    "AG": dict(metric="AG"),
    "LE": dict(metric="LE"),
    "partial dmp_ent": dict(method="dmp_ent", setting="partial", entropy_weight=0.1),
    "accumulate": dict(anchor_mode="accumulate"),
    "no AL": dict(method="dmp_no_al"),
    "no DS": dict(method="dmp_no_ds"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_non_logging_dmp_step_reads_nothing_from_the_device(name):
    over = dict(CONFIGS[name])
    method = over.pop("method", "dmp")
    trainer, batches = oc.build(method, backbone="identity", in_dim=16, batch=6, classes=4, dims=(32, 16), **over)
    counter = oc.step_counts(trainer, batches, log=False)
    assert dict(counter.syncs) == {}, (name, dict(counter.syncs))
    assert counter.counts["linalg_eigh"] + counter.counts["_linalg_eigh"] > 0 or method == "dmp_no_al"
    # a logging step reads its row (one transfer): the check sees it
    assert sum(oc.step_counts(trainer, batches, log=True, warmup=0).syncs.values()) > 0
