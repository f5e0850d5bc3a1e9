"""The interpolation analysis (dmp/train/evaluate.py ``interpolation_report``, paper Table DiscriInterpola).

A tiny model whose ``classifier`` records every batch it is given tells which samples the report chose and which
interpolations it classified, so the checks below do not depend on how the random choice is drawn:

- ``per_class`` samples are chosen per class (fewer when a class has fewer; a class with one sample is skipped);
- alpha = 0 classifies the chosen samples themselves, each once ("the data before interpolation"): its
  accuracy is the chosen samples' accuracy, not that of the pairs' partners (h_j of every pair i < j);
- alpha > 0 classifies alpha h_i + (1 - alpha) h_j for every same-class pair i < j of the chosen samples;
- the same seed gives the same report.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from dmp.train.evaluate import interpolation_report

CLASSES = ["a", "b", "c"]
SIZES = (7, 5, 1)  # class c has a single sample: no pair, skipped
PER_CLASS = 4
# Samples classified wrongly on their own (index within their class). Class a: 2 of 7; class b: 3 of 5.
WRONG = {0: (1, 4), 1: (0, 2, 3)}


class Recorder(nn.Module):
    """A linear classifier that keeps a copy of every input batch."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.linear = linear
        self.inputs: list[torch.Tensor] = []

    def forward(self, x):
        self.inputs.append(x.detach().clone())
        return self.linear(x)


class TinyModel(nn.Module):
    def __init__(self):
        super().__init__()
        linear = nn.Linear(4, 3, bias=False)
        with torch.no_grad():  # logits = the first three feature dimensions; the 4th (a sample id) is ignored
            linear.weight.copy_(torch.eye(3, 4))
        self.classifier = Recorder(linear)


def make_data():
    """Features [N, 4]: a correct sample of class y is 2 e_y, a wrong one e_{y+1}; the 4th entry is a distinct
    id (random, ignored by the classifier) so that every classified row tells the samples it was made from.
    A midpoint of a correct and a wrong sample is classified correctly, one of two wrong samples wrongly."""
    feats, labels = [], []
    ids = np.random.default_rng(7).uniform(1.0, 100.0, sum(SIZES))  # generic: no two mixtures coincide
    for y, n in enumerate(SIZES):
        for k in range(n):
            f = torch.zeros(4)
            if k in WRONG.get(y, ()):
                f[(y + 1) % 3] = 1.0
            else:
                f[y] = 2.0
            f[3] = ids[len(feats)]
            feats.append(f)
            labels.append(y)
    # shuffle so that the classes are interleaved, as in a real target set
    order = torch.from_numpy(np.random.default_rng(123).permutation(len(labels)))
    return torch.stack(feats)[order], torch.tensor(labels)[order]


def row_index(feats, rows):
    """Index of each classified row in ``feats`` (alpha = 0: the rows are samples themselves)."""
    out = []
    for r in rows:
        hits = torch.nonzero((feats == r).all(1)).flatten()
        assert len(hits) == 1, "alpha = 0 must classify samples, not mixtures"
        out.append(int(hits[0]))
    return out


def correct(model, h, y) -> np.ndarray:
    return (model.classifier.linear(h).argmax(1) == y).numpy()


def report(seed, model=None):
    model = model or TinyModel()
    feats, labels = make_data()
    return interpolation_report(model, feats, labels, CLASSES, PER_CLASS, seed), model, feats, labels


def test_sample_counts_and_skipped_class():
    rep, _, _, _ = report(seed=0)
    assert set(rep) == {"0", "0.1", "0.3", "0.5"}
    assert rep["0"]["samples"] == PER_CLASS + PER_CLASS  # 4 of class a, 4 of class b, class c skipped
    for alpha in ("0.1", "0.3", "0.5"):
        assert rep[alpha]["samples"] == 2 * math.comb(PER_CLASS, 2)  # 2 x C(4, 2) = 12 pairs
    for part in rep.values():
        assert set(part["per_class_accuracy"]) == {"a", "b"}
        assert "confusion_matrix" not in part


@pytest.mark.parametrize("seed", range(12))
def test_alpha0_is_the_accuracy_of_the_chosen_samples_and_pairs_are_all_same_class_pairs(seed):
    rep, model, feats, labels = report(seed)
    batches = model.classifier.inputs
    assert len(batches) == 4  # one batch per alpha (0, 0.1, 0.3, 0.5)
    chosen = row_index(feats, batches[0])
    assert len(set(chosen)) == len(chosen) == 8
    by_class = {y: sorted(i for i in chosen if labels[i] == y) for y in range(3)}
    assert [len(by_class[y]) for y in range(3)] == [PER_CLASS, PER_CLASS, 0]

    ok = correct(model, feats[chosen], labels[chosen])
    y_chosen = labels[chosen].numpy()
    assert rep["0"]["accuracy"] == pytest.approx(100.0 * ok.mean())
    for y, name in enumerate(CLASSES[:2]):
        assert rep["0"]["per_class_accuracy"][name] == pytest.approx(100.0 * ok[y_chosen == y].mean())

    # alpha = 0.5: the midpoints of every same-class pair i < j of the chosen samples, each once
    pairs = [(i, j) for y in range(2) for i, j in zip(*np.triu_indices(PER_CLASS, 1))
             for i, j in [(by_class[y][i], by_class[y][j])]]
    expected = {tuple(np.round((0.5 * feats[i] + 0.5 * feats[j]).numpy(), 5)) for i, j in pairs}
    seen = [tuple(np.round(r.numpy(), 5)) for r in batches[3]]
    assert len(seen) == len(set(seen)) == 12 and set(seen) == expected
    pair_ok = np.array([correct(model, (0.5 * feats[i] + 0.5 * feats[j])[None], labels[i:i + 1])[0]
                        for i, j in pairs])
    assert rep["0.5"]["accuracy"] == pytest.approx(100.0 * pair_ok.mean())
    # alpha = 0.1 / 0.3: one mixture alpha h_i + (1 - alpha) h_j per pair (which of the two gets alpha is a
    # convention), every pair once
    for alpha, batch in ((0.1, batches[1]), (0.3, batches[2])):
        def mixes(r, u, v):
            return torch.allclose(r, alpha * feats[u] + (1 - alpha) * feats[v], rtol=0, atol=1e-3)
        assert len(batch) == 12
        matched = [[p for p, (i, j) in enumerate(pairs) if mixes(r, i, j) or mixes(r, j, i)] for r in batch]
        assert all(len(m) == 1 for m in matched) and sorted(m[0] for m in matched) == list(range(12))


def partner_accuracy(model, feats, labels, chosen_by_class):
    """What alpha = 0 would give if it classified 0 * h_i + 1 * h_j over the pairs (the wrong definition)."""
    ok = []
    for members in chosen_by_class:
        for a, b in zip(*np.triu_indices(len(members), 1)):
            j = members[b]
            ok.append(correct(model, feats[j][None], labels[j:j + 1])[0])
    return 100.0 * np.mean(ok)


def test_alpha0_differs_from_the_pair_partner_definition():
    """The data make the two definitions disagree for some seeds, so the check above can tell them apart."""
    differs = 0
    for seed in range(12):
        rep, model, feats, labels = report(seed)
        chosen = row_index(feats, model.classifier.inputs[0])
        by_class = [sorted(i for i in chosen if labels[i] == y) for y in range(2)]
        ok = correct(model, feats[chosen], labels[chosen])
        assert rep["0"]["accuracy"] == pytest.approx(100.0 * ok.mean())
        differs += rep["0"]["accuracy"] != pytest.approx(partner_accuracy(model, feats, labels, by_class))
    assert differs >= 6


def test_same_seed_same_result_and_the_seed_matters():
    first, _, _, _ = report(seed=5)
    again, _, _, _ = report(seed=5)
    assert first == again
    others = [report(seed=s)[0] for s in range(12)]
    assert any(o != first for o in others)  # the choice of samples depends on the seed


def test_per_class_larger_than_a_class_takes_all_of_it():
    feats, labels = make_data()
    model = TinyModel()
    rep = interpolation_report(model, feats, labels, CLASSES, per_class=6, seed=0)
    assert rep["0"]["samples"] == 6 + 5
    assert rep["0.5"]["samples"] == math.comb(6, 2) + math.comb(5, 2)
    # class b: all 5 taken, 3 of them wrong on their own
    assert rep["0"]["per_class_accuracy"]["b"] == pytest.approx(100.0 * 2 / 5)
