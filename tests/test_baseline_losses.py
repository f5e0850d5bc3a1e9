"""Reference tests of the comparison methods' losses (dmp/losses/{adversarial,bsp,feature_norm,partial_weights}.py):
each against an independent implementation written here (numpy, closed forms, hand-computed values)."""
import math

import numpy as np
import pytest
import torch

from dmp.losses import (DomainDiscriminator, RandomizedMultilinearMap, bsp_loss, domain_adversarial_loss,
                        entropy_weights, etn_weights, grad_reverse, grl_coefficient, hafn_loss, iwan_weights,
                        leaky_softmax, multilinear_map, pada_class_weights, safn_loss, use_randomized_map)


def _np(t):
    return t.detach().double().numpy()


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _bce(z, y):
    p = _sigmoid(z)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


# -- gradient reversal ---------------------------------------------------------------------------------
@pytest.mark.parametrize("p, expected", [(0.0, 0.0), (0.1, 0.46211715726000974), (0.5, 0.9866142981514305),
                                         (1.0, 0.9999092042625951)])
def test_grl_schedule_values(p, expected):
    # 2 / (1 + exp(-10 p)) - 1 = tanh(5 p); the values are tanh(0), tanh(0.5), tanh(2.5), tanh(5)
    assert grl_coefficient(p) == pytest.approx(expected, abs=1e-12)
    assert grl_coefficient(p) == pytest.approx(math.tanh(5 * p), abs=1e-12)


def test_grl_schedule_is_increasing_from_zero_to_one():
    values = [grl_coefficient(p) for p in np.linspace(0, 1, 11)]
    assert values[0] == 0 and all(b > a for a, b in zip(values, values[1:])) and values[-1] < 1


def test_grad_reverse_is_identity_forward_and_minus_coeff_backward():
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(4, 3)
    y = grad_reverse(x, 0.3)
    assert torch.equal(y, x)
    (y * w).sum().backward()
    torch.testing.assert_close(x.grad, -0.3 * w)


def test_discriminator_gradient_reaches_features_reversed():
    """The discriminator descends the domain loss; the features, behind the reversal layer, ascend it."""
    torch.manual_seed(0)
    disc = DomainDiscriminator(5, hidden=8, dropout=0.0)
    f = torch.randn(6, 5, requires_grad=True)
    loss = domain_adversarial_loss(disc(grad_reverse(f, 1.0))[:3], disc(grad_reverse(f, 1.0))[3:])
    g_rev, = torch.autograd.grad(loss, f)
    f2 = f.detach().clone().requires_grad_(True)
    loss2 = domain_adversarial_loss(disc(f2)[:3], disc(f2)[3:])
    g_plain, = torch.autograd.grad(loss2, f2)
    torch.testing.assert_close(g_rev, -g_plain)


def test_discriminator_architecture():
    d = DomainDiscriminator(512)
    linears = [m for m in d.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(512, 1024), (1024, 1024), (1024, 1)]
    assert d.dropout == 0.5
    assert all(float(m.bias.detach().abs().sum()) == 0 for m in linears)


def test_discriminator_dropout_against_hand_and_reproducible_by_generator():
    torch.manual_seed(0)
    d = DomainDiscriminator(3, hidden=4, dropout=0.5)
    x = torch.randn(5, 3)
    d.eval()
    W1, W2, W3 = (_np(m.weight) for m in (d.hidden[0], d.hidden[1], d.out))
    b3 = _np(d.out.bias)
    relu = lambda z: np.maximum(z, 0)  # noqa: E731
    np.testing.assert_allclose(_np(d(x)), relu(relu(_np(x) @ W1.T) @ W2.T) @ W3.T + b3, rtol=1e-5, atol=1e-6)
    d.train()
    a = d(x, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, d(x, generator=torch.Generator().manual_seed(1)))
    assert not torch.equal(a, d(x, generator=torch.Generator().manual_seed(2)))
    # the masks are those of the generator's uniforms: kept units scaled by 1 / (1 - p) = 2
    g = torch.Generator().manual_seed(1)
    m1 = (torch.rand(5, 4, generator=g) >= 0.5).double().numpy() * 2
    m2 = (torch.rand(5, 4, generator=g) >= 0.5).double().numpy() * 2
    np.testing.assert_allclose(_np(a), (relu(relu(_np(x) @ W1.T) * m1 @ W2.T) * m2) @ W3.T + b3, rtol=1e-5,
                               atol=1e-6)


# -- the domain loss -----------------------------------------------------------------------------------
def test_domain_loss_against_numpy_bce():
    torch.manual_seed(1)
    d_s, d_t = torch.randn(5, 1), torch.randn(5, 1)
    ref = np.concatenate([_bce(_np(d_s).ravel(), 1.0), _bce(_np(d_t).ravel(), 0.0)]).mean()  # BCELoss, 2n rows
    assert float(domain_adversarial_loss(d_s, d_t)) == pytest.approx(ref, rel=1e-6)


def test_domain_loss_is_finite_for_saturated_logits():
    d = torch.tensor([200.0, -200.0], requires_grad=True)
    loss = domain_adversarial_loss(d[:1], d[1:])        # a perfect discriminator: loss ~ 0
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(d.grad).all() and float(loss.detach()) < 1e-6
    wrong = domain_adversarial_loss(torch.tensor([-200.0]), torch.tensor([200.0]))
    assert float(wrong) == pytest.approx(200.0)           # log(1 + e^200) without overflow


# -- the multilinear maps (CDAN) -----------------------------------------------------------------------
def test_multilinear_map_against_hand_and_numpy():
    f = torch.tensor([[1.0, 2.0, 3.0]])
    g = torch.tensor([[0.5, 0.25]])
    # g (x) f in the official code's order: g_1 f, then g_2 f
    assert multilinear_map(f, g).tolist() == [[0.5, 1.0, 1.5, 0.25, 0.5, 0.75]]
    rng = np.random.default_rng(0)
    F_, G_ = rng.normal(size=(4, 5)), rng.random(size=(4, 3))
    ref = np.einsum("nc,nd->ncd", G_, F_).reshape(4, -1)
    np.testing.assert_allclose(_np(multilinear_map(torch.tensor(F_), torch.tensor(G_))), ref, rtol=1e-12)


def test_randomized_map_against_numpy_and_fixed_by_seed():
    m = RandomizedMultilinearMap(6, 4, dim=16, seed=3)
    f, g = torch.randn(5, 6), torch.softmax(torch.randn(5, 4), 1)
    ref = (_np(f) @ _np(m.r_f)) * (_np(g) @ _np(m.r_g)) / math.sqrt(16)
    np.testing.assert_allclose(_np(m(f, g)), ref, rtol=1e-5, atol=1e-6)
    assert torch.equal(RandomizedMultilinearMap(6, 4, dim=16, seed=3).r_f, m.r_f)
    assert not torch.equal(RandomizedMultilinearMap(6, 4, dim=16, seed=4).r_f, m.r_f)
    assert {"r_f", "r_g"} <= set(m.state_dict())        # saved in checkpoints: a resumed run keeps them


def test_randomized_map_preserves_inner_products_in_expectation():
    """CDAN's justification of T_odot: E[<T_odot(f, g), T_odot(f', g')>] = <f, f'> <g, g'> = <f (x) g, f' (x) g'>."""
    f, g = torch.tensor([[1.0, -2.0, 0.5], [0.3, 1.0, 2.0]]), torch.tensor([[0.7, 0.3], [0.2, 0.8]])
    exact = float(multilinear_map(f[:1], g[:1]) @ multilinear_map(f[1:], g[1:]).t())
    assert exact == pytest.approx(float(f[0] @ f[1]) * float(g[0] @ g[1]))
    est = np.mean([float(t[0] @ t[1]) for t in
                   (RandomizedMultilinearMap(3, 2, dim=4096, seed=s)(f, g) for s in range(40))])
    assert est == pytest.approx(exact, abs=0.05)


@pytest.mark.parametrize("d_f, c, randomized", [(512, 8, False), (512, 9, True), (512, 31, True), (64, 10, False),
                                                (256, 12, False), (256, 17, True)])
def test_randomized_map_threshold_4096(d_f, c, randomized):
    assert use_randomized_map(d_f, c) is randomized


# -- entropy conditioning (CDAN+E) ---------------------------------------------------------------------
def test_entropy_weights_against_numpy():
    p = torch.tensor([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.7, 0.2, 0.1]])
    P = _np(p)
    H = -(P * np.log(P + 1e-5)).sum(1)
    w = 1 + np.exp(-H)
    np.testing.assert_allclose(_np(entropy_weights(p)), w / w.mean(), rtol=1e-6)
    # a confident prediction weighs most: one-hot H ~ 0 -> w ~ 2; uniform H = log 3 -> w = 4/3
    assert w[0] == pytest.approx(2.0, abs=1e-3) and w[1] == pytest.approx(1 + 1 / 3, abs=1e-3)


def test_entropy_weighted_domain_loss_matches_official_normalisation():
    """The official CDAN loss: weight = w_s / sum(w_s) (source rows) and w_t / sum(w_t) (target rows), then
    sum(weight * bce) / sum(weight)."""
    torch.manual_seed(2)
    p_s, p_t = torch.softmax(3 * torch.randn(4, 5), 1), torch.softmax(3 * torch.randn(4, 5), 1)
    d_s, d_t = torch.randn(4), torch.randn(4)
    loss = domain_adversarial_loss(d_s, d_t, entropy_weights(p_s), entropy_weights(p_t))

    def w(P):
        return 1 + np.exp((P * np.log(P + 1e-5)).sum(1))
    ws, wt = w(_np(p_s)), w(_np(p_t))
    weight = np.concatenate([ws / ws.sum(), wt / wt.sum()])
    bce = np.concatenate([_bce(_np(d_s), 1.0), _bce(_np(d_t), 0.0)])
    assert float(loss.detach()) == pytest.approx((weight * bce).sum() / weight.sum(), rel=1e-6)


def test_entropy_weights_gradient_is_reversed_and_scaled():
    p = torch.softmax(torch.randn(5, 4), 1).requires_grad_(True)
    c = torch.randn(5)
    g, = torch.autograd.grad((entropy_weights(p, coeff=0.4) * c).sum(), p)
    q = p.detach().clone().requires_grad_(True)
    h = -(q * torch.log(q + 1e-5)).sum(1)
    w = 1 + torch.exp(-h)
    g_ref, = torch.autograd.grad((w / w.detach().mean() * c).sum(), q)
    torch.testing.assert_close(g, -0.4 * g_ref)


# -- BSP -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2])
def test_bsp_against_numpy_svd(k):
    rng = np.random.default_rng(3)
    hs, ht = rng.normal(size=(6, 4)), rng.normal(size=(5, 4)) * 2
    ref = sum((np.linalg.svd(h, compute_uv=False)[:k] ** 2).sum() for h in (hs, ht))
    assert float(bsp_loss(torch.tensor(hs), torch.tensor(ht), k=k)) == pytest.approx(ref, rel=1e-10)


def test_bsp_gradient_is_two_sigma_u_v():
    rng = np.random.default_rng(4)
    hs = torch.tensor(rng.normal(size=(5, 3)), requires_grad=True)
    ht = torch.tensor(rng.normal(size=(5, 3)))
    bsp_loss(hs, ht).backward()
    U, S, Vt = np.linalg.svd(_np(hs))
    np.testing.assert_allclose(_np(hs.grad), 2 * S[0] * np.outer(U[:, 0], Vt[0]), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("h", [torch.ones(1, 4), torch.zeros(3, 4), torch.ones(4, 4), torch.tensor([[3.0, 4.0]])])
def test_bsp_finite_on_degenerate_batches(h):
    """A batch of one sample, of zeros, of equal rows (repeated zero singular values): finite value and gradient."""
    h = h.clone().requires_grad_(True)
    loss = bsp_loss(h, h * 0.5)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(h.grad).all()
    if h.shape == (1, 2):
        assert float(loss.detach()) == pytest.approx(25 + 6.25)    # sigma = ||row|| = 5 and 2.5


# -- adaptive feature norms (HAFN, SAFN) ---------------------------------------------------------------
def test_hafn_against_numpy_and_direction():
    rng = np.random.default_rng(5)
    H = rng.normal(size=(7, 10))
    h = torch.tensor(H, requires_grad=True)
    loss = hafn_loss(h, radius=25.0)
    assert float(loss.detach()) == pytest.approx((np.linalg.norm(H, axis=1).mean() - 25.0) ** 2, rel=1e-12)
    loss.backward()
    # d/dh_i = 2 (mean - R) / n * h_i / ||h_i||: norms below R are pushed outwards (gradient points inwards)
    n = np.linalg.norm(H, axis=1, keepdims=True)
    np.testing.assert_allclose(_np(h.grad), 2 * (n.mean() - 25.0) / 7 * H / n, rtol=1e-10)
    assert (np.sum(_np(h.grad) * H, 1) < 0).all()


def test_safn_value_is_delta_squared_and_gradient_steps_each_norm():
    rng = np.random.default_rng(6)
    H = rng.normal(size=(4, 6)) * np.array([[0.1], [1.0], [5.0], [20.0]])
    h = torch.tensor(H, requires_grad=True)
    loss = safn_loss(h, delta_r=1.0)
    assert float(loss.detach()) == pytest.approx(1.0)             # (||h|| - (||h|| + 1))^2 = 1 for every row
    loss.backward()
    n = np.linalg.norm(H, axis=1, keepdims=True)
    np.testing.assert_allclose(_np(h.grad), -2 * 1.0 / 4 * H / n, rtol=1e-10)
    # a gradient step of size eta raises each norm by 2 eta / n whatever its current value (stepwise)
    assert safn_loss(h.detach(), delta_r=0.5).item() == pytest.approx(0.25)


@pytest.mark.parametrize("fn", [lambda h: hafn_loss(h), lambda h: safn_loss(h)])
def test_feature_norm_finite_on_zero_rows_and_one_sample(fn):
    for h in (torch.zeros(3, 5), torch.zeros(1, 5), torch.randn(1, 5)):
        h = h.clone().requires_grad_(True)
        loss = fn(h)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(h.grad).all()


# -- PADA class weights --------------------------------------------------------------------------------
def test_pada_weights_from_an_unbalanced_prediction_matrix():
    # 5 target samples, 4 source classes; class 3 is never predicted (an outlier class), class 0 dominates
    P = np.array([[0.8, 0.1, 0.1, 0.0],
                  [0.7, 0.2, 0.1, 0.0],
                  [0.6, 0.3, 0.1, 0.0],
                  [0.1, 0.8, 0.1, 0.0],
                  [0.2, 0.2, 0.5, 0.1]])
    # by hand: column means = [2.4, 1.6, 0.9, 0.1] / 5; divided by the largest (0.48)
    expected = [1.0, 1.6 / 2.4, 0.9 / 2.4, 0.1 / 2.4]
    w = pada_class_weights(torch.tensor(P))
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(pada_class_weights(torch.tensor(P.mean(0))).numpy(), expected, rtol=1e-6)
    assert w.dtype == torch.float32 and float(w.max()) == 1.0


def test_pada_weights_degenerate_inputs():
    assert pada_class_weights(torch.zeros(3, 4)).tolist() == [1.0] * 4
    one_class = pada_class_weights(torch.tensor([[0.0, 1.0, 0.0]]))
    assert one_class.tolist() == [0.0, 1.0, 0.0]


# -- IWAN importance weights ---------------------------------------------------------------------------
def test_iwan_weights_against_numpy():
    d = torch.tensor([[4.0], [0.0], [-2.0], [30.0]], requires_grad=True)  # the last: certainly source (outlier)
    w = iwan_weights(d)
    raw = 1 - _sigmoid(np.array([4.0, 0.0, -2.0, 30.0]))
    np.testing.assert_allclose(_np(w), raw / (raw.mean() + 1e-5), rtol=1e-6, atol=1e-6)
    assert not w.requires_grad and float(w[3]) < 1e-6 and float(w.mean()) == pytest.approx(1.0, abs=1e-4)
    assert torch.isfinite(iwan_weights(torch.full((3,), 100.0))).all()   # all weights ~0: no division by zero


# -- ETN: leaky softmax and transferability weights ------------------------------------------------------
def test_leaky_softmax_against_numpy_and_its_documented_example():
    probs, dom = leaky_softmax(torch.zeros(3, 9), 1.0)      # easydl's example: 0.1 over 9 classes
    np.testing.assert_allclose(probs.numpy(), np.full((3, 9), 0.1), rtol=1e-6)
    np.testing.assert_allclose(dom.numpy(), np.full(3, 0.9), rtol=1e-6)
    rng = np.random.default_rng(7)
    Z = rng.normal(size=(4, 5)) * 3
    probs, dom = leaky_softmax(torch.tensor(Z), 5)
    ref = np.exp(Z) / (np.exp(Z).sum(1, keepdims=True) + 5)
    np.testing.assert_allclose(_np(probs), ref, rtol=1e-10)
    np.testing.assert_allclose(_np(dom), ref.sum(1), rtol=1e-10)
    big, dom_big = leaky_softmax(torch.tensor([[1000.0, -1000.0]]), 2)
    assert torch.isfinite(big).all() and 0 < float(dom_big) <= 1


def test_leaky_softmax_domain_stays_a_probability_in_float32():
    """Confident float32 logits (31 classes, as on Office-31): the sum of the c leaky probabilities rounds above 1 in
    some rows, which ``binary_cross_entropy`` refuses (an ETN run stopped on it); D~ stays in [0, 1] and equals
    S / (S + c) computed in float64."""
    z = torch.randn(400, 31, generator=torch.Generator().manual_seed(0)) * 20 + 30
    probs, dom = leaky_softmax(z, 31)
    full = torch.softmax(torch.cat([z, torch.full_like(z[:, :1], np.log(31.0))], 1), 1)
    assert (full[:, :-1].sum(1) > 1).any()                       # the rounding the complement avoids
    assert float(dom.max()) <= 1 and float(dom.min()) >= 0
    Z = z.double().numpy()
    S = np.exp(Z - Z.max(1, keepdims=True)).sum(1)
    np.testing.assert_allclose(_np(dom), S / (S + 31 * np.exp(-Z.max(1))), rtol=1e-6)
    torch.nn.functional.binary_cross_entropy(dom, torch.ones_like(dom))   # accepted


def test_etn_weights_against_numpy():
    d = torch.tensor([0.9, 0.5, 0.1, 1.0], requires_grad=True)
    raw = 1 - np.array([0.9, 0.5, 0.1, 1.0])
    w = etn_weights(d)
    np.testing.assert_allclose(_np(w), raw / (raw.mean() + 1e-10), rtol=1e-6, atol=1e-7)
    assert not w.requires_grad
