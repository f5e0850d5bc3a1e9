"""The stacked run loop (dmp/train/stacked_loop.py, ``dmp train --seeds``): K seeds trained by one batched step
end with the run folders the runs write alone (log.csv, metrics.json; within the step's tolerance,
tests/test_stacked.py),
resume from their checkpoints (a lagging one catching up alone), and a run that diverges ends alone while the others
finish."""
import json

import pytest
import torch

from dmp.config import resolve
from dmp.metrics import read_metrics
from dmp.train import Trainer, train, train_stacked
from dmp.train.stacked_loop import run_stacked
from synthetic import shift_task, small_cfg

SEEDS = [0, 1, 2]
# manifold_bn off: no Linear bias feeds a BatchNorm, so every weight follows its own gradient and the stacked runs
# stay within round-off of the runs alone over the whole run (with it, Adam moves those biases by about lr per step
# in directions round-off picks: tests/test_stacked.py), and their predictions are the same.
OVER = dict(method="dmp", manifold_bn=False, lr=5e-3, bottleneck_dims=[32, 16], batch_size=8, iterations=24,
            log_every=4, checkpoint_every=8,
            intra_start=0, inter_start=0, log_accuracy_every=8, interpolation_per_class=4)


def _log(folder):
    lines = (folder / "log.csv").read_text().splitlines()
    return lines[0].split(","), [[float(v) for v in line.split(",")] for line in lines[1:]]


def _same_run(alone, stacked, rel=1e-4):
    """The same log rows (iterations and lr exactly, values within ``rel``) and the same evaluation."""
    head_a, rows_a = _log(alone)
    head_s, rows_s = _log(stacked)
    assert head_a == head_s
    assert [r[:2] for r in rows_a] == [r[:2] for r in rows_s]  # iteration, lr
    for ra, rs in zip(rows_a, rows_s):
        assert rs == pytest.approx(ra, rel=rel, abs=1e-6)
    ma, ms = (json.loads((f / "metrics.json").read_text()) for f in (alone, stacked))
    assert ms["iterations"] == ma["iterations"] == OVER["iterations"]
    assert ms["accuracy"] == pytest.approx(ma["accuracy"], abs=1e-9)
    assert ms["target_mean_prediction"] == pytest.approx(ma["target_mean_prediction"], rel=1e-5, abs=1e-7)
    assert [r["iteration"] for r in ms["accuracy_log"]] == [r["iteration"] for r in ma["accuracy_log"]]


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    root = tmp_path_factory.mktemp("alone")
    for s in SEEDS:
        train(small_cfg(seed=s, **OVER), root / f"seed{s}", task=shift_task(), progress=False)
    return root


def test_stacked_seeds_write_the_run_folders_of_the_runs_alone(tmp_path, alone):
    results = train_stacked(small_cfg(**OVER), SEEDS, str(tmp_path / "seed{seed}"), task=shift_task(),
                            progress=False)
    assert [r["seed"] for r in results] == SEEDS
    for s in SEEDS:
        _same_run(alone / f"seed{s}", tmp_path / f"seed{s}")
        record = json.loads((tmp_path / f"seed{s}" / "metrics.json").read_text())
        assert record["provenance"][-1]["stacked_with"] == SEEDS
        assert record["provenance"][-1]["stacked_from"] == 0
    # finished runs are not trained again
    again = train_stacked(small_cfg(**OVER), SEEDS, str(tmp_path / "seed{seed}"), task=shift_task(), progress=False)
    assert [r["accuracy"] for r in again] == [r["accuracy"] for r in results]


def test_a_resumed_stacked_run_with_a_lagging_member_ends_as_the_runs_alone(tmp_path, alone):
    """Seeds 1 and 2 stopped stacked at iteration 16, seed 0 alone at 8: seed 0 catches up alone to 16, then all
    three go on stacked from there."""
    cfgs = {s: resolve(small_cfg(seed=s, **OVER)) for s in SEEDS}
    Trainer(cfgs[0], shift_task(), tmp_path / "seed0", progress=False).run(stop_after=8)
    run_stacked([Trainer(cfgs[s], shift_task(), tmp_path / f"seed{s}", progress=False) for s in (1, 2)],
                stop_after=16, progress=False)
    assert not (tmp_path / "seed1" / "metrics.json").exists()
    train_stacked(small_cfg(**OVER), SEEDS, str(tmp_path / "seed{seed}"), task=shift_task(), progress=False)
    for s in SEEDS:
        _same_run(alone / f"seed{s}", tmp_path / f"seed{s}")
        assert json.loads((tmp_path / f"seed{s}" / "metrics.json").read_text())["provenance"][-1]["stacked_from"] == 16


@pytest.mark.parametrize("broken", [[1], SEEDS])
def test_a_diverged_run_ends_alone_and_the_others_finish(tmp_path, alone, broken):
    """A NaN weight in a run: its loss is non-finite from the first step, so it ends with no checkpoint and no
    record; the others, re-stacked without it, end as alone; the loop names the diverged seeds."""
    cfgs = {s: resolve(small_cfg(seed=s, **OVER)) for s in SEEDS}
    trainers = [Trainer(cfgs[s], shift_task(), tmp_path / f"seed{s}", progress=False) for s in SEEDS]
    with torch.no_grad():
        for s in broken:
            trainers[s].model.classifier.weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=", ".join(rf"{s} \(iteration 0\)" for s in broken)):
        run_stacked(trainers, progress=False)
    for s in SEEDS:
        if s in broken:
            assert not (tmp_path / f"seed{s}" / "metrics.json").exists()
            assert not (tmp_path / f"seed{s}" / "checkpoint.pt").exists()
        else:
            _same_run(alone / f"seed{s}", tmp_path / f"seed{s}")


def test_the_time_table_never_reads_a_stacked_runs_seconds(tmp_path):
    """A stacked run's seconds are the shared step's: refused where a table reads a time, read for an accuracy."""
    record = tmp_path / "metrics.json"
    metrics = {"status": "complete", "accuracy": 90.0, "mean_class_accuracy": 90.0, "seconds_per_epoch": 2.0,
               "config": {"seed": 0}, "provenance": [{"git_commit": "x", "stacked_with": [0, 1], "stacked_from": 0}]}
    record.write_text(json.dumps(metrics))
    got, why = read_metrics(record, {"seed": 0}, [("seconds_per_epoch",)])
    assert got is None and "stacked" in why
    got, why = read_metrics(record, {"seed": 0}, [("accuracy",)])
    assert why is None and got["accuracy"] == 90.0


@pytest.mark.parametrize("argv, says", [
    (["--seeds", "0,1", "--out", "{tmp}/x"], "put {seed} in it"),
    (["--seeds", "0,0", "--out", "{tmp}/s{seed}"], "a seed given twice"),
    (["--seeds", "0,1", "--out", "{tmp}/s{seed}", "seed=3"], "'seed' and --seeds"),
    (["--seeds", "0,1", "--out", "{tmp}/s{seed}", "method=dann", "dataset=office31", "source=A", "target=W"],
     "not stackable"),
])
def test_train_seeds_bad_input_is_one_line(tmp_path, capsys, argv, says):
    from dmp.cli import main
    argv = ["train"] + [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and says in err, err
    assert not any(tmp_path.iterdir())  # no folder left behind
