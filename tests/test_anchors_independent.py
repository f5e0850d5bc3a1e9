"""The anchors after a refresh equal what this test computes from the model's own outputs on the right split, with
unbalanced classes: per layer the source class means and the source mean (the mean over all
source samples, not the mean of the class means), the partial setting's mean target prediction and the class
weights made from it; a full pass (BatchNorm in eval mode, or batch mode without BatchNorm, where a sample's
features do not depend on its batch) and accumulation windows (the means of that window's training batches
only)."""
from __future__ import annotations

import copy

import pytest
import torch

from dmp.config import resolve
from dmp.train.trainer import Trainer
from unbalanced import RowIndex, record_forwards, tiny_cfg, unbalanced_task

EVAL_COUNTS = ((11, 4, 7, 2), (3, 9, 2, 6))  # separate evaluation splits, themselves unbalanced


def class_means_by_hand(feats, labels, c):
    """Per-class means (a loop, float64) and the mean over every sample."""
    feats = feats.double()
    means = torch.zeros(c, feats.shape[1], dtype=torch.float64)
    for k in range(c):
        rows = [i for i in range(len(labels)) if int(labels[i]) == k]
        if rows:
            means[k] = sum(feats[i] for i in rows) / len(rows)
    return means, feats.sum(0) / len(feats)


@torch.no_grad()
def outputs(model, x):
    model.eval()
    feats, logits = model(x)
    model.train()
    return feats, logits


@torch.no_grad()
def batch_outputs(model, x):
    """The model on one batch with BatchNorm normalising by that batch's statistics (a copy, so that the running
    statistics of the model stay as they are)."""
    twin = copy.deepcopy(model)
    twin.train()
    return twin(x)


def check_anchors(t, layer_means, overall, label):
    a = t.anchors
    assert a.ready, f"{label}: no anchors after the refresh"
    for layer, (want, want_mean) in enumerate(zip(layer_means, overall)):
        got = a.class_means[layer].cpu().double()
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), \
            f"{label}, layer {layer}: source class means differ from the model's features averaged per class " \
            f"(max error {(got - want).abs().max():.3g})"
        got = a.means[layer].cpu().double()
        assert torch.allclose(got, want_mean, rtol=1e-5, atol=1e-6), \
            f"{label}, layer {layer}: the source mean is not the mean over all source samples (max error " \
            f"{(got - want_mean).abs().max():.3g}; the mean of the class means would differ by " \
            f"{(layer_means[layer].mean(0) - want_mean).abs().max():.3g})"


@pytest.mark.parametrize("setting, anchor_bn, manifold_bn", [
    ("vanilla", "eval", True),
    ("partial", "eval", True),
    ("partial", "batch", False),
    ("partial", "batch", True),    # evaluation splits of at most one batch: the batch statistics are the split's
])
def test_full_pass_anchors_are_the_model_outputs_on_the_evaluation_splits(tmp_path, setting, anchor_bn,
                                                                          manifold_bn):
    one_batch = anchor_bn == "batch" and manifold_bn
    task = unbalanced_task(eval_counts=((6, 4, 3, 2), (2, 5, 4, 3)) if one_batch else EVAL_COUNTS)
    cfg = resolve(tiny_cfg(setting=setting, anchor_bn=anchor_bn, manifold_bn=manifold_bn, iterations=10))
    assert not one_batch or max(len(task.source_eval), len(task.target_eval)) <= cfg["batch_size"]
    t = Trainer(cfg, task, tmp_path, progress=False)
    t.run(stop_after=3)            # a trained model (anchors from the start of training are stale now)
    state = {k: v.clone() for k, v in t.model.state_dict().items()}
    t.refresh_anchors()
    after = t.model.state_dict()
    assert all(torch.equal(state[k], after[k]) for k in state), \
        "the anchor pass changed the model's parameters or BatchNorm running statistics"
    assert t.model.training, "the model is left in eval mode after the anchor pass"
    forward = batch_outputs if anchor_bn == "batch" else outputs
    feats, _ = forward(t.model, task.source_eval.x)
    by_hand = [class_means_by_hand(h, task.source_eval.labels, 4) for h in feats]
    check_anchors(t, [m for m, _ in by_hand], [o for _, o in by_hand], f"{setting} full pass ({anchor_bn})")
    c = 4
    if setting == "partial":
        _, logits = forward(t.model, task.target_eval.x)
        pi = torch.softmax(logits, 1).double().mean(0)
        got = t.anchors.mean_prediction
        assert got is not None and torch.allclose(got.double(), pi, rtol=1e-5, atol=1e-7), \
            f"the mean target prediction {got} is not the mean softmax over the target evaluation split {pi}"
        want_w = pi / pi.sum()
    else:
        assert t.anchors.mean_prediction is None, "the vanilla full pass should not read the target"
        want_w = torch.full((c,), 1.0 / c, dtype=torch.float64)
    assert torch.allclose(t.weights.double(), want_w, rtol=1e-5, atol=1e-7), \
        f"class weights {t.weights} after the refresh, Eq. ClassWeight gives {want_w}"


def test_the_weights_in_metrics_are_those_of_the_last_refresh(tmp_path):
    """metrics.json's class_weights are pi / sum(pi) of the last anchor pass (partial): the mean softmax over the
    target evaluation split of the model as it was at that pass (before step 6 here), not of the final model."""
    task = unbalanced_task(eval_counts=EVAL_COUNTS)
    cfg = resolve(tiny_cfg(setting="partial", anchor_bn="eval", iterations=8, anchor_period=3))
    t = Trainer(cfg, task, tmp_path, progress=False)
    t.run(stop_after=6)            # steps 0-5; the last refresh comes before step 6, with this model
    _, logits = outputs(t.model, task.target_eval.x)
    pi = torch.softmax(logits, 1).double().mean(0)
    m = t.run()
    assert m["iterations"] == 8
    got = torch.tensor(m["class_weights"], dtype=torch.float64)
    assert torch.allclose(got, pi / pi.sum(), rtol=1e-5, atol=1e-7), \
        f"metrics.json class_weights {got.tolist()}, the last refresh's pi is {(pi / pi.sum()).tolist()}"
    final = torch.tensor(m["target_mean_prediction"], dtype=torch.float64)
    assert not torch.allclose(final, pi, atol=1e-6), "the last two steps did not move the prediction: no check"


@pytest.mark.parametrize("setting", ["vanilla", "partial"])
def test_accumulated_anchors_are_the_means_of_their_window_only(tmp_path, setting):
    """anchor_period 3: the window of steps 0-2 closes before step 3, the window of steps 3-5 before step 6; each
    gives the class means of its own training batches (source features as the loss saw them) and, partial, the
    mean of its target batches' softmax."""
    task = unbalanced_task()
    where = RowIndex(source=task.source_train, target=task.target_train)
    cfg = resolve(tiny_cfg(setting=setting, anchor_mode="accumulate", anchor_period=3, iterations=9))
    t = Trainer(cfg, task, tmp_path, progress=False)
    fw = record_forwards(t.model)
    steps = {"source": [], "target": []}

    def windows(stop):
        t.run(stop_after=stop)
        for f in fw[sum(len(v) for v in steps.values()):]:
            names, labels = where.of(f["x"])
            assert f["grad"] and len(names) == 1, "accumulate mode ran a forward outside the training steps"
            steps[names.pop()].append((f, labels))

    for stop, window in ((4, range(0, 3)), (7, range(3, 6))):
        windows(stop)
        assert len(steps["source"]) == stop == len(steps["target"])
        label = f"{setting} accumulate, window {window.start}-{window.stop - 1}"
        batch = [steps["source"][i] for i in window]
        labels = torch.cat([y for _, y in batch])
        layers = []
        for layer in range(2):
            feats = torch.cat([f["feats"][layer].detach() for f, _ in batch])
            layers.append(class_means_by_hand(feats, labels, 4))
        assert len(set(labels.tolist())) == 4
        check_anchors(t, [m for m, _ in layers], [o for _, o in layers], label)
        if setting == "partial":
            probs = torch.cat([torch.softmax(f["logits"].detach(), 1) for f, _ in
                               (steps["target"][i] for i in window)])
            got = t.anchors.mean_prediction
            assert got is not None and torch.allclose(got.double(), probs.double().mean(0), rtol=1e-5, atol=1e-7), \
                f"{label}: the mean target prediction is not the mean softmax of the window's target batches"
