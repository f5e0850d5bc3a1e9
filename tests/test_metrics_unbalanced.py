"""Metrics on unbalanced labels: overall accuracy vs the mean of the per-class accuracies, and
the confusion matrix's orientation (rows = true class), against a case computed by hand and against an independent
evaluation of a trained model on the target evaluation split."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dmp.config import resolve
from dmp.train.evaluate import classification_report
from dmp.train.trainer import Trainer
from unbalanced import tiny_cfg, unbalanced_task


def test_classification_report_by_hand_on_unbalanced_labels():
    # true:  class 0 x6, class 1 x3, class 2 x1; class 3 never true but predicted once
    labels = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 2])
    pred = np.array([0, 0, 0, 0, 0, 1, 2, 2, 1, 3])
    r = classification_report(pred, labels, ["a", "b", "c", "d"])
    # rows = true class, columns = predicted class
    assert r["confusion_matrix"] == [[5, 1, 0, 0],
                                     [0, 1, 2, 0],
                                     [0, 0, 0, 1],
                                     [0, 0, 0, 0]], "confusion matrix is not rows = true class, columns = predicted"
    assert r["accuracy"] == pytest.approx(60.0), "overall accuracy: 6 of 10 right"
    # per class: a 5/6, b 1/3, c 0/1; d is never a true class: left out of the mean
    assert r["per_class_accuracy"] == pytest.approx({"a": 500 / 6, "b": 100 / 3, "c": 0.0}), \
        f"per-class accuracy {r['per_class_accuracy']}: the share of each true class (row) predicted right, for " \
        f"the classes that occur"
    assert r["mean_class_accuracy"] == pytest.approx((500 / 6 + 100 / 3 + 0.0) / 3), \
        "mean class accuracy is the mean of the per-class accuracies of the classes present (not the overall " \
        "accuracy, not a mean over all c classes)"


def test_run_metrics_equal_an_independent_evaluation_of_the_final_model(tmp_path):
    """metrics.json of a run on an unbalanced target: accuracy, per-class accuracies, their mean and the confusion
    matrix equal what this test computes (loops) from the trained model's argmax on the target evaluation split."""
    task = unbalanced_task(eval_counts=((5, 5, 5, 5), (3, 12, 7, 2)))
    t = Trainer(resolve(tiny_cfg(iterations=6)), task, tmp_path, progress=False)
    m = t.run()
    t.model.eval()
    with torch.no_grad():
        pred = t.model(task.target_eval.x)[1].argmax(1).tolist()
    true = task.target_eval.labels.tolist()
    cm = [[0] * 4 for _ in range(4)]
    for y, p in zip(true, pred):
        cm[y][p] += 1
    assert m["confusion_matrix"] == cm, \
        f"confusion matrix {m['confusion_matrix']} is not the target evaluation split's (rows = true) {cm}"
    acc = 100.0 * sum(y == p for y, p in zip(true, pred)) / len(true)
    assert m["accuracy"] == pytest.approx(acc), f"accuracy {m['accuracy']} != {acc} on the target evaluation split"
    per = {f"class{k}": 100.0 * cm[k][k] / sum(cm[k]) for k in range(4)}
    assert m["per_class_accuracy"] == pytest.approx(per), f"per-class accuracy {m['per_class_accuracy']} != {per}"
    assert m["mean_class_accuracy"] == pytest.approx(sum(per.values()) / 4), "mean class accuracy is not the mean " \
        "of the per-class accuracies"
    assert m["mean_class_accuracy"] != pytest.approx(m["accuracy"]), "balanced-looking result: no check here"
    with torch.no_grad():
        probs = torch.softmax(t.model(task.target_eval.x)[1], 1).mean(0)
    assert m["target_mean_prediction"] == pytest.approx(probs.tolist(), rel=1e-5, abs=1e-7), \
        "target_mean_prediction is not the mean softmax of the final model over the target evaluation split"
