"""The training schedule (dmp/train/schedule.py) and ``python -m dmp config --schedule``.

(a) the CLI prints the schedule of Office-31 A->W as JSON, checked against numbers computed by hand;
(b) every paper preset (Office-31, Office-Home, ImageCLEF-DA c/i/p, VisDA-2017; vanilla and partial; every task;
    every method but the source-only ones; the ImageCLEF sample-size source splits n10/n30/n50; both anchor modes) switches
    the intra-class term on before half of training and refreshes the anchors at least 10 times;
(c) ``iterations=`` overrides ``epochs`` and ``epoch_iterations`` fixes the epoch length.
"""
from __future__ import annotations

import itertools
import json
import math

import pytest

from dmp.cli import main
from dmp import methods
from dmp.config import SETTINGS, resolve
from dmp.data.registry import get_dataset
from dmp.data.splits import split_size
from dmp.train.schedule import schedule

SCHEDULE_KEYS = {"iterations", "iterations_per_epoch", "epochs", "intra_start_iteration", "inter_start_iteration",
                 "anchor_period", "anchor_refreshes", "source_samples"}


def run_schedule_cli(capsys, *overrides) -> dict:
    with pytest.raises(SystemExit) as exc:
        main(["config", "--schedule", *overrides])
    assert exc.value.code == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------------------------------- (a)
def test_cli_schedule_of_office31_a_to_w_by_hand(capsys):
    out = run_schedule_cli(capsys, "dataset=office31", "source=amazon", "target=webcam")
    assert set(out) == SCHEDULE_KEYS
    # Amazon has 2817 images; batch 50 -> ceil(2817 / 50) = 57 iterations per epoch; 40 epochs -> 2280
    # iterations; intra-class term after 15 epochs -> 15 * 57 = 855; inter-class term from the start;
    # anchors every epoch (57 iterations), computed at 0, 57, ..., 39 * 57 -> 40 refreshes.
    assert out == {"iterations": 2280, "iterations_per_epoch": 57, "epochs": 40.0,
                   "intra_start_iteration": 855, "inter_start_iteration": 0, "anchor_period": 57,
                   "anchor_refreshes": 40, "source_samples": 2817}


def test_cli_schedule_accumulate_mode_and_paper_letters(capsys):
    out = run_schedule_cli(capsys, "dataset=office31", "source=A", "target=W", "anchor_mode=accumulate")
    # accumulation windows close at 57, 114, ..., 39 * 57 (the window ending at 2280 closes after training)
    assert out["anchor_refreshes"] == 39
    assert out["source_samples"] == 2817 and out["iterations"] == 2280


# ---------------------------------------------------------------------------------------------------- (b)
PAPER_DATASETS = ("office31", "officehome", "imageclef", "visda2017")
PAPER_DOMAINS = {"imageclef": ("c", "i", "p")}  # the paper uses C, I, P of ImageCLEF-DA (not B)
TRAINED_METHODS = tuple(m for m in methods.names() if methods.get(m).anchors)  # the methods with anchors
NO_REFRESH = tuple(m for m in methods.names() if not methods.get(m).needs(resolve(dict(
    dataset="office31", source="amazon", target="webcam", method=m))).refreshes)
ANCHOR_MODES = ("full_pass", "accumulate")


def paper_grid():
    """``(user config, label)`` for every run of the paper presets, for both anchor modes."""
    for dataset in PAPER_DATASETS:
        domains = PAPER_DOMAINS.get(dataset) or tuple(d.name for d in get_dataset(dataset).domains)
        source_splits = ("full", "n10", "n30", "n50") if dataset == "imageclef" else ("full",)
        for setting, (source, target), method, split, mode in itertools.product(
                SETTINGS, itertools.permutations(domains, 2), TRAINED_METHODS, source_splits, ANCHOR_MODES):
            yield (dict(dataset=dataset, source=source, target=target, setting=setting, method=method,
                        source_split=split, anchor_mode=mode),
                   f"{dataset} {setting} {source}->{target} {method} {split} {mode}")


def test_the_grid_covers_every_paper_task():
    runs = list(paper_grid())
    tasks = {(u["dataset"], u["source"], u["target"]) for u, _ in runs}
    assert len([t for t in tasks if t[0] == "office31"]) == 6
    assert len([t for t in tasks if t[0] == "officehome"]) == 12
    assert {(s, t) for d, s, t in tasks if d == "imageclef"} == set(itertools.permutations("cip", 2))
    assert {(s, t) for d, s, t in tasks if d == "visda2017"} >= {("synthetic", "real")}
    assert {u["source_split"] for u, _ in runs if u["dataset"] == "imageclef"} == {"full", "n10", "n30", "n50"}
    assert {u["method"] for u, _ in runs} >= {"dmp", "dmp_no_al", "dmp_no_ds", "dmp_ent"}


def test_every_paper_preset_warms_up_before_half_of_training_and_refreshes_anchors_often():
    bad = []
    for user, label in paper_grid():
        cfg = resolve(user)
        n_source = split_size(get_dataset(cfg["dataset"]), cfg["source"], cfg["source_split"])
        sched = schedule(cfg, n_source)
        if not sched["intra_start_iteration"] < sched["iterations"] / 2:
            bad.append(f"{label}: intra-class term starts at {sched['intra_start_iteration']} of "
                       f"{sched['iterations']} iterations")
        if not sched["anchor_refreshes"] >= 10:
            bad.append(f"{label}: only {sched['anchor_refreshes']} anchor refreshes")
    assert not bad, "\n".join(bad[:20]) + (f"\n... ({len(bad)} in all)" if len(bad) > 20 else "")


def test_sample_size_splits_are_k_images_per_class_without_data():
    for k in (10, 30, 50):
        assert split_size(get_dataset("imageclef"), "i", f"n{k}") == 12 * k
    # n10 on ImageCLEF: 120 source images, batch 50 -> 3 iterations per epoch, 120 iterations in all
    sched = schedule(resolve(dict(dataset="imageclef", source="i", target="p", source_split="n10")), 120)
    assert (sched["iterations_per_epoch"], sched["iterations"], sched["intra_start_iteration"]) == (3, 120, 45)


# ---------------------------------------------------------------------------------------------------- (c)
def test_iterations_override_epochs(capsys):
    out = run_schedule_cli(capsys, "dataset=office31", "source=amazon", "target=webcam", "iterations=500")
    assert out["iterations"] == 500
    assert out["iterations_per_epoch"] == 57  # the epoch is still one pass over the source
    assert out["epochs"] == pytest.approx(500 / 57)
    assert out["intra_start_iteration"] == 855  # warm-ups stay in epochs (here: after the end of training)
    assert out["anchor_refreshes"] == math.ceil(500 / 57)


def test_epoch_iterations_fixes_the_epoch_length(capsys):
    out = run_schedule_cli(capsys, "dataset=office31", "source=amazon", "target=webcam", "epoch_iterations=20",
                           "epochs=10", "intra_start=2.5ep", "anchor_period=0.5ep", "inter_start=1ep")
    assert out["iterations_per_epoch"] == 20  # not ceil(2817 / 50) = 57
    assert out["iterations"] == 200 and out["epochs"] == 10.0
    assert (out["intra_start_iteration"], out["inter_start_iteration"]) == (50, 20)
    assert out["anchor_period"] == 10 and out["anchor_refreshes"] == 20


def test_iteration_counts_are_taken_as_is():
    cfg = resolve(dict(dataset="office31", source="amazon", target="webcam", intra_start=100, anchor_period=7))
    sched = schedule(cfg, 2817)
    assert (sched["intra_start_iteration"], sched["anchor_period"]) == (100, 7)
    assert sched["anchor_refreshes"] == math.ceil(2280 / 7)


@pytest.mark.parametrize("method", NO_REFRESH)
def test_source_only_has_no_anchor_refreshes(method):
    cfg = resolve(dict(dataset="office31", source="amazon", target="webcam", method=method))
    assert schedule(cfg, 2817)["anchor_refreshes"] == 0
