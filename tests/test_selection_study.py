"""studies/office31/selection.py: the last iterate beside the best logged one, on hand-written run records whose
answers are known (the best is not the last, ties keep the first, a run without a log is left out)."""
from __future__ import annotations

import json

import pandas as pd

from studies.office31.selection import logged_runs, selection_table

TASKS = ["A->W", "D->W"]


def _record(root, task, method, seed, last, log):
    src, tgt = {"A": "amazon", "D": "dslr", "W": "webcam"}[task[0]], {"W": "webcam", "A": "amazon"}[task[-1]]
    folder = root / "runs" / "ds" / "partial" / task.replace("->", "-") / method / "G" / "full-partial" / f"seed{seed}"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({
        "status": "complete", "accuracy": last, "git_commit": "0" * 40, "dataset_version": "v",
        "config": {"dataset": "ds", "method": method, "seed": seed, "source": src, "target": tgt},
        "accuracy_log": [{"iteration": 50 * i, "epoch": float(i), "accuracy": a} for i, a in enumerate(log)]}))


def test_the_best_logged_iterate_beside_the_last_and_the_paper(tmp_path):
    _record(tmp_path, "A->W", "dann", 0, 56.0, [2.0, 86.0, 86.0, 70.0, 56.0])   # best 86 first logged at epoch 1
    _record(tmp_path, "A->W", "dann", 1, 60.0, [3.0, 80.0, 60.0])
    _record(tmp_path, "D->W", "dann", 0, 94.0, [4.0, 96.0, 94.0])
    _record(tmp_path, "D->W", "pada", 0, 98.0, [4.0, 97.0])                     # 2 entries < MIN_LOGGED: left out
    _record(tmp_path, "A->W", "source_only", 0, 76.0, [])
    runs = logged_runs(tmp_path, "ds", "partial")
    assert sorted(runs["method"]) == ["dann", "dann", "dann"]
    first = runs[(runs["task"] == "A->W") & (runs["seed"] == 0)].iloc[0]
    assert (first["last"], first["best"], first["best_epoch"]) == (56.0, 86.0, 1.0)

    paper = pd.DataFrame([{"row": "dann", "column": c, "paper": v} for c, v in
                          (("A->W", 73.6), ("D->W", 96.3), ("Mean", 84.95))])
    lines = selection_table(runs, paper, "partial", TASKS)
    last, best, theirs = lines[2:]
    # A->W: seeds 0 and 1, last (56 + 60) / 2 = 58.0, best (86 + 80) / 2 = 83.0; D->W: 94 and 96; Avg over tasks
    assert last == "| DANN, last iterate (reported) | 58.0 | 94.0 | 76.0 |  |"
    assert best == "| DANN, best logged iterate (target labels) | 83.0 | 96.0 | 89.5 | 1.0 |"
    assert theirs == "| DANN, paper (reported) | 73.6 | 96.3 | 85.0 | |"


def test_a_method_without_every_task_gives_no_row(tmp_path):
    _record(tmp_path, "A->W", "dann", 0, 56.0, [2.0, 86.0, 56.0])
    runs = logged_runs(tmp_path, "ds", "partial")
    assert selection_table(runs, pd.DataFrame(columns=["row", "column", "paper"]), "partial", TASKS) == []


def test_the_share_predicted_as_an_absent_class_counts_the_columns_of_the_empty_rows():
    from studies.office31.absent import absent_share

    # 4 classes, the target has classes 0 and 2 (rows 1 and 3 empty); of its 10 images, 3 are predicted as 1 or 3
    confusion = [[4, 1, 0, 0],
                 [0, 0, 0, 0],
                 [1, 0, 2, 2],
                 [0, 0, 0, 0]]
    assert absent_share(confusion) == 30.0
    assert absent_share([[5, 0], [1, 4]]) == 0.0  # every class present: nothing is absent
