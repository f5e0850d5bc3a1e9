"""Trainer behaviour: config errors, determinism, exact resumption, and DMP beating source-only on a
synthetic domain shift."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from dmp.config import ConfigError, parse_overrides, resolve
from dmp.train import train
from synthetic import shift_task, small_cfg
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]


def outcome(m):
    return (m["accuracy"], m["confusion_matrix"], m["class_weights"], m["interpolation"])


@pytest.mark.parametrize("override, key", [
    ({"metric": "XG"}, "metric"),
    ({"lambda1": -1.0}, "lambda1"),
    ({"method": "dmpp"}, "method"),
    ({"batch_size": 1}, "batch_size"),
    ({"intra_start": "soon"}, "intra_start"),
    ({"lamda2": 3}, "lamda2"),
])
def test_bad_configs_name_the_key(override, key):
    with pytest.raises(ConfigError, match=key):
        resolve(small_cfg(**override))


def test_k_larger_than_class_count_fails_before_training(tmp_path):
    with pytest.raises(ConfigError, match="'k'"):
        train(small_cfg(k=9), tmp_path, task=shift_task(), progress=False)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_overrides_are_yaml_and_presets_apply():
    over = parse_overrides(["lambda2=5e3", "bottleneck_dims=[64,32]", "pretrained=false"])
    assert over == {"lambda2": 5000.0, "bottleneck_dims": [64, 32], "pretrained": False}
    cfg = resolve({"dataset": "visda2017", "source": "train", "target": "validation", "setting": "partial"})
    assert (cfg["optimizer"], cfg["lr"], cfg["batch_size"], cfg["backbone"], cfg["lambda2"]) == \
        ("sgd", 3e-3, 32, "resnet50", 1.0)
    assert cfg["target_split"] == "partial"
    cfg = resolve({"dataset": "office31", "source": "amazon", "target": "webcam", "lambda2": 7})
    assert (cfg["optimizer"], cfg["lr"], cfg["batch_size"], cfg["lambda2"]) == ("adam", 2e-4, 50, 7.0)


@pytest.mark.parametrize("method, metric, mode, setting", [
    ("dmp", "G", "full_pass", "vanilla"),
    ("dmp_ent", "LE", "accumulate", "partial"),
])
def test_resumed_run_equals_uninterrupted_run(tmp_path, method, metric, mode, setting):
    cfg = small_cfg(method=method, metric=metric, anchor_mode=mode, setting=setting, anchor_period=25,
                    intra_start=30, iterations=90, checkpoint_every=1000)
    part = 3 if setting == "partial" else None
    full = train(cfg, tmp_path / "a", task=shift_task(target_classes=part), progress=False)
    assert train(cfg, tmp_path / "b", task=shift_task(target_classes=part), progress=False, stop_after=37) is None
    assert not (tmp_path / "b" / "metrics.json").exists()
    # interrupted a second time: the checkpoint then holds two launches' provenance, this launch one of its own
    assert train(cfg, tmp_path / "b", task=shift_task(target_classes=part), progress=False, stop_after=61) is None
    resumed = train(cfg, tmp_path / "b", task=shift_task(target_classes=part), progress=False)
    assert outcome(resumed) == outcome(full)
    assert [p["from_iteration"] for p in resumed["provenance"]] == [0, 37, 61]
    log_a = (tmp_path / "a" / "log.csv").read_text()
    assert log_a == (tmp_path / "b" / "log.csv").read_text()
    assert len(log_a.splitlines()) == 1 + 90 // 5 + 1  # header, every 5th iteration, the last one


def test_killed_process_resumes_to_the_same_numbers(tmp_path):
    """SIGKILL a training process after its first checkpoint, rerun the same command, compare. The killed run
    stalls after its 3rd checkpoint (``stall``), so the kill lands between its first checkpoint and that one,
    whatever the machine's load, and never after the run has finished."""
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, time; sys.path[:0] = [%r, %r]\n"
        "from synthetic import shift_task, small_cfg\nfrom dmp.train import Trainer, train\n"
        "if sys.argv[2:] == ['stall']:\n"
        "    save, saved = Trainer.save_checkpoint, []\n"
        "    def stall(self, rows):\n"
        "        save(self, rows)\n"
        "        saved.append(self.iteration)\n"
        "        while len(saved) >= 3:  # until killed\n"
        "            time.sleep(1)\n"
        "    Trainer.save_checkpoint = stall\n"
        "train(small_cfg(iterations=400, checkpoint_every=20, intra_start=50), sys.argv[1], task=shift_task(),"
        " progress=False)\n" % (str(ROOT), str(ROOT / "tests")))
    ref = tmp_path / "ref"
    hang_guard.run([sys.executable, script, ref], check=True, quiet=1200)
    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, script, run, "stall"])
    try:
        deadline = time.monotonic() + 300  # only against a hang: the assertion below names it
        while not (run / "checkpoint.pt").exists() and time.monotonic() < deadline:
            assert proc.poll() is None, "the run ended before its first checkpoint"
            time.sleep(0.05)
        assert (run / "checkpoint.pt").exists(), "no checkpoint within 300 s"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
    assert not (run / "metrics.json").exists()
    leftovers = [p.name for p in run.iterdir() if ".tmp" in p.name]  # atomic writes: .NAME.XXXX.tmp.EXT
    hang_guard.run([sys.executable, script, run], check=True, quiet=1200)
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (ref, run))
    assert outcome(a) == outcome(b)
    assert (ref / "log.csv").read_text() == (run / "log.csv").read_text()
    model_a, model_b = (torch.load(d / "checkpoint.pt", weights_only=True)["model"] for d in (ref, run))
    assert model_a.keys() == model_b.keys() and all(torch.equal(model_a[k], model_b[k]) for k in model_a)
    assert leftovers == [] or all(not (run / n).exists() for n in leftovers)
    assert not [p.name for p in run.iterdir() if ".tmp" in p.name]


def test_same_seed_same_numbers_other_seed_differs(tmp_path):
    cfg = small_cfg(iterations=60, intra_start=20)
    a = train(cfg, tmp_path / "a", task=shift_task(), progress=False)
    b = train(cfg, tmp_path / "b", task=shift_task(), progress=False)
    c = train(dict(cfg, seed=1), tmp_path / "c", task=shift_task(), progress=False)
    assert outcome(a) == outcome(b)
    assert (tmp_path / "a" / "log.csv").read_text() != (tmp_path / "c" / "log.csv").read_text()


def test_metrics_file_is_complete_and_traceable(tmp_path):
    m = train(small_cfg(iterations=20, intra_start=5), tmp_path, task=shift_task(), progress=False)
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk["status"] == "complete"
    for key in ("accuracy", "mean_class_accuracy", "per_class_accuracy", "confusion_matrix", "class_weights",
                "seconds_per_iter", "seed", "config", "git_commit", "dataset_version", "packages",
                "code_version", "interpolation"):
        assert key in on_disk, key
    cm = np.array(on_disk["confusion_matrix"])
    assert cm.sum() == len(shift_task().target_eval)
    per_class = on_disk["per_class_accuracy"]
    assert per_class == pytest.approx({name: 100 * cm[i, i] / cm[i].sum()
                                       for i, name in enumerate(on_disk["class_names"]) if cm[i].sum()})
    assert on_disk["mean_class_accuracy"] == pytest.approx(np.mean(list(per_class.values())))
    assert on_disk["accuracy"] == pytest.approx(100 * np.trace(cm) / cm.sum())
    assert on_disk["config"]["method"] == "dmp" and m["iterations"] == 20
    assert on_disk["weights_sha256"] is None  # no weights file: nothing pre-trained to identify
    assert set(on_disk["interpolation"]) == {"0", "0.1", "0.3", "0.5"}
    # the kind of CPU it ran on: its kernels decide the rounding, so a bit-for-bit rerun needs the same kind
    assert on_disk["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability()
    assert isinstance(on_disk["cpu"]["model"], str) and on_disk["cpu"]["model"]


def test_changed_config_refuses_to_resume(tmp_path):
    train(small_cfg(iterations=40), tmp_path, task=shift_task(), progress=False, stop_after=20)
    with pytest.raises(ConfigError, match="lambda1"):
        train(small_cfg(iterations=40, lambda1=1.0), tmp_path, task=shift_task(), progress=False)


def test_dmp_beats_source_only_on_a_synthetic_shift(tmp_path):
    """A smoke test (a statistical margin passes under many wrong implementations): the wiring, the anchors and
    the metrics are checked against independent computations in test_wiring.py, test_anchors_independent.py and
    test_metrics_unbalanced.py."""
    accs = {m: [] for m in ("source_only", "dmp")}
    for seed in range(3):
        for m in accs:
            r = train(small_cfg(method=m, seed=seed, iterations=300, intra_start=100), tmp_path / f"{m}{seed}",
                      task=shift_task(seed), progress=False)
            accs[m].append(r["accuracy"])
    assert np.mean(accs["dmp"]) > np.mean(accs["source_only"]) + 5, accs


@pytest.mark.parametrize("metric", ["G", "AG", "LE"])
def test_tiny_and_one_class_batches_train_without_nan(tmp_path, metric):
    """Batch size 2 and a one-class target: every loss and parameter stays finite (the trainer raises on a
    non-finite loss)."""
    cfg = small_cfg(metric=metric, batch_size=2, iterations=12, intra_start=0, setting="partial",
                    anchor_period=4, method="dmp_ent")
    train(cfg, tmp_path, task=shift_task(target_classes=1), progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


def test_source_only_bn_changes_only_batchnorm_statistics(tmp_path):
    """source_only_bn forwards each target batch without a loss: the learned weights are bit-identical to
    source_only's, only the BatchNorm running statistics move towards the target domain's."""
    runs = {}
    for method in ("source_only", "source_only_bn"):
        train(small_cfg(method=method, iterations=40), tmp_path / method, task=shift_task(), progress=False)
        runs[method] = torch.load(tmp_path / method / "checkpoint.pt", weights_only=True)["model"]
    plain, bn = runs["source_only"], runs["source_only_bn"]
    stats = [k for k in plain if k.endswith(("running_mean", "running_var", "num_batches_tracked"))]
    assert stats and all(torch.equal(plain[k], bn[k]) for k in plain if k not in stats)
    mean = stats[0].rsplit(".", 1)[0] + ".running_mean"
    assert not torch.equal(plain[mean], bn[mean])
    count = mean.replace("running_mean", "num_batches_tracked")
    assert int(bn[count]) == 2 * int(plain[count]) == 2 * 40  # one source and one target batch per iteration


@pytest.mark.parametrize("mode", ["full_pass", "accumulate"])
def test_discriminative_terms_act_after_the_first_anchor_refresh(tmp_path, mode):
    """Both anchor modes give the losses anchors: from iteration 0 (full pass) or from the first refresh
    (accumulate, means of the training batches of the first period), the inter- and intra-class terms are
    non-zero in log.csv; before it (accumulate) they are zero."""
    import csv
    cfg = small_cfg(method="dmp_no_al", anchor_mode=mode, anchor_period=10, intra_start=0, iterations=30,
                    log_every=1)
    train(cfg, tmp_path, task=shift_task(), progress=False)
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    first = 0 if mode == "full_pass" else 10
    assert all(float(r["inter"]) == 0 and float(r["intra"]) == 0 for r in rows[:first])
    assert all(float(r["inter"]) != 0 and float(r["intra"]) != 0 for r in rows[first:])


def test_log_keeps_the_header_it_was_started_with(tmp_path):
    """log.csv holds ``iteration, lr, loss, ce`` and the method's terms; a file written with other columns (a run
    started before, e.g. source-only with DMP's four zero columns) keeps its header when cut back and appended to,
    and a file cut to nothing takes the new run's header."""
    from dmp.train.trainer import _append_log, _truncate_log, log_fields

    assert log_fields("source_only") == ["iteration", "lr", "loss", "ce"]
    assert log_fields("dmp") == ["iteration", "lr", "loss", "ce", "inter", "intra", "align", "entropy"]
    path = tmp_path / "log.csv"
    old = "iteration,lr,loss,ce,inter,intra,align,entropy\n" + "".join(
        f"{i},0.001,{1 + i},{1 + i},0.0,0.0,0.0,0.0\n" for i in range(4))
    path.write_text(old)
    _truncate_log(path, 2)
    _append_log(path, [{"iteration": 2, "lr": 0.001, "loss": 9.0, "ce": 9.0}], log_fields("source_only"))
    assert path.read_text().splitlines() == old.splitlines()[:3] + ["2,0.001,9.0,9.0,0.0,0.0,0.0,0.0"]
    _truncate_log(path, 0)
    _append_log(path, [{"iteration": 0, "lr": 0.001, "loss": 1.0, "ce": 1.0}], log_fields("source_only"))
    assert path.read_text().splitlines() == ["iteration,lr,loss,ce", "0,0.001,1.0,1.0"]
