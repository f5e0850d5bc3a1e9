"""Exact values, gradients and NaN-freedom of the discriminative losses (dmp.losses)."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmp.losses import batch_class_means, entropy_loss, inter_class_loss, intra_class_loss


def unit(deg):
    return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]


def test_inter_class_three_means_at_120_degrees_is_minus_half():
    h = torch.tensor([unit(0), unit(120), unit(240)])
    loss = inter_class_loss(h, torch.tensor([0, 1, 2]), torch.zeros(2), 3)
    assert loss.item() == pytest.approx(-0.5, abs=1e-6)


def test_inter_class_centralises_with_the_anchor():
    # The same three directions shifted by an offset; centred with that offset as the anchor -> -1/2 again,
    # centred with a zero anchor -> not -1/2.
    offset = torch.tensor([5.0, -3.0])
    h = torch.tensor([unit(0), unit(120), unit(240)]) + offset
    y = torch.tensor([0, 1, 2])
    assert inter_class_loss(h, y, offset, 3).item() == pytest.approx(-0.5, abs=1e-6)
    assert inter_class_loss(h, y, torch.zeros(2), 3).item() > 0.5


def test_inter_class_uses_batch_class_means():
    # two samples per class whose means are at 0 and 180 degrees -> cosine -1
    h = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 2.0], [-1.0, -2.0]])
    y = torch.tensor([0, 0, 1, 1])
    means, present = batch_class_means(h, y, 2)
    assert torch.allclose(means, torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))
    assert present.tolist() == [True, True]
    assert inter_class_loss(h, y, torch.zeros(2), 2).item() == pytest.approx(-1.0)


def test_inter_class_absent_classes_zero_vs_skip():
    # classes 0 and 1 present (at 0 and 90 degrees), class 2 absent; anchor a = (1, 1).
    a = torch.tensor([1.0, 1.0])
    h = torch.tensor([[2.0, 1.0], [1.0, 2.0]])          # centred: (1,0) and (0,1) -> cosine 0
    y = torch.tensor([0, 1])
    skip = inter_class_loss(h, y, a, 3, absent="skip")
    assert skip.item() == pytest.approx(0.0, abs=1e-7)
    # paper: absent class mean is 0 -> centred -a = (-1,-1)/sqrt2; cos with (1,0) and (0,1) is -1/sqrt2 each
    zero = inter_class_loss(h, y, a, 3, absent="zero")
    assert zero.item() == pytest.approx((0.0 - 2 / math.sqrt(2)) / 3, abs=1e-6)
    # three of four classes present, centred (1,0), (0,1), (1,1): skip averages their 3 pairs (0, 1/sqrt2,
    # 1/sqrt2), an answer that is not the fallback 0; zero adds the absent class at (-1,-1) (cosines -1/sqrt2,
    # -1/sqrt2, -1) and averages all 6 pairs: -1/6
    h3, y3 = torch.tensor([[2.0, 1.0], [1.0, 2.0], [2.0, 2.0]]), torch.tensor([0, 1, 2])
    assert inter_class_loss(h3, y3, a, 4, absent="skip").item() == pytest.approx(math.sqrt(2) / 3, abs=1e-6)
    assert inter_class_loss(h3, y3, a, 4, absent="zero").item() == pytest.approx(-1 / 6, abs=1e-6)


def test_inter_class_one_class_batch_is_zero_with_finite_grad():
    h = torch.randn(5, 4, requires_grad=True)
    loss = inter_class_loss(h, torch.zeros(5, dtype=torch.long), torch.zeros(4), 3, absent="skip")
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(h.grad).all()


def test_intra_class_hand_computed_k1_and_k2():
    means = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])      # class anchors (unit)
    h_t = torch.tensor([[2.0, 0.0], [1.0, 1.0]])                      # cos to anchors: [1,0,-1], [.707,.707,-.707]
    p = torch.tensor([[0.7, 0.2, 0.1], [0.3, 0.6, 0.1]])
    r = 1 / math.sqrt(2)
    # k = 1: sample 0 -> class 0: 0.7*1 ; sample 1 -> class 1: 0.6*r ; divided by n k = 2
    assert intra_class_loss(h_t, p, means, k=1).item() == pytest.approx(-(0.7 + 0.6 * r) / 2, abs=1e-6)
    # k = 2: sample 0 -> classes 0,1: 0.7*1 + 0.2*0 ; sample 1 -> classes 1,0: 0.6*r + 0.3*r ; / (2*2)
    assert intra_class_loss(h_t, p, means, k=2).item() == pytest.approx(-(0.7 + 0.9 * r) / 4, abs=1e-6)
    # weighted (Eq. WeightedIntraLoss): w = (0.5, 2, 1), k = 1
    w = torch.tensor([0.5, 2.0, 1.0])
    assert intra_class_loss(h_t, p, means, k=1, class_weights=w).item() == pytest.approx(
        -(0.5 * 0.7 + 2.0 * 0.6 * r) / 2, abs=1e-6)


def test_intra_class_uniform_weights_of_one_equal_unweighted():
    g = torch.Generator().manual_seed(0)
    h, means = torch.randn(6, 5, generator=g), torch.randn(4, 5, generator=g)
    p = torch.softmax(torch.randn(6, 4, generator=g), 1)
    assert torch.allclose(intra_class_loss(h, p, means, k=2),
                          intra_class_loss(h, p, means, k=2, class_weights=torch.ones(4)))


def test_intra_class_gradient_flows_to_features_and_probabilities_not_anchors():
    h = torch.randn(4, 3, requires_grad=True)
    logits = torch.randn(4, 3, requires_grad=True)
    means = torch.randn(3, 3, requires_grad=True)
    intra_class_loss(h, torch.softmax(logits, 1), means).backward()
    assert h.grad.abs().sum() > 0 and logits.grad.abs().sum() > 0 and means.grad is None


def test_intra_class_grad_p_false_keeps_the_value_and_the_feature_gradient_only():
    h = torch.randn(5, 3, requires_grad=True)
    logits = torch.randn(5, 4, requires_grad=True)
    means = torch.randn(4, 3)
    grads = {}
    for grad_p in (True, False):
        h.grad, logits.grad = None, None
        loss = intra_class_loss(h, torch.softmax(logits, 1), means, grad_p=grad_p)
        loss.backward()
        grads[grad_p] = (loss.detach().item(), h.grad.clone(), logits.grad)
    assert grads[True][0] == grads[False][0]
    assert torch.equal(grads[True][1], grads[False][1])
    assert grads[True][2].abs().sum() > 0 and (grads[False][2] is None or not grads[False][2].any())


def test_intra_class_rejects_bad_k():
    with pytest.raises(ValueError, match="k must be"):
        intra_class_loss(torch.randn(2, 3), torch.full((2, 3), 1 / 3), torch.randn(3, 3), k=4)


def test_entropy_values():
    assert entropy_loss(torch.tensor([[1.0, 0.0]])).item() == pytest.approx(0.0, abs=1e-9)
    assert entropy_loss(torch.full((3, 4), 0.25)).item() == pytest.approx(math.log(4))


def test_gradcheck_float64():
    g = torch.Generator().manual_seed(1)
    h_s = torch.randn(6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    assert torch.autograd.gradcheck(lambda h: inter_class_loss(h, y, torch.zeros(4, dtype=torch.float64), 3),
                                    (h_s,))
    h_t = torch.randn(5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    logits = torch.randn(5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    means = torch.randn(3, 4, dtype=torch.float64, generator=g)
    assert torch.autograd.gradcheck(lambda h, z: intra_class_loss(h, torch.softmax(z, 1), means, k=2),
                                    (h_t, logits))
    assert torch.autograd.gradcheck(lambda z: entropy_loss(torch.softmax(z, 1)), (logits,))


feature_rows = st.integers(2, 8)


@settings(max_examples=60, deadline=None)
@given(n=feature_rows, d=st.integers(1, 6), c=st.integers(1, 5), mode=st.sampled_from(["zero", "skip"]),
       kind=st.sampled_from(["random", "constant", "zeros", "duplicated"]), seed=st.integers(0, 10_000))
def test_losses_never_nan(n, d, c, mode, kind, seed):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g)
    if kind == "constant":
        h = h[:1].repeat(n, 1)
    elif kind == "zeros":
        h = torch.zeros(n, d)
    elif kind == "duplicated":
        h = h[: max(1, n // 2)].repeat(3, 1)[:n]
    h.requires_grad_(True)
    y = torch.randint(0, c, (n,), generator=g)
    anchor = h.detach().mean(0) if kind != "random" else torch.randn(d, generator=g)
    logits = torch.randn(n, c, generator=g, requires_grad=True)
    means = torch.zeros(c, d) if kind == "zeros" else torch.randn(c, d, generator=g)
    loss = inter_class_loss(h, y, anchor, c, absent=mode) + intra_class_loss(h, torch.softmax(logits, 1), means,
                                                                              k=min(2, c))
    loss = loss + entropy_loss(torch.softmax(logits, 1))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(h.grad).all() and torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("batched", [False, True])
def test_unit_rows_value_and_gradient_equal_f_normalize(monkeypatch, batched):
    """The fused row normalisation of the batched path (its own backward) against F.normalize's autograd, float64,
    on rows of norm well above eps, exactly zero, and between 0 and eps (the clamped region: linear, x / eps)."""
    from dmp.losses.inter_class import unit_rows
    from dmp.manifolds import spectral

    monkeypatch.setattr(spectral, "PER_MATRIX_ON_CPU", not batched)
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    x[0, 1] = 0.0
    x[1, 2] = 1e-3 * x[1, 2] / x[1, 2].norm()            # norm 1e-3 < eps = 1e-2
    dy = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = unit_rows(a, eps=1e-2), torch.nn.functional.normalize(b, dim=-1, eps=1e-2)
    (ga,), (gb,) = torch.autograd.grad(got, a, dy), torch.autograd.grad(want, b, dy)
    torch.testing.assert_close(got, want, rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(ga, gb, rtol=1e-12, atol=1e-12)
    assert torch.equal(ga[1, 2], dy[1, 2] / 1e-2)            # clamped row: the gradient of x / eps
    assert torch.autograd.gradcheck(lambda t: unit_rows(t, eps=1e-2), (x[:, :2].clone().requires_grad_(),))
