"""Stacked runs (dmp/train/stacked.py): K seeds of one config trained by one vmapped step give each run the losses
and parameters of the run trained alone by ``Trainer.step``.

Tolerance (float32, CPU): every logged value (loss, ce, the method's terms) within 1e-5 relative, every parameter
and buffer within 1e-5 of its tensor's largest entry. Not bit for bit: vmap turns each run's matrix products into
batched products, which round differently. One exception, whatever the path: the bias of a Linear layer followed by
a BatchNorm1d in training mode has a zero gradient in exact arithmetic (BatchNorm subtracts the batch mean), so its
computed gradient is round-off and Adam, which divides by the gradient's own scale, moves it by about lr per step in
a direction the round-off picks; the running mean that follows it moves with it. Those tensors are checked to have a
round-off gradient instead (below 1e-5 of the layer weight's)."""
import pytest
import torch

from dmp.config import resolve
from dmp.train.stacked import StackedRuns, check_stackable
from dmp.train.trainer import Trainer
from synthetic import shift_task, small_cfg

REL = 1e-5
STEPS = 3


def _trainers(root, tag, seeds, **over):
    cfg = dict(bottleneck_dims=[32, 16], batch_size=8, intra_start=0, inter_start=0, **over)
    return [Trainer(resolve(small_cfg(seed=s, **cfg)), shift_task(), root / f"{tag}{s}", progress=False)
            for s in seeds]


def _batches(t, n):
    """Trainer ``t``'s own batches of iterations 0 .. n-1, as its run loop draws them: ``(xs, ys, xt)``."""
    target = t.target.iterate(0, n) if t.needs.target != "none" else None
    for xs, ys in t.source.iterate(0, n):
        yield xs, ys, (next(target)[0] if target is not None else None)


def _alone_and_stacked(root, seeds, **over):
    alone, together = _trainers(root, "alone", seeds, **over), _trainers(root, "stacked", seeds, **over)
    rows_alone = []
    for t in alone:
        if t.uses_anchors:
            t.refresh_anchors()
        rows_alone.append([t.step(it, *b, log=True) for it, b in enumerate(_batches(t, STEPS))])
    stacked = StackedRuns(together)
    if stacked.needs.refreshes:
        stacked.refresh_anchors()
    streams = [_batches(t, STEPS) for t in together]
    rows_stacked = [stacked.step(it, [next(s) for s in streams], log=True) for it in range(STEPS)]
    stacked.write_back()
    return alone, together, stacked, rows_alone, rows_stacked


def _bn_fed_biases(model):
    """The names of the Linear biases that feed a BatchNorm (and that BatchNorm's running mean), with the weight
    beside each bias."""
    out = {}
    for name, module in model.named_modules():
        children = list(module.children()) if isinstance(module, torch.nn.Sequential) else []
        for i, (a, b) in enumerate(zip(children, children[1:])):
            if isinstance(a, torch.nn.Linear) and isinstance(b, torch.nn.modules.batchnorm._BatchNorm):
                out[f"{name}.{i}.bias"] = f"{name}.{i}.weight"
                out[f"{name}.{i + 1}.running_mean"] = None
    return out


def _check(alone, together, stacked, rows_alone, rows_stacked):
    for k, (a, t) in enumerate(zip(alone, together)):
        for it in range(STEPS):
            want, got = rows_alone[k][it], rows_stacked[it][k]
            assert got.keys() == want.keys()
            assert (got["iteration"], got["lr"]) == (want["iteration"], want["lr"])
            for key in want.keys() - {"iteration", "lr"}:
                assert got[key] == pytest.approx(want[key], rel=REL, abs=1e-7), (k, it, key)
        skip = _bn_fed_biases(a.model)
        state_a, state_t = a.model.state_dict(), t.model.state_dict()
        for name, want in state_a.items():
            if name in skip:
                continue
            scale = want.double().abs().max().clamp_min(1e-30)
            assert (state_t[name].double() - want.double()).abs().max() <= REL * scale, (k, name)
        for name, weight in skip.items():  # the gradient that moved them is round-off (the module docstring)
            if weight is not None:
                grad, wgrad = stacked.params[name].grad[k], stacked.params[weight].grad[k]
                assert grad.abs().max() <= 1e-5 * wgrad.abs().max(), (k, name)
        # the optimiser's state, written back into the trainer, is the run's own
        opt_a, opt_t = a.opt.state_dict()["state"], t.opt.state_dict()["state"]
        names = [n for n, _ in a.model.named_parameters()]
        for i, name in enumerate(names):
            if name in skip:
                continue
            for key, want in opt_a[i].items():
                got = opt_t[i][key]
                scale = want.double().abs().max().clamp_min(1e-30)
                assert (got.double() - want.double()).abs().max() <= REL * scale, (k, name, key)


@pytest.mark.parametrize("method, over", [
    ("source_only", {}),
    ("dmp", {"manifold_bn": False}),  # every parameter compared, the biases too
    ("dmp", {"metric": "LE", "setting": "partial"}),  # the class weights and mean prediction per run
])
def test_three_stacked_seeds_are_each_the_run_alone(tmp_path, method, over):
    _check(*_alone_and_stacked(tmp_path, [0, 1, 2], method=method, **over))


def test_one_stacked_run_is_the_run_alone(tmp_path):
    _check(*_alone_and_stacked(tmp_path, [7], method="dmp"))


def test_state_written_back_and_stacked_again_is_the_same(tmp_path):
    """write_back then load_from_trainers (a resume's route: each trainer loads its checkpoint, then is stacked)
    gives the stacked state bit for bit: weights, running statistics, optimiser moments and step counts."""
    _, together, stacked, _, _ = _alone_and_stacked(tmp_path, [0, 1], method="dmp")
    again = StackedRuns(together)
    for name, value in stacked.params.items():
        assert torch.equal(again.params[name], value)
    for name, value in stacked.buffers.items():
        assert torch.equal(again.buffers[name], value)
    for p, q in zip(stacked.opt.param_groups[0]["params"], again.opt.param_groups[0]["params"]):
        for key, value in stacked.opt.state[p].items():
            assert torch.equal(again.opt.state[q][key], value), key


def test_runs_that_differ_beyond_the_seed_are_refused(tmp_path):
    runs = _trainers(tmp_path, "a", [0], method="dmp") + _trainers(tmp_path, "b", [1], method="dmp", lr=1e-2)
    with pytest.raises(ValueError, match="lr"):
        check_stackable(runs)


def test_benchmark_prints_both_paths(capsys):
    """benchmarks/stacked_runs.py at a tiny size: a figure per method and K, both paths, and their ratio."""
    from scripts_module import load_script
    out = load_script("stacked_runs", "benchmarks").main(
        ["--runs", "2", "--steps", "1", "--in-dim", "16", "--batch", "6", "--dims", "32", "16", "--classes", "4"])
    assert set(out) == {("source_only", 2), ("dmp", 2)}
    assert all(r["alone"] > 0 and r["stacked"] > 0 for r in out.values())
    assert "one after another" in capsys.readouterr().out
