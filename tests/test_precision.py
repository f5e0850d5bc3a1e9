"""The training speed options on CPU: bf16 autocast, the fp32 path unchanged, logging-only host reads with a
deferred non-finite check, DataLoader workers (auto) and the wall-clock times in metrics.json. The CUDA-only
parts (channels_last, pinned memory, cudnn.benchmark kernels, event timing) need a GPU and are not run here."""
import csv
import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

import dmp.train.trainer as trainer_mod
import dmp.methods.dmp as dmp_method
from dmp.config import ConfigError, resolve
from dmp.params import resolve_workers
from dmp.data.inputs import ImageListDataset, Task, TensorDataset, image_transforms
from dmp.train import train
from dmp.train.trainer import Trainer, seed_everything
from synthetic import shift_task, small_cfg


def outcome(m):
    return (m["accuracy"], m["confusion_matrix"], m["class_weights"], m["interpolation"])


def log_rows(folder):
    with open(folder / "log.csv", newline="") as fh:
        return {int(r["iteration"]): r for r in csv.DictReader(fh)}


def image_task(n=24, side=16, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3, side, side)).astype(np.float32)
    y = np.arange(n) % classes
    ds = TensorDataset(x, y)
    xt = TensorDataset(x[::-1].copy() * 0.8 + 0.3, y[::-1].copy())
    return Task(ds, ds, xt, xt, [f"c{i}" for i in range(classes)], 3, None, "images")


CNN = dict(backbone="smallcnn", pretrained=False, bottleneck_dims=[32, 16], batch_size=6)


@pytest.mark.parametrize("backbone", ["identity", "smallcnn"])
def test_bf16_autocast_runs_forward_in_bf16_and_losses_in_fp32(tmp_path, monkeypatch, backbone):
    seen = {"feats": set(), "logits": set()}
    real = dmp_method.dmp_losses

    def spy(cfg, it, feats_s, y_s, feats_t, p_t, *rest):
        seen["feats"].update(str(f.dtype) for f in feats_s + feats_t)
        return real(cfg, it, feats_s, y_s, feats_t, p_t, *rest)

    monkeypatch.setattr(dmp_method, "dmp_losses", spy)
    over = dict(precision="bf16", iterations=12, intra_start=0, anchor_period=4, log_every=1, metric="LE")
    if backbone == "smallcnn":
        over.update(CNN)
    task = image_task() if backbone == "smallcnn" else shift_task()
    t = Trainer(resolve(small_cfg(**over)), task, tmp_path)
    inside = []

    def tracked(fn):
        def wrapper(*args, **kwargs):
            inside.append(fn.__name__)
            try:
                return fn(*args, **kwargs)
            finally:
                inside.pop()
        return wrapper

    t.step, t.refresh_anchors = tracked(t.step), tracked(t.refresh_anchors)
    monkeypatch.setattr(trainer_mod, "predict", tracked(trainer_mod.predict))

    def hook(module, args, out):
        if inside:
            seen["logits"].add((inside[0], str(out[1].dtype)))

    t.model.register_forward_hook(hook)
    metrics = t.run()
    # training steps, anchor passes and the final evaluation run the model under autocast
    assert seen["logits"] == {(f, "torch.bfloat16") for f in ("step", "refresh_anchors", "predict")}
    assert seen["feats"] == {"torch.float32"}             # the losses never see bf16
    rows = log_rows(tmp_path)
    assert sorted(rows) == list(range(12))
    assert all(math.isfinite(float(r[k])) for r in rows.values() for k in ("loss", "ce", "inter", "intra", "align"))
    assert metrics["config"]["precision"] == "bf16"
    # the reported accuracy is the final model's on the target, under bf16 autocast (within one sample: batching)
    t.model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        pred = t.model(task.target_eval.x)[1].float().argmax(1)
    independent = 100.0 * float((pred == task.target_eval.labels).double().mean())
    assert abs(metrics["accuracy"] - independent) <= 100.0 / len(task.target_eval) + 1e-9, \
        f"metrics.json accuracy {metrics['accuracy']}, the final model scores {independent} on the target"


def test_fp32_is_the_default_and_logging_only_reads_change_no_number(tmp_path):
    """The default (fp32) and an explicit precision=fp32 give the same run; reading every step's losses
    (log_every=1, the old behaviour) or every 5th step gives the same numbers at the common iterations."""
    base = dict(iterations=30, intra_start=5, anchor_period=10)
    a = train(small_cfg(**base), tmp_path / "a", task=shift_task(), progress=False)
    b = train(small_cfg(**base, precision="fp32", log_every=1), tmp_path / "b", task=shift_task(), progress=False)
    assert a["config"]["precision"] == "fp32"
    assert outcome(a) == outcome(b)
    rows_a, rows_b = log_rows(tmp_path / "a"), log_rows(tmp_path / "b")
    assert sorted(rows_a) == [0, 5, 10, 15, 20, 25, 29] and sorted(rows_b) == list(range(30))
    assert all(rows_a[i] == rows_b[i] for i in rows_a)


def test_fp32_image_run_is_identical_with_and_without_workers(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "img").mkdir()
    lines = []
    for i in range(18):
        Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(tmp_path / "img" / f"{i}.jpg")
        lines.append(f"img/{i}.jpg {i % 3}")
    (tmp_path / "l.txt").write_text("\n".join(lines) + "\n")
    tr = ImageListDataset(tmp_path, tmp_path / "l.txt", image_transforms(True, 36, 32))
    te = ImageListDataset(tmp_path, tmp_path / "l.txt", image_transforms(False, 36, 32))
    task = Task(tr, te, tr, te, ["a", "b", "c"], 3, None, "x")
    cfg = small_cfg(backbone="smallcnn", bottleneck_dims=[32, 16], batch_size=6, iterations=6, anchor_period=3,
                    intra_start=2, eval_batch_size=10, interpolation_per_class=4, log_every=2)
    runs = [train(dict(cfg, num_workers=w), tmp_path / f"w{w}", task=task, progress=False) for w in (0, 2)]
    assert runs[0]["data_workers"] == 0 and runs[1]["data_workers"] == 2
    assert outcome(runs[0]) == outcome(runs[1])
    assert (tmp_path / "w0" / "log.csv").read_text() == (tmp_path / "w2" / "log.csv").read_text()


@pytest.mark.parametrize("bad_at, checkpoint_every, read_at", [
    (7, 100, 10),   # read at the next logging iteration
    (7, 8, 7),      # read before the checkpoint after iteration 7: none is written
    (5, 100, 5),    # a logging iteration raises before its update, as before
])
def test_non_finite_loss_is_raised_and_never_checkpointed(tmp_path, monkeypatch, bad_at, checkpoint_every, read_at):
    real = dmp_method.dmp_losses

    def poisoned(cfg, it, *args):
        out = real(cfg, it, *args)
        if it == bad_at:
            out["align"] = out["align"] * float("nan")
        return out

    monkeypatch.setattr(dmp_method, "dmp_losses", poisoned)
    cfg = small_cfg(iterations=20, intra_start=0, log_every=5, checkpoint_every=checkpoint_every)
    with pytest.raises(FloatingPointError, match=f"iteration {bad_at}") as err:
        train(cfg, tmp_path, task=shift_task(), progress=False)
    if read_at != bad_at:
        assert f"read at iteration {read_at}" in str(err.value)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_num_workers_auto(monkeypatch, tmp_path):
    for cores, expect in ((1, 0), (2, 1), (4, 3), (64, 8)):
        monkeypatch.setattr("os.sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        assert resolve_workers("auto") == expect
    assert resolve_workers(3) == 3
    assert resolve(small_cfg())["num_workers"] == "auto"
    for bad in (-1, "many", 1.5):
        with pytest.raises(ConfigError, match="num_workers"):
            resolve(small_cfg(num_workers=bad))
    # data held in memory: no worker processes whatever the core count
    assert Trainer(resolve(small_cfg()), shift_task(), tmp_path).workers == 0


def test_wall_clock_times_per_epoch_and_batch(tmp_path):
    cfg = small_cfg(iterations=24, intra_start=0, anchor_period=8, checkpoint_every=10)
    assert train(cfg, tmp_path, task=shift_task(), progress=False, stop_after=10) is None
    m = train(cfg, tmp_path, task=shift_task(), progress=False)   # resumed: the wall time adds up
    per_epoch = m["iterations_per_epoch"]
    assert m["seconds_per_batch_wall"] > 0
    assert m["seconds_per_epoch_wall"] == pytest.approx(m["seconds_per_batch_wall"] * per_epoch)
    assert m["wall_seconds"] == pytest.approx(m["seconds_per_batch_wall"] * m["iterations"])
    assert m["wall_seconds"] >= 0.999 * (m["train_seconds"] + m["anchor_seconds"])
    assert m["seconds_per_epoch_wall"] >= 0.999 * m["seconds_per_epoch"]
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk["seconds_per_epoch_wall"] == m["seconds_per_epoch_wall"]


def test_nondeterministic_runs_let_cudnn_pick_kernels():
    before = torch.backends.cudnn.benchmark
    try:
        seed_everything(0, deterministic=False)
        assert torch.backends.cudnn.benchmark is True
    finally:
        torch.backends.cudnn.benchmark = before


def test_deterministic_cuda_runs_skip_the_memory_fill(monkeypatch):
    """On CUDA, deterministic runs switch on torch's deterministic algorithms but not its NaN fill of every new
    tensor (bit-identical runs without it on an H200: benchmarks/cuda_determinism.py); the CPU path switches
    neither."""
    import torch.utils.deterministic as det

    state = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             det.fill_uninitialized_memory, torch.backends.cudnn.benchmark)
    try:
        det.fill_uninitialized_memory = True
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # restored afterwards (seed_everything sets it)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        seed_everything(0, deterministic=True)
        assert det.fill_uninitialized_memory is True and torch.are_deterministic_algorithms_enabled() is state[0]
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        seed_everything(0, deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
        assert det.fill_uninitialized_memory is False
    finally:
        torch.use_deterministic_algorithms(state[0], warn_only=state[1])
        det.fill_uninitialized_memory = state[2]
        torch.backends.cudnn.benchmark = state[3]
