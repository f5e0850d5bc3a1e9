"""Config ``compile`` (dmp/train/compiled.py): ``off`` is the eager step bit for bit; ``loss`` and ``step`` agree with
it to float tolerance, compile a bounded number of graphs, resume across modes with the model's own state_dict keys;
bad values and impossible modes are one-line errors naming the key.

The fast tests compile with the ``aot_eager`` backend (graph capture and AOTAutograd backward, no code generation);
one slow test compiles with inductor (C++ code generation on the CPU)."""
import csv
import subprocess
import sys

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from dmp import methods
from dmp.config import ConfigError, resolve
from dmp.train import Trainer, train
from dmp.train import compiled
from tests.synthetic import shift_task, small_cfg

STEPS = dict(iterations=24, intra_start=8, anchor_period=10, log_every=1, checkpoint_every=1000,
             bottleneck_dims=[32, 16], batch_size=16, save_features=0, interpolation_per_class=4)


@pytest.fixture
def aot_eager(monkeypatch):
    monkeypatch.setenv(compiled.BACKEND_ENV, "aot_eager")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


def log_rows(folder):
    with open(folder / "log.csv", newline="") as fh:
        return list(csv.DictReader(fh))


class EagerReference(Trainer):
    """The trainer with the step as it was written before ``compile`` existed (verbatim, logging aside): the
    reference ``compile: off`` must equal bit for bit."""

    def step(self, it, xs, ys, xt, log: bool = True):
        cfg, needs = self.cfg, self.needs
        self.model.train()
        progress = it / self.sched["iterations"]
        from dmp.train.schedule import lr_factor, set_lr
        set_lr(self.opt, lr_factor(cfg["lr_schedule"], progress))
        ys = ys.to(self.device)
        feats_s, logits_s = self.forward(xs)
        ce = F.cross_entropy(logits_s, ys)
        ctx = methods.StepContext(cfg, it, progress, self.sched, self.task.num_classes, self.device, feats_s,
                                  logits_s, ys, anchors=self.anchors if needs.anchors else None,
                                  mean_prediction=self.anchors.mean_prediction, modules=self.modules)
        ctx.feats_t, ctx.logits_t = self.forward(xt)
        ctx.p_t = torch.softmax(ctx.logits_t, 1)
        ctx.class_weights = self._device_weights()
        terms = self.method.losses(ctx)
        parts = {"ce": ce, **terms}
        loss = self.method.total(ce, terms, ctx)
        if cfg["anchor_mode"] == "accumulate":
            self.anchors.add_source(feats_s, ys)
            if needs.mean_prediction:
                self.anchors.add_target(ctx.p_t)
        row = None
        if log:
            values = [float(v.detach()) for v in (loss, *parts.values())]
            row = dict(zip(parts, values[1:]), iteration=it, lr=self.opt.param_groups[self._head_group]["lr"],
                       loss=values[0])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return row


@pytest.mark.parametrize("mode, setting", [("full_pass", "vanilla"), ("accumulate", "partial")])
def test_off_is_the_eager_step_bit_for_bit(tmp_path, monkeypatch, mode, setting):
    part = 3 if setting == "partial" else None
    cfg = resolve(small_cfg(compile="off", anchor_mode=mode, setting=setting, **STEPS))
    ref = EagerReference(cfg, shift_task(target_classes=part), tmp_path / "ref", progress=False).run()

    def no_compile(*a, **k):
        raise AssertionError("compile: off called torch.compile")
    monkeypatch.setattr(torch, "compile", no_compile)
    run = Trainer(cfg, shift_task(target_classes=part), tmp_path / "off", progress=False).run()
    assert (tmp_path / "ref" / "log.csv").read_text() == (tmp_path / "off" / "log.csv").read_text()
    assert (run["accuracy"], run["class_weights"]) == (ref["accuracy"], ref["class_weights"])
    auto = train(small_cfg(anchor_mode=mode, setting=setting, **STEPS), tmp_path / "auto",
                 task=shift_task(target_classes=part), progress=False)  # auto on the CPU: off
    assert (tmp_path / "auto" / "log.csv").read_text() == (tmp_path / "off" / "log.csv").read_text()
    assert auto["config"]["compile"] == "auto"


@pytest.mark.parametrize("mode", ["loss", "step"])
def test_compiled_modes_agree_with_off_and_compile_per_switch_only(tmp_path, aot_eager, mode):
    """24 steps with anchor refreshes at 0, 10, 20 (new anchor tensors) and the intra-class term switched on at
    iteration 8: graphs are compiled at the first step and at the switch only, whatever the iteration, anchors or
    class weights (each variant is a few graphs: the eigen-decomposition runs between them)."""
    cfg = resolve(small_cfg(**STEPS))
    train(dict(cfg, compile="off"), tmp_path / "off", task=shift_task(), progress=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 0
    graphs = []

    class Counting(Trainer):
        def step(self, *args, **kwargs):
            row = super().step(*args, **kwargs)
            graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
            return row

    Counting(dict(cfg, compile=mode), shift_task(), tmp_path / mode, progress=False).run()
    assert len(graphs) == 24 and 0 < graphs[0] == graphs[7] < graphs[8] == graphs[23] <= 2 * graphs[0] + 2, graphs
    off, on = log_rows(tmp_path / "off"), log_rows(tmp_path / mode)
    assert len(off) == len(on) == 24
    assert float(off[-1]["intra"]) != 0 and float(off[0]["intra"]) == 0  # the switch happened in the window
    for a, b in zip(off, on):
        for key in ("loss", "ce", "inter", "intra", "align"):
            assert float(b[key]) == pytest.approx(float(a[key]), rel=1e-4, abs=1e-6), (a["iteration"], key)


def test_a_compiled_run_announces_each_compilation_once(tmp_path, aot_eager, capsys):
    """A run with a progress bar says when it compiles (the first step and the intra-class switch at iteration 8),
    not at every step or anchor refresh."""
    cfg = resolve(small_cfg(**dict(STEPS, iterations=12)))
    train(dict(cfg, compile="step"), tmp_path / "step", task=shift_task(), progress=True)
    out = capsys.readouterr().out.splitlines()
    said = [line.split(" (")[0] for line in out if line.startswith("compile: step: compiling")]
    assert [line.rsplit(" ", 1)[1] for line in said] == ["0", "8"], said
    done = [float(line.split()[-2]) for line in out if line.startswith("compile: step: forward compiled in ")]
    assert len(done) == 2 and all(seconds > 0 for seconds in done), out  # measured, not typed in


def test_resume_across_modes_keeps_the_state_dict_keys(tmp_path, aot_eager):
    cfg = small_cfg(**STEPS)
    full = train(dict(cfg, compile="off"), tmp_path / "a", task=shift_task(), progress=False)
    assert train(dict(cfg, compile="step"), tmp_path / "b", task=shift_task(), progress=False, stop_after=12) is None
    saved = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    eager = Trainer(resolve(dict(cfg, compile="off")), shift_task(), tmp_path / "c", progress=False)
    assert list(saved) == list(eager.model.state_dict())  # no "_orig_mod." prefix: the model is never wrapped
    resumed = train(dict(cfg, compile="loss"), tmp_path / "b", task=shift_task(), progress=False)
    assert resumed["provenance"][-1]["from_iteration"] == 12
    off, on = log_rows(tmp_path / "a"), log_rows(tmp_path / "b")
    assert [r["iteration"] for r in on] == [str(i) for i in range(24)]
    for a, b in zip(off, on):
        assert float(b["loss"]) == pytest.approx(float(a["loss"]), rel=1e-4)
    assert resumed["accuracy"] == pytest.approx(full["accuracy"], abs=1.0)


def test_switch_iteration_keeps_every_start_switch():
    sched = {"iterations": 100, "inter_start_iteration": 5, "intra_start_iteration": 30, "anchor_period": 7}
    for it in range(100):
        s = compiled.switch_iteration(it, sched)
        assert [s >= sched[k] for k in ("inter_start_iteration", "intra_start_iteration")] == \
               [it >= sched[k] for k in ("inter_start_iteration", "intra_start_iteration")]
    assert sorted({compiled.switch_iteration(it, sched) for it in range(100)}) == [0, 5, 30]


def test_auto_is_off_on_the_cpu_and_when_deterministic(monkeypatch):
    monkeypatch.setenv(compiled.BACKEND_ENV, "aot_eager")
    cfg = resolve(small_cfg())
    dmp, dann = methods.get("dmp"), methods.get("dann")
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert compiled.resolve_mode(cfg, cpu, dmp) == "off"
    assert compiled.resolve_mode(cfg, cuda, dmp) == "off"  # deterministic: true (the default)
    assert compiled.resolve_mode(dict(cfg, deterministic=False), cuda, dmp) == compiled.AUTO_CUDA
    assert compiled.resolve_mode(dict(cfg, deterministic=False), cuda, dann) == "off"
    assert compiled.resolve_mode(dict(cfg, compile="step"), cpu, dmp) == "step"


@pytest.mark.parametrize("over, env, match", [
    (dict(compile="yes"), None, r"config key 'compile' = 'yes' is invalid: expected one of auto, off, loss, step"),
    (dict(compile="loss", method="dann"), None, r"config key 'compile' = 'loss': method 'dann'"),
    (dict(compile="step"), "no_such_backend", r"config key 'compile' = 'step': .*no torch.compile backend"),
])
def test_bad_compile_values_are_one_line_errors_before_training(tmp_path, monkeypatch, over, env, match):
    if env:
        monkeypatch.setenv(compiled.BACKEND_ENV, env)
    with pytest.raises(ConfigError, match=match) as err:
        train(small_cfg(**over), tmp_path, task=shift_task(), progress=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_a_failing_compilation_is_a_one_line_error_naming_the_key(tmp_path, aot_eager, monkeypatch):
    def broken(gm, example_inputs):
        raise RuntimeError("no code generator\nsecond line")

    torch._dynamo.register_backend(broken, name="dmp_test_broken")
    monkeypatch.setenv(compiled.BACKEND_ENV, "dmp_test_broken")
    why = r"config key 'compile' = 'loss': torch.compile failed \(RuntimeError: no code generator\); use compile: off"
    with pytest.raises(ConfigError, match=why) as err:
        train(small_cfg(**dict(STEPS, compile="loss")), tmp_path, task=shift_task(), progress=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_a_mode_auto_chose_falls_back_to_eager_where_compilation_fails(tmp_path, aot_eager, monkeypatch):
    """``compile: auto`` (here: ``loss``, as if ``AUTO_CUDA`` chose it on CUDA) must not end a run that eager would
    finish: with a backend that fails, every frame runs eagerly, once (the log equals the eager run bit for bit)."""
    def broken(gm, example_inputs):
        raise RuntimeError("no code generator")

    torch._dynamo.register_backend(broken, name="dmp_test_broken_auto")
    cfg = resolve(small_cfg(**dict(STEPS, iterations=6)))
    train(dict(cfg, compile="off"), tmp_path / "off", task=shift_task(), progress=False)
    monkeypatch.setenv(compiled.BACKEND_ENV, "dmp_test_broken_auto")
    trainer = Trainer(cfg, shift_task(), tmp_path / "auto", progress=False)
    trainer.compiled = compiled.Step(trainer, "loss", fallback=True)
    trainer.run()
    assert (tmp_path / "auto" / "log.csv").read_text() == (tmp_path / "off" / "log.csv").read_text()


def test_command_line_reports_a_bad_compile_value_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "dmp", "config", "dataset=office31", "source=amazon",
                           "target=webcam", "compile=graphs"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0 and "'compile'" in proc.stderr, proc.stderr


def test_step_overhead_benchmark_times_a_compiled_step(aot_eager, capsys):
    from tests.scripts_module import load_script

    bench = load_script("step_overhead", "benchmarks")
    bench.main(["--backbone", "identity", "--in-dim", "32", "--batch", "8", "--dims", "16", "8", "--classes", "4",
                "--repeats", "2", "--n-source", "16", "--n-target", "8", "--compile", "step"])
    out = capsys.readouterr().out
    assert "compile=step" in out and "DMP step" in out and "first step (compile=step)" in out
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 2  # the source-only and the DMP objective


def test_compile_equivalence_benchmark_compares_against_the_eager_step(aot_eager, capsys):
    """benchmarks/compile_equivalence.py: the compiled trainer (aot_eager: the same ATen ops) stays at rounding level;
    the perturbed yardstick really moves the weights (a nonzero difference), so neither figure is a tautology."""
    import re

    from tests.scripts_module import load_script

    bench = load_script("compile_equivalence", "benchmarks")
    common = ["--backbone", "identity", "--in-dim", "32", "--batch", "8", "--dims", "16", "8", "--classes", "4",
              "--steps", "3"]
    found = {}
    for against in ("compiled", "perturbed"):
        bench.main(common + ["--against", against])
        out = capsys.readouterr().out
        terms, logits = re.search(r"logged terms (\S+); logits of the trained models (\S+)", out).groups()
        found[against] = float(terms), float(logits)
    assert found["compiled"][0] < 1e-5 and found["compiled"][1] < 1e-5
    assert found["perturbed"][1] > 0
    # TF32 keeps 10 of float32's 23 mantissa bits, rounded to nearest: 1 + 3/4096 lies between 1 and 1 + 1/1024
    # (the nearest), 1 + 1/4096 rounds down; the sign is kept; the gradient is the identity's
    x = torch.tensor([1 + 3 / 4096, 1 + 1 / 4096, -(1 + 3 / 4096), 1 + 1 / 1024], requires_grad=True)
    y = bench.tf32(x)
    assert y.tolist() == [1 + 1 / 1024, 1.0, -(1 + 1 / 1024), 1 + 1 / 1024]
    y.sum().backward()
    assert x.grad.tolist() == [1.0] * 4


@pytest.mark.slow
def test_inductor_loss_agrees_with_off(tmp_path, monkeypatch):
    """The default backend (inductor: C++ code generated for the CPU), one graph (intra-class term on from the
    start), a few steps. Scalar C++ (no SIMD) halves the compilation time (~50 s to ~28 s on 2 cores, cold cache)."""
    import torch._inductor.config

    monkeypatch.setattr(torch._inductor.config.cpp, "simdlen", 1)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    cfg = small_cfg(**dict(STEPS, iterations=4, intra_start=0))
    train(dict(cfg, compile="off"), tmp_path / "off", task=shift_task(), progress=False)
    train(dict(cfg, compile="loss"), tmp_path / "loss", task=shift_task(), progress=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0
    torch._dynamo.reset()
    for a, b in zip(log_rows(tmp_path / "off"), log_rows(tmp_path / "loss")):
        for key in ("loss", "ce", "inter", "intra", "align"):
            assert float(b[key]) == pytest.approx(float(a[key]), rel=1e-4, abs=1e-6), (a["iteration"], key)
