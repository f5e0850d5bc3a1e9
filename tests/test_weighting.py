"""Class weights (dmp/weighting.py, Eq. ClassWeight), the learning-rate schedule (dmp/train/schedule.py) and how
the weights enter the DMP terms of one iteration (dmp/methods/dmp.py ``dmp_losses``):

- vanilla: w = 1/c; the intra-class term (Eq. WeightedIntraLoss) is scaled by w (sum_one: 1/c x the unweighted
  Eq. IntraLoss&Truncated; mean_one: exactly the unweighted value) and the alignment term uses the source rows
  as they are;
- partial: w = pi (the normalised mean target prediction) and the source rows of the alignment term are
  h_i * w_{y_i} (Eq. WeightedAlignLoss).
"""
from __future__ import annotations

import pytest
import torch

from dmp import manifolds
from dmp.anchors import Anchors
from dmp.config import resolve
from dmp.losses import inter_class_loss, intra_class_loss
from dmp.train.schedule import lr_factor
from dmp.methods.dmp import dmp_losses
from dmp.weighting import class_weights, normalise_weights, weight_source_features

C = 10  # the demo's classes
DIMS = [12, 8]
N = 20


# ---------------------------------------------------------------------------------------------- class weights
def test_vanilla_weights_are_uniform_one_over_c_whatever_the_prediction():
    pred = torch.tensor([0.7, 0.2, 0.1, 0.0])
    for mean_prediction in (None, pred):
        w = class_weights(mean_prediction, 4, "vanilla")
        assert torch.equal(w, torch.full((4,), 0.25))
    assert class_weights(None, 7, "vanilla").sum().item() == pytest.approx(1.0)


def test_partial_weights_are_the_normalised_mean_prediction():
    w = class_weights(torch.tensor([2.0, 1.0, 1.0, 0.0]), 4, "partial")
    assert torch.allclose(w, torch.tensor([0.5, 0.25, 0.25, 0.0]))
    pred = torch.softmax(torch.randn(30, 6, generator=torch.Generator().manual_seed(0)), 1).mean(0)
    w = class_weights(pred, 6, "partial")
    assert torch.allclose(w, pred / pred.sum(), atol=1e-7)
    assert w.sum().item() == pytest.approx(1.0, abs=1e-6) and (w >= 0).all()
    # negative entries (never from a softmax, but guarded): clamped to 0, the rest renormalised
    w = class_weights(torch.tensor([-1.0, 1.0, 3.0]), 3, "partial")
    assert torch.allclose(w, torch.tensor([0.0, 0.25, 0.75])) and (w >= 0).all()


def test_partial_weights_before_the_first_refresh_are_uniform_and_bad_settings_raise():
    assert torch.equal(class_weights(None, 5, "partial"), torch.full((5,), 0.2))
    with pytest.raises(ValueError):
        class_weights(torch.ones(3), 3, "open_set")


def test_normalise_weights():
    w = torch.tensor([0.5, 0.25, 0.25, 0.0])
    assert normalise_weights(w, "sum_one") is w
    assert torch.equal(normalise_weights(w, "mean_one"), torch.tensor([2.0, 1.0, 1.0, 0.0]))  # c * w
    assert torch.equal(normalise_weights(torch.full((5,), 0.2), "mean_one"), torch.ones(5))
    with pytest.raises(ValueError):
        normalise_weights(w, "max_one")


def test_weight_source_features_scales_each_row_by_its_class_weight():
    h = torch.ones(3, 2)
    out = weight_source_features(h, torch.tensor([2, 0, 1]), torch.tensor([0.5, 2.0, 3.0]))
    assert torch.equal(out, torch.tensor([[3.0, 3.0], [0.5, 0.5], [2.0, 2.0]]))


# ---------------------------------------------------------------------------------------------- lr schedule
@pytest.mark.parametrize("progress, expected", [(0.0, 1.0), (0.5, 0.26084743001221455),  # 6^-0.75
                                                (1.0, 0.16556002607617018)])  # 11^-0.75
def test_anneal_is_ganin_schedule(progress, expected):
    assert lr_factor("anneal", progress) == pytest.approx(expected, rel=1e-12)
    assert lr_factor("anneal", progress) == pytest.approx((1 + 10 * progress) ** -0.75, rel=1e-12)


def test_constant_schedule_and_unknown_schedule():
    assert lr_factor("constant", 0.0) == lr_factor("constant", 0.7) == 1.0
    with pytest.raises(ValueError):
        lr_factor("cosine", 0.5)


# ---------------------------------------------------------------------------------------------- dmp_losses
def batch(seed=0):
    """Source/target features of two manifold layers, source labels covering every class, target softmax."""
    g = torch.Generator().manual_seed(seed)
    feats_s = [torch.tanh(torch.randn(N, d, generator=g)) for d in DIMS]
    feats_t = [torch.tanh(torch.randn(N, d, generator=g) + 0.3) for d in DIMS]
    y_s = torch.arange(N) % C
    p_t = torch.softmax(2 * torch.randn(N, C, generator=g), 1)
    return feats_s, y_s, feats_t, p_t


def anchors_from(feats_s, y_s, p_t):
    anchors = Anchors(C, DIMS)
    anchors.add_source(feats_s, y_s)
    anchors.add_target(p_t)
    anchors.refresh_from_sums()
    assert anchors.ready
    return anchors


SCHED = {"intra_start_iteration": 0, "inter_start_iteration": 0}


def losses(setting, weight_norm, metric="LE", method="dmp", it=3, sched=SCHED, seed=0):
    cfg = resolve(dict(dataset="demo", source="solid", target="outline", setting=setting, weight_norm=weight_norm,
                       metric=metric, method=method, bottleneck_dims=DIMS))
    feats_s, y_s, feats_t, p_t = batch(seed)
    anchors = anchors_from(feats_s, y_s, p_t)
    weights = class_weights(anchors.mean_prediction, C, setting)
    out = dmp_losses(cfg, it, feats_s, y_s, feats_t, p_t, anchors, weights, torch.device("cpu"), sched)
    return out, cfg, (feats_s, y_s, feats_t, p_t, anchors, weights)


def unweighted_intra(feats_t, p_t, anchors, k=1, class_weights=None):
    return sum(intra_class_loss(ht, p_t, m, k=k, class_weights=class_weights)
               for ht, m in zip(feats_t, anchors.class_means))


def align(cfg, feats_s, feats_t, row_weights=None):
    return sum(manifolds.alignment_distance(cfg["metric"], hs if row_weights is None else hs * row_weights[:, None],
                                            ht, dim=cfg["grassmann_dim"], eps=cfg["le_eps"])
               for hs, ht in zip(feats_s, feats_t))


def test_vanilla_sum_one_intra_is_one_over_c_times_the_unweighted_loss():
    out, cfg, (feats_s, y_s, feats_t, p_t, anchors, weights) = losses("vanilla", "sum_one")
    assert torch.equal(weights, torch.full((C,), 1.0 / C))
    plain = unweighted_intra(feats_t, p_t, anchors)
    assert plain.abs().item() > 1e-3
    assert out["intra"].item() == pytest.approx(plain.item() / C, rel=1e-5)


def test_vanilla_mean_one_intra_is_the_unweighted_loss():
    out, cfg, (feats_s, y_s, feats_t, p_t, anchors, weights) = losses("vanilla", "mean_one")
    plain = unweighted_intra(feats_t, p_t, anchors)
    assert out["intra"].item() == pytest.approx(plain.item(), rel=1e-5)


@pytest.mark.parametrize("weight_norm", ["sum_one", "mean_one"])
@pytest.mark.parametrize("metric", ["LE", "AG"])
def test_vanilla_alignment_uses_unweighted_source_rows(weight_norm, metric):
    out, cfg, (feats_s, y_s, feats_t, p_t, anchors, weights) = losses("vanilla", weight_norm, metric=metric)
    assert out["align"].item() == pytest.approx(align(cfg, feats_s, feats_t).item(), rel=1e-5)
    if weight_norm == "sum_one" and metric == "LE":
        # the check can tell: rows scaled by w = 1/c would give another Log-Euclidean distance
        scaled = align(cfg, feats_s, feats_t, torch.full((N,), 1.0 / C))
        assert out["align"].item() != pytest.approx(scaled.item(), rel=1e-3)


@pytest.mark.parametrize("weight_norm", ["sum_one", "mean_one"])
@pytest.mark.parametrize("metric", ["LE", "G", "AG"])
def test_partial_alignment_weights_source_rows_by_their_class_weight(weight_norm, metric):
    out, cfg, (feats_s, y_s, feats_t, p_t, anchors, weights) = losses("partial", weight_norm, metric=metric)
    w = normalise_weights(weights, weight_norm)
    assert w.std() > 0.01  # non-uniform weights: the partial case is not the vanilla one in disguise
    expected = align(cfg, feats_s, feats_t, w[y_s])
    assert out["align"].item() == pytest.approx(expected.item(), rel=1e-5)
    if metric == "LE":
        assert out["align"].item() != pytest.approx(align(cfg, feats_s, feats_t).item(), rel=1e-3)


@pytest.mark.parametrize("weight_norm", ["sum_one", "mean_one"])
def test_partial_intra_is_weighted_by_the_normalised_class_weights(weight_norm):
    out, cfg, (feats_s, y_s, feats_t, p_t, anchors, weights) = losses("partial", weight_norm)
    w = normalise_weights(weights, weight_norm)
    expected = unweighted_intra(feats_t, p_t, anchors, class_weights=w)
    assert out["intra"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert out["intra"].item() != pytest.approx(unweighted_intra(feats_t, p_t, anchors).item() / C, rel=1e-3)


@pytest.mark.parametrize("setting", ["vanilla", "partial"])
def test_inter_class_term_is_unweighted(setting):
    out, cfg, (feats_s, y_s, feats_t, p_t, anchors, weights) = losses(setting, "sum_one")
    expected = sum(inter_class_loss(hs, y_s, m, C, absent=cfg["inter_absent"])
                   for hs, m in zip(feats_s, anchors.means))
    assert out["inter"].item() == pytest.approx(expected.item(), rel=1e-5)


def test_warm_ups_and_ablations_switch_terms_off():
    sched = {"intra_start_iteration": 10, "inter_start_iteration": 5}
    out, *_ = losses("vanilla", "sum_one", it=4, sched=sched)
    assert out["intra"].item() == 0.0 and out["inter"].item() == 0.0 and out["align"].item() != 0.0
    out, *_ = losses("vanilla", "sum_one", it=5, sched=sched)  # the inter-class start itself
    assert out["intra"].item() == 0.0 and out["inter"].item() != 0.0
    out, *_ = losses("vanilla", "sum_one", it=9, sched=sched)  # the last iteration before the intra-class start
    assert out["intra"].item() == 0.0 and out["inter"].item() != 0.0
    out, *_ = losses("vanilla", "sum_one", it=10, sched=sched)
    assert out["intra"].item() != 0.0
    out, *_ = losses("vanilla", "sum_one", method="dmp_no_al")
    assert out["align"].item() == 0.0 and out["intra"].item() != 0.0
    out, *_ = losses("vanilla", "sum_one", method="dmp_no_ds")
    assert out["intra"].item() == 0.0 and out["inter"].item() == 0.0 and out["align"].item() != 0.0


def test_mean_prediction_momentum_averages_the_passes_and_zero_is_the_paper():
    """config mean_prediction_momentum m: pi <- m pi_previous + (1 - m) pi_pass; m = 0 keeps only the last pass's mean
    (Eq. ClassWeight). Two passes by hand: [0.5, 0.3, 0.2] (two rows), then [0, 1, 0] (one row)."""
    def passes(m):
        a = Anchors(3, [2], prediction_momentum=m)
        a.add_target(torch.tensor([[0.6, 0.2, 0.2], [0.4, 0.4, 0.2]]))
        a.refresh_from_sums()
        first = a.mean_prediction.clone()
        a.add_target(torch.tensor([[0.0, 1.0, 0.0]]))
        a.refresh_from_sums()
        return first, a.mean_prediction
    first, last = passes(0.0)
    assert torch.allclose(first, torch.tensor([0.5, 0.3, 0.2])) and torch.allclose(last, torch.tensor([0.0, 1.0, 0.0]))
    first, last = passes(0.75)
    assert torch.allclose(first, torch.tensor([0.5, 0.3, 0.2]))              # the first pass has nothing to average
    assert torch.allclose(last, torch.tensor([0.375, 0.475, 0.15]))           # 0.75 * first + 0.25 * [0, 1, 0]
    base = dict(dataset="demo", source="solid", target="outline", setting="partial", method="dmp")
    assert resolve(base)["mean_prediction_momentum"] == 0.0
    for bad in (1.0, -0.1, "high"):
        with pytest.raises(ValueError, match="mean_prediction_momentum"):
            resolve({**base, "mean_prediction_momentum": bad})
