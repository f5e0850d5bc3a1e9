"""The comparison methods as registered methods (dmp/methods/{dann,cdan,bsp,hafn,safn,pada}.py): each method's
per-step terms against an independent computation written here, `python -m dmp train method=<each>` on a tiny
synthetic task, the logged objective, finite numbers on one-class and tiny batches, and a resumed run identical
to an uninterrupted one for every method with state (discriminator, random map, class weights)."""
import csv
import dataclasses
import math

import numpy as np
import pytest
import torch

import dmp.train
from dmp import methods
from dmp.cli import main
from dmp.config import resolve
from dmp.data.inputs import TensorDataset
from dmp.losses import DomainDiscriminator
from dmp.methods.base import StepContext
from dmp.train import train
from tests.synthetic import shift_task, small_cfg

BASELINES = ("dann", "cdan", "cdan_e", "bsp_dann", "bsp_cdan", "hafn", "safn", "pada", "iwan", "san", "etn")
# the objective of each method, typed from the papers (docs/method.md, "Comparison methods"): {term: weight}
PAPER_WEIGHTS = {"dann": {"transfer": 1.0}, "cdan": {"transfer": 1.0}, "cdan_e": {"transfer": 1.0},
                 "bsp_dann": {"transfer": 1.0, "bsp": 1e-4}, "bsp_cdan": {"transfer": 1.0, "bsp": 1e-4},
                 "hafn": {"norm": 0.05}, "safn": {"norm": 0.05}, "pada": {"transfer": 1.0},
                 "iwan": {"weight_disc": 4.5, "transfer": 3.0, "entropy": 0.1},
                 "san": {"transfer": 1.0, "entropy": 0.2},
                 "etn": {"transfer": 2.0, "entropy": 0.2, "aux_domain": 10.0, "aux_ce": 1.0}}


def _np(t):
    return t.detach().double().cpu().numpy()


def _v(t):
    return float(t.detach())


def _bce(z, y):
    return np.logaddexp(0, -z) if y == 1 else np.logaddexp(0, z)


def _read_log(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _ctx(method, dims=(8, 5), classes=4, n=6, progress=0.3, mean_prediction=None, seed=0, iteration=3, train=False,
         logits_grad=False, **over):
    """A StepContext on random tensors, with the method's modules built (in eval mode, no dropout, unless ``train``;
    ``logits_grad``: the logits are leaves with ``requires_grad``; ``over``: config keys)."""
    g = torch.Generator().manual_seed(seed)
    cfg = resolve(small_cfg(method=method, bottleneck_dims=list(dims), **over))
    m = methods.get(method)
    mods = m.build_modules(cfg, list(dims), classes)
    if mods is not None:
        mods.train(train)
    feats_s = [torch.randn(n, d, generator=g, requires_grad=True) for d in dims]
    feats_t = [torch.randn(n, d, generator=g, requires_grad=True) for d in dims]
    logits_s, logits_t = (torch.randn(n, classes, generator=g).requires_grad_(logits_grad) for _ in "st")
    y_s = torch.tensor([0, 0, 0, 1, 2, 3][:n])
    return m, StepContext(cfg=cfg, iteration=iteration, progress=progress, sched={"anchor_period": 2}, num_classes=classes,
                          device=torch.device("cpu"), feats_s=feats_s, logits_s=logits_s, y_s=y_s, feats_t=feats_t,
                          logits_t=logits_t, p_t=torch.softmax(logits_t, 1), mean_prediction=mean_prediction,
                          modules=mods)


def _disc(ctx, x):
    return _np(ctx.modules["discriminator"](torch.as_tensor(x, dtype=torch.float32)).reshape(-1))


# -- the registry --------------------------------------------------------------------------------------
def test_every_comparison_method_is_registered_with_label_paper_and_sources():
    for name in BASELINES:
        m = methods.get(name)
        assert m.label and m.paper
        for key, param in methods.scoped_params(name).items():
            assert param.source, f"{name}: {key} has no source"
    assert [methods.label(n) for n in ("cdan_e", "bsp_dann", "bsp_cdan")] == ["CDAN+E", "BSP+DANN", "BSP+CDAN"]
    cfg = resolve(small_cfg(method="bsp_cdan"))
    assert methods.get("bsp_cdan").weights(cfg) == PAPER_WEIGHTS["bsp_cdan"]
    assert {k: cfg[k] for k in ("dann_hidden", "cdan_random_dim", "bsp_k")} == {"dann_hidden": 1024,
                                                                               "cdan_random_dim": 1024, "bsp_k": 1}


# -- each method's terms against an independent computation ---------------------------------------------
def test_dann_term_is_the_bce_of_the_discriminator_on_the_last_layer():
    m, ctx = _ctx("dann")
    d = _disc(ctx, torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]]))
    ref = 0.5 * (_bce(d[:6], 1).mean() + _bce(d[6:], 0).mean())
    assert _v(m.losses(ctx)["transfer"]) == pytest.approx(ref, rel=1e-5)


def test_dann_reverses_the_gradient_with_the_scheduled_coefficient():
    """The features receive -lambda_p times the gradient that descends the domain loss; the first layer none."""
    m, ctx = _ctx("dann", progress=0.25)
    loss = m.losses(ctx)["transfer"]
    g_rev, = torch.autograd.grad(loss, ctx.feats_s[-1])
    f = ctx.feats_s[-1].detach().clone().requires_grad_(True)
    d = ctx.modules["discriminator"](torch.cat([f, ctx.feats_t[-1].detach()])).reshape(-1)
    plain = 0.5 * (torch.nn.functional.softplus(-d[:6]).mean() + torch.nn.functional.softplus(d[6:]).mean())
    g_plain, = torch.autograd.grad(plain, f)
    torch.testing.assert_close(g_rev, -math.tanh(5 * 0.25) * g_plain)
    assert ctx.feats_s[0].grad is None


@pytest.mark.parametrize("entropy", [False, True])
def test_cdan_term_against_numpy_multilinear_map_and_entropy_weights(entropy):
    m, ctx = _ctx("cdan_e" if entropy else "cdan")
    assert "map" not in ctx.modules                      # 5 x 4 = 20 <= 4096: the full multilinear map
    f = np.concatenate([_np(ctx.feats_s[-1]), _np(ctx.feats_t[-1])])
    logits = np.concatenate([_np(ctx.logits_s), _np(ctx.logits_t)])
    P = np.exp(logits - logits.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    d = _disc(ctx, np.einsum("nc,nd->ncd", P, f).reshape(12, -1))
    bce = np.concatenate([_bce(d[:6], 1), _bce(d[6:], 0)])
    if entropy:  # the official weighting: per-domain sums, then sum(weight * bce) / sum(weight)
        w = 1 + np.exp((P * np.log(P + 1e-5)).sum(1))
        weight = np.concatenate([w[:6] / w[:6].sum(), w[6:] / w[6:].sum()])
        ref = (weight * bce).sum() / weight.sum()
    else:
        ref = bce.mean()
    assert _v(m.losses(ctx)["transfer"]) == pytest.approx(ref, rel=1e-5)


def _randomized_disc(ctx, dim):
    """The target softmax rows ``P`` of both domains and the discriminator's logits on CDAN's randomized map
    ``(R_f f) * (R_g P) / sqrt(dim)``, in numpy."""
    mods = ctx.modules
    f = np.concatenate([_np(ctx.feats_s[-1]), _np(ctx.feats_t[-1])])
    logits = np.concatenate([_np(ctx.logits_s), _np(ctx.logits_t)])
    P = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return P, _disc(ctx, (f @ _np(mods["map"].r_f)) * (P @ _np(mods["map"].r_g)) / math.sqrt(dim))


def test_cdan_randomized_above_4096_against_numpy():
    m, ctx = _ctx("cdan_e", dims=(8, 1025), classes=4)  # 1025 x 4 = 4100 > 4096
    mods = ctx.modules
    assert tuple(mods["map"].r_f.shape) == (1025, 1024) and mods["discriminator"].hidden[0].in_features == 1024
    P, d = _randomized_disc(ctx, 1024)
    w = 1 + np.exp((P * np.log(P + 1e-5)).sum(1))
    ref = 0.5 * ((w[:6] * _bce(d[:6], 1)).sum() / w[:6].sum() + (w[6:] * _bce(d[6:], 0)).sum() / w[6:].sum())
    assert _v(m.losses(ctx)["transfer"]) == pytest.approx(ref, rel=1e-4)
    # the matrices are a function of the run's seed, not of the global random state
    torch.manual_seed(123)
    _, again = _ctx("cdan_e", dims=(8, 1025), classes=4)
    assert torch.equal(again.modules["map"].r_f, mods["map"].r_f)


@pytest.mark.parametrize("method", ["bsp_dann", "bsp_cdan"])
def test_bsp_term_is_the_top_singular_values_of_the_last_layer(method):
    m, ctx = _ctx(method)
    ref = sum(np.linalg.svd(_np(h[-1]), compute_uv=False)[0] ** 2 for h in (ctx.feats_s, ctx.feats_t))
    out = m.losses(ctx)
    assert set(out) == {"transfer", "bsp"} and _v(out["bsp"]) == pytest.approx(ref, rel=1e-5)
    base = methods.get("dann" if method == "bsp_dann" else "cdan_e")
    assert _v(out["transfer"]) == pytest.approx(_v(base.losses(ctx)["transfer"]), rel=1e-6)


def test_hafn_and_safn_terms_on_both_domains():
    m, ctx = _ctx("hafn")
    ns, nt = (np.linalg.norm(_np(h[-1]), axis=1) for h in (ctx.feats_s, ctx.feats_t))
    assert _v(m.losses(ctx)["norm"]) == pytest.approx((ns.mean() - 25) ** 2 + (nt.mean() - 25) ** 2, rel=1e-6)
    m, ctx = _ctx("safn")
    out = m.losses(ctx)["norm"]
    assert _v(out) == pytest.approx(2.0)              # delta_r^2 per domain
    out.backward()
    H = _np(ctx.feats_t[-1])
    np.testing.assert_allclose(_np(ctx.feats_t[-1].grad), -2 / 6 * H / np.linalg.norm(H, axis=1, keepdims=True),
                               rtol=1e-5)


def test_pada_weights_the_source_ce_and_the_source_side_of_the_domain_loss():
    mean_prediction = torch.tensor([0.6, 0.3, 0.1, 0.0])   # class 3: an outlier class never predicted
    m, ctx = _ctx("pada", mean_prediction=mean_prediction)
    gamma = np.array([1.0, 0.5, 1 / 6, 0.0])[_np(ctx.y_s).astype(int)]
    L = _np(ctx.logits_s)
    ce = np.log(np.exp(L).sum(1)) - L[np.arange(6), _np(ctx.y_s).astype(int)]
    d = _disc(ctx, torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]]))
    out = m.losses(ctx)
    assert _v(out["ce_weighted"]) == pytest.approx((gamma * ce).mean(), rel=1e-5)
    assert _v(out["transfer"]) == pytest.approx(0.5 * ((gamma * _bce(d[:6], 1)).mean() + _bce(d[6:], 0).mean()),
                                                   rel=1e-5)
    ce_t = torch.nn.functional.cross_entropy(ctx.logits_s, ctx.y_s)
    assert _v(m.total(ce_t, out, ctx)) == pytest.approx(_v(out["ce_weighted"] + out["transfer"]), rel=1e-6)
    # pada_ce=code: the official code's weighted mean, sum gamma CE / sum gamma (its scale does not shrink with gamma)
    m, ctx = _ctx("pada", mean_prediction=mean_prediction, pada_ce="code")
    assert _v(m.losses(ctx)["ce_weighted"]) == pytest.approx((gamma * ce).sum() / gamma.sum(), rel=1e-5)
    # before the first refresh: uniform weights, PADA is DANN
    m, ctx = _ctx("pada")
    assert _v(m.losses(ctx)["ce_weighted"]) == pytest.approx(ce.mean(), rel=1e-5)
    # the refresh at iteration 0 (an untrained classifier) is not used: uniform until iteration anchor_period (2)
    for iteration, expected in ((0, ce.mean()), (1, ce.mean()), (2, (gamma * ce).mean())):
        m, ctx = _ctx("pada", mean_prediction=mean_prediction, iteration=iteration)
        assert _v(m.losses(ctx)["ce_weighted"]) == pytest.approx(expected, rel=1e-5)


def test_iwan_terms_against_numpy_and_where_their_gradients_go():
    m, ctx = _ctx("iwan")
    mods = ctx.modules
    f = torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]])
    d_w = _np(mods["weight_discriminator"](f).reshape(-1))
    d_0 = _disc(ctx, f)
    raw = 1 - 1 / (1 + np.exp(-d_w[:6]))
    w = raw / (raw.mean() + 1e-5)
    P = _np(ctx.p_t)
    out = m.losses(ctx)
    assert _v(out["weight_disc"]) == pytest.approx(0.5 * (_bce(d_w[:6], 1).mean() + _bce(d_w[6:], 0).mean()), rel=1e-5)
    assert _v(out["transfer"]) == pytest.approx(0.5 * ((w * _bce(d_0[:6], 1)).mean() + _bce(d_0[6:], 0).mean()),
                                                rel=1e-5)
    assert _v(out["entropy"]) == pytest.approx(-(P * np.log(P)).sum(1).mean(), rel=1e-5)
    # D learns on detached features: its loss trains D only; the weighted game never trains D
    assert torch.autograd.grad(out["weight_disc"], ctx.feats_s[-1], allow_unused=True)[0] is None
    grads = torch.autograd.grad(out["transfer"], list(mods["weight_discriminator"].parameters()), allow_unused=True)
    assert all(g is None for g in grads)


def test_san_terms_and_per_class_reversed_gradients_against_an_independent_computation():
    m, ctx = _ctx("san", progress=0.2)
    discs = ctx.modules["discriminators"]
    assert len(discs) == 4
    f = torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]]).detach()
    logits = np.concatenate([_np(ctx.logits_s), _np(ctx.logits_t)])
    P = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    gamma = P.mean(0) / P.mean(0).max()
    out = m.losses(ctx)
    ref, grad_ref = 0.0, np.zeros((6, 5))
    for k, disc in enumerate(discs):
        fk = f.clone().requires_grad_(True)
        d = disc(fk * torch.tensor(P[:, k:k + 1], dtype=torch.float32)).reshape(-1)
        lk = 0.5 * (torch.nn.functional.softplus(-d[:6]).mean() + torch.nn.functional.softplus(d[6:]).mean())
        ref += _v(lk)
        grad_ref += -math.tanh(5 * 0.2) * gamma[k] * _np(torch.autograd.grad(lk, fk)[0])[:6]
    assert _v(out["transfer"]) == pytest.approx(ref, rel=1e-5)
    assert _v(out["entropy"]) == pytest.approx(-(P * np.log(P)).sum(1).mean(), rel=1e-5)
    g, = torch.autograd.grad(out["transfer"], ctx.feats_s[-1])
    np.testing.assert_allclose(_np(g), grad_ref, rtol=1e-4, atol=1e-7)


def test_etn_terms_against_numpy_and_where_their_gradients_go():
    m, ctx = _ctx("etn")
    mods = ctx.modules
    f = torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]])
    Z = _np(mods["auxiliary"](f))
    Q = np.exp(Z) / (np.exp(Z).sum(1, keepdims=True) + 4)   # leaky softmax, coeff = 4 classes
    D = Q.sum(1)
    w = (1 - D[:6]) / ((1 - D[:6]).mean() + 1e-10)
    y = _np(ctx.y_s).astype(int)
    L = _np(ctx.logits_s)
    ce = np.log(np.exp(L).sum(1)) - L[np.arange(6), y]
    d = _disc(ctx, f)
    Y = np.eye(4)[y]
    P = _np(ctx.p_t)
    out = m.losses(ctx)
    assert _v(out["ce_weighted"]) == pytest.approx((w * ce).mean(), rel=1e-5)
    assert _v(out["transfer"]) == pytest.approx(0.5 * ((w * _bce(d[:6], 1)).mean() + _bce(d[6:], 0).mean()), rel=1e-5)
    assert _v(out["aux_domain"]) == pytest.approx(-np.log(D[:6]).mean() - np.log(1 - D[6:]).mean(), rel=1e-5)
    assert _v(out["aux_ce"]) == pytest.approx(-(Y * np.log(Q[:6]) + (1 - Y) * np.log(1 - Q[:6])).sum() / 6,
                                              rel=1e-5)
    assert _v(out["entropy"]) == pytest.approx(-(P * np.log(P)).sum(1).mean(), rel=1e-5)
    # the auxiliary predictor learns on detached features; the weighted game does not train it
    for t in ("aux_domain", "aux_ce"):
        assert torch.autograd.grad(out[t], ctx.feats_s[-1], allow_unused=True)[0] is None
    grads = torch.autograd.grad(out["transfer"], list(mods["auxiliary"].parameters()), allow_unused=True)
    assert all(g is None for g in grads)
    terms = {k: torch.tensor(_v(x)) for k, x in out.items()}
    expected = _v(out["ce_weighted"]) + 2 * _v(out["transfer"]) + 0.2 * _v(out["entropy"]) \
        + 10 * _v(out["aux_domain"]) + _v(out["aux_ce"])
    assert _v(m.total(torch.tensor(9.0), terms, ctx)) == pytest.approx(expected, rel=1e-6)


# -- the discriminators' dropout masks (modules in train mode) ------------------------------------------
ADVERSARIAL = {"dann": 1, "cdan": 1, "cdan_e": 1, "bsp_dann": 1, "bsp_cdan": 1, "pada": 1, "iwan": 2, "san": 4,
               "etn": 2}  # discriminator calls per step (SAN: one per class, 4 here)


@pytest.fixture
def disc_calls(monkeypatch):
    """Every DomainDiscriminator call: (module, the first numbers the generator it draws its masks from gives (None:
    the global one), its output)."""
    calls = []
    real = DomainDiscriminator.forward

    def spy(self, x, generator=None):
        state = None if generator is None else torch.rand(64, generator=torch.Generator().set_state(
            generator.get_state()))  # the draws, not the state: a state also holds the seed the draws may ignore
        out = real(self, x, generator=generator)
        calls.append((self, state, out.detach().clone()))
        return out

    monkeypatch.setattr(DomainDiscriminator, "forward", spy)
    return calls


@pytest.mark.parametrize("method", ADVERSARIAL)
def test_dropout_masks_depend_on_the_seed_and_the_iteration_only_and_differ_between_discriminators(method,
                                                                                                   disc_calls):
    m, ctx = _ctx(method, train=True, mean_prediction=torch.tensor([0.6, 0.3, 0.1, 0.0]))

    def step(**change):
        disc_calls.clear()
        out = m.losses(dataclasses.replace(ctx, **change))
        assert len(disc_calls) == ADVERSARIAL[method]
        return [s for _, s, _ in disc_calls], {k: _v(v) for k, v in out.items()}

    torch.manual_seed(1)
    masks, values = step()
    torch.manual_seed(2)  # the global generator in another state: the same masks, the same numbers
    again, values_again = step()
    assert all(s is not None for s in masks), "a discriminator drew its masks from the global generator"
    assert all(torch.equal(a, b) for a, b in zip(masks, again)) and values_again == values
    for change in ({"iteration": 4}, {"cfg": {**ctx.cfg, "seed": 1}}):  # another step, another run: other masks
        other, other_values = step(**change)
        assert not any(torch.equal(a, b) for a, b in zip(masks, other)), change
        assert other_values["transfer"] != values["transfer"], change
    # the discriminators of one step draw different masks (IWAN's two, ETN's two, SAN's one per class)
    assert all(not torch.equal(masks[i], masks[j]) for i in range(len(masks)) for j in range(i))
    ctx.modules.eval()
    assert step()[1]["transfer"] != values["transfer"]  # dropout was on in train mode


def test_iwan_two_discriminators_with_equal_weights_still_see_different_masks(disc_calls):
    """Independent of how the masks are drawn: with D_0 a copy of D (same weights, same input values), their
    outputs differ in train mode only because their masks do; in eval mode they are equal."""
    m, ctx = _ctx("iwan", train=True)
    mods = ctx.modules
    mods["discriminator"].load_state_dict(mods["weight_discriminator"].state_dict())
    m.losses(ctx)
    (first, _, d_w), (second, _, d_0) = disc_calls
    assert first is mods["weight_discriminator"] and second is mods["discriminator"]
    assert not torch.allclose(d_w, d_0)
    disc_calls.clear()
    mods.eval()
    m.losses(ctx)
    torch.testing.assert_close(disc_calls[0][2], disc_calls[1][2])


# -- which tensors each term's gradient reaches ---------------------------------------------------------
# The logits a term sends a gradient to (s: source, t: target). The conditioning of CDAN and SAN's instance and
# class weights are detached in the official code; CDAN+E's entropy weights pass a (reversed) gradient to both
# domains' logits; PADA's, IWAN's and ETN's weights are constants; the entropy terms reach the logits they read.
LOGIT_GRADIENTS = {
    "dann": {"transfer": ""}, "cdan": {"transfer": ""}, "cdan_e": {"transfer": "st"},
    "bsp_dann": {"transfer": "", "bsp": ""}, "bsp_cdan": {"transfer": "st", "bsp": ""},
    "hafn": {"norm": ""}, "safn": {"norm": ""}, "pada": {"ce_weighted": "s", "transfer": ""},
    "iwan": {"weight_disc": "", "transfer": "", "entropy": "t"}, "san": {"transfer": "", "entropy": "st"},
    "etn": {"ce_weighted": "s", "transfer": "", "entropy": "t", "aux_domain": "", "aux_ce": ""}}


@pytest.mark.parametrize("method", BASELINES)
def test_which_logits_each_term_sends_a_gradient_to(method):
    m, ctx = _ctx(method, logits_grad=True, mean_prediction=torch.tensor([0.6, 0.3, 0.1, 0.0]))
    out = m.losses(ctx)
    assert set(out) == set(LOGIT_GRADIENTS[method])
    for term, reach in LOGIT_GRADIENTS[method].items():
        grads = torch.autograd.grad(out[term], [ctx.logits_s, ctx.logits_t], retain_graph=True, allow_unused=True)
        got = "".join(side for side, g in zip("st", grads) if g is not None and bool(g.abs().sum() > 0))
        assert got == reach, f"{method}: {term} sends a gradient to the logits {got!r}, expected {reach!r}"


@pytest.mark.parametrize("progress", [0.0, 0.1, 0.6])
def test_cdan_e_entropy_weights_pass_the_reversed_gradient_at_the_scheduled_coefficient(progress):
    """The weights' forward value does not depend on the schedule; the gradient reaching the logits through them is
    -lambda_p times the gradient of the plainly weighted loss (the map's conditioning detached, per-domain
    normalisation by the detached sum), as the official ``entropy.register_hook(grl_hook(coeff))``."""
    m, ctx = _ctx("cdan_e", progress=progress, logits_grad=True)
    out = m.losses(ctx)["transfer"]
    g_s, g_t = torch.autograd.grad(out, [ctx.logits_s, ctx.logits_t])
    logits = torch.cat([ctx.logits_s, ctx.logits_t]).detach().requires_grad_(True)
    P = torch.softmax(logits, 1)
    w = 1 + torch.exp((P * torch.log(P + 1e-5)).sum(1))
    f = torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]]).detach()
    d = ctx.modules["discriminator"]((P.detach().unsqueeze(2) * f.unsqueeze(1)).reshape(12, -1)).reshape(-1)
    bce = torch.cat([torch.nn.functional.softplus(-d[:6]), torch.nn.functional.softplus(d[6:])])
    plain = 0.5 * sum((w[k] * bce[k]).sum() / w[k].detach().sum() for k in (slice(0, 6), slice(6, 12)))
    assert _v(out) == pytest.approx(_v(plain), rel=1e-5)
    g_plain, = torch.autograd.grad(plain, logits)
    coeff = math.tanh(5 * progress)  # 2 / (1 + exp(-10 p)) - 1
    torch.testing.assert_close(torch.cat([g_s, g_t]), -coeff * g_plain, rtol=1e-4, atol=1e-9)
    assert progress == 0 or g_plain.abs().max() > 1e-4  # the comparison is not between zeros


# -- every option of every method, and trade-offs other than one ----------------------------------------
OPTIONS = {"dann_trade_off": 0.7, "dann_hidden": 16, "cdan_random_dim": 64, "bsp_weight": 0.3, "bsp_k": 2,
           "afn_weight": 0.11, "hafn_radius": 3.0, "safn_delta_r": 0.5, "iwan_trade_off": 1.7,
           "iwan_entropy_weight": 0.37, "san_entropy_weight": 0.45, "etn_entropy_weight": 0.6,
           "etn_aux_domain_weight": 3.0, "etn_aux_ce_weight": 0.8, "pada_ce": "code"}  # none at its default


def _objective(method, o, ce, t):
    """Each method's objective with its options ``o``, typed from docs/method.md ("Comparison methods")."""
    tr = o["dann_trade_off"]
    return {
        "dann": lambda: ce + tr * t["transfer"], "cdan": lambda: ce + tr * t["transfer"],
        "cdan_e": lambda: ce + tr * t["transfer"],
        "bsp_dann": lambda: ce + tr * t["transfer"] + o["bsp_weight"] * t["bsp"],
        "bsp_cdan": lambda: ce + tr * t["transfer"] + o["bsp_weight"] * t["bsp"],
        "hafn": lambda: ce + o["afn_weight"] * t["norm"], "safn": lambda: ce + o["afn_weight"] * t["norm"],
        "pada": lambda: t["ce_weighted"] + tr * t["transfer"],
        "iwan": lambda: ce + 1.5 * o["iwan_trade_off"] * t["weight_disc"] + o["iwan_trade_off"] * t["transfer"]
        + o["iwan_entropy_weight"] * t["entropy"],
        "san": lambda: ce + tr * (t["transfer"] + o["san_entropy_weight"] * t["entropy"]),
        "etn": lambda: t["ce_weighted"] + 2 * tr * t["transfer"] + o["etn_entropy_weight"] * t["entropy"]
        + o["etn_aux_domain_weight"] * t["aux_domain"] + o["etn_aux_ce_weight"] * t["aux_ce"],
    }[method]()


@pytest.mark.parametrize("method", BASELINES)
def test_the_objective_at_options_other_than_the_defaults(method):
    scoped = methods.scoped_params(method)
    assert set(scoped) <= set(OPTIONS), f"{method}: add {set(scoped) - set(OPTIONS)} to OPTIONS"
    assert all(OPTIONS[k] != p.default for k, p in scoped.items())
    over = {k: OPTIONS[k] for k in scoped}
    m, ctx = _ctx(method, **over)
    terms = {t: torch.tensor(1.0 + 0.37 * i) for i, t in enumerate(m.terms)}  # distinct: a swapped weight shows
    expected = _objective(method, {**OPTIONS, **over}, 9.0, {k: _v(v) for k, v in terms.items()})
    assert _v(m.total(torch.tensor(9.0), terms, ctx)) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("method, key", [(m, k) for m in BASELINES for k in methods.scoped_params(m)])
def test_no_option_of_a_method_is_ignored(method, key):
    """Changing any one of a method's options changes its step: the terms, the objective or the modules."""
    dims = (8, 1025) if key == "cdan_random_dim" else (8, 5)  # the randomized map only above 4096

    def step(**over):
        torch.manual_seed(0)  # the same module initialisation
        m, ctx = _ctx(method, dims=dims, mean_prediction=torch.tensor([0.6, 0.3, 0.1, 0.0]), **over)
        out = m.losses(ctx)
        shapes = [tuple(p.shape) for p in ctx.modules.state_dict().values()] if ctx.modules is not None else []
        return [_v(m.total(torch.tensor(1.0), out, ctx)), *(_v(v) for v in out.values())], shapes

    assert step() != step(**{key: OPTIONS[key]}), f"{method} ignores {key}"


def test_the_options_that_are_not_weights_as_their_papers_define_them():
    m, ctx = _ctx("bsp_dann", bsp_k=2)
    ref = sum((np.linalg.svd(_np(h[-1]), compute_uv=False)[:2] ** 2).sum() for h in (ctx.feats_s, ctx.feats_t))
    assert _v(m.losses(ctx)["bsp"]) == pytest.approx(ref, rel=1e-5)
    m, ctx = _ctx("hafn", hafn_radius=3.0)
    ns, nt = (np.linalg.norm(_np(h[-1]), axis=1) for h in (ctx.feats_s, ctx.feats_t))
    assert _v(m.losses(ctx)["norm"]) == pytest.approx((ns.mean() - 3) ** 2 + (nt.mean() - 3) ** 2, rel=1e-6)
    m, ctx = _ctx("safn", safn_delta_r=0.5)
    out = m.losses(ctx)["norm"]
    assert _v(out) == pytest.approx(2 * 0.5 ** 2)
    out.backward()
    H = _np(ctx.feats_s[-1])
    np.testing.assert_allclose(_np(ctx.feats_s[-1].grad), -2 * 0.5 / 6 * H / np.linalg.norm(H, axis=1, keepdims=True),
                               rtol=1e-5)
    for method in ADVERSARIAL:
        _, ctx = _ctx(method, dann_hidden=16)
        discs = [d for d in ctx.modules.modules() if isinstance(d, DomainDiscriminator)]
        assert len(discs) == ADVERSARIAL[method]
        assert all([layer.out_features for layer in d.hidden] == [16, 16] for d in discs), method
    m, ctx = _ctx("cdan", dims=(8, 1025), cdan_random_dim=64)
    mods = ctx.modules
    assert tuple(mods["map"].r_f.shape) == (1025, 64) and mods["discriminator"].hidden[0].in_features == 64
    P, d = _randomized_disc(ctx, 64)
    assert _v(m.losses(ctx)["transfer"]) == pytest.approx(0.5 * (_bce(d[:6], 1).mean() + _bce(d[6:], 0).mean()),
                                                          rel=1e-4)


# -- the command line, the logged objective, numerics -------------------------------------------------
@pytest.mark.parametrize("method", BASELINES)
def test_cli_trains_each_method_and_logs_its_objective(method, tmp_path, monkeypatch, capsys):
    real = dmp.train.train
    monkeypatch.setattr(dmp.train, "train", lambda user, out, progress: real(
        {**small_cfg(iterations=6, log_every=1, checkpoint_every=6), **user}, out, task=shift_task(),
        progress=False))
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--out", str(tmp_path), "--quiet", f"method={method}"])
    assert exit_.value.code == 0 and "target accuracy" in capsys.readouterr().out
    rows = _read_log(tmp_path / "log.csv")
    terms = methods.get(method).terms
    assert len(rows) == 6 and list(rows[0]) == ["iteration", "lr", "loss", "ce", *terms]
    for r in rows:
        v = {k: float(x) for k, x in r.items()}
        assert all(math.isfinite(x) for x in v.values())
        ce = v.get("ce_weighted", v["ce"])  # PADA and ETN minimise a weighted source cross-entropy
        expected = ce + sum(w * v[t] for t, w in PAPER_WEIGHTS[method].items())
        assert v["loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("method, keys", [
    ("bsp_dann", {"bsp_weight": 0.5, "dann_trade_off": 2.0}),
    ("san", {"dann_trade_off": 2.0, "san_entropy_weight": 0.5}),
    ("iwan", {"iwan_trade_off": 2.0, "iwan_entropy_weight": 0.5}),
    ("etn", {"dann_trade_off": 0.5, "etn_entropy_weight": 0.3, "etn_aux_domain_weight": 2.0,
             "etn_aux_ce_weight": 0.7})])
def test_a_method_key_from_the_command_line_reaches_the_objective(tmp_path, monkeypatch, method, keys):
    real = dmp.train.train
    monkeypatch.setattr(dmp.train, "train", lambda user, out, progress: real(
        {**small_cfg(iterations=3, log_every=1, checkpoint_every=3), **user}, out, task=shift_task(),
        progress=False))
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--out", str(tmp_path), "--quiet", f"method={method}", *(f"{k}={v}" for k, v in keys.items())])
    assert exit_.value.code == 0
    for r in _read_log(tmp_path / "log.csv"):
        v = {k: float(x) for k, x in r.items()}
        expected = _objective(method, {**OPTIONS, **keys}, v["ce"], v)
        assert v["loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("method", BASELINES)
def test_finite_on_one_class_and_tiny_batches(method, tmp_path):
    """A source with one class only and batches of two samples: every logged number stays finite."""
    task = shift_task(classes=4, per_class=3)
    one = TensorDataset(task.source_train.x.numpy(), np.zeros(len(task.source_train.labels), dtype=np.int64))
    task.source_train = task.source_eval = one
    m = train(small_cfg(method=method, iterations=6, batch_size=2, log_every=1, checkpoint_every=6), tmp_path,
              task=task, progress=False)
    assert all(math.isfinite(float(x)) for r in _read_log(tmp_path / "log.csv") for x in r.values())
    assert math.isfinite(m["accuracy"])


# -- resume identity -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method, dims", [("dann", [32, 16]), ("cdan", [32, 16]), ("cdan_e", [32, 1025]),
                                          ("bsp_dann", [32, 16]), ("bsp_cdan", [32, 16]), ("pada", [32, 16]),
                                          ("iwan", [32, 16]), ("san", [32, 16]), ("etn", [32, 16])])
def test_a_resumed_run_is_identical_to_an_uninterrupted_one(method, dims, tmp_path):
    """Stopped at iteration 12 (after the class-weight refresh of iteration 8, before the next one at 16) and
    resumed: the same log, predictions, discriminator and random map as one run of 20 iterations."""
    narrow = dict(dann_hidden=64, **({"cdan_random_dim": 64} if dims[-1] == 1025 else {}))  # speed only
    cfg = small_cfg(method=method, bottleneck_dims=dims, iterations=20, checkpoint_every=4, log_every=1, **narrow)
    ref = train(cfg, tmp_path / "ref", task=shift_task(), progress=False)
    assert train(cfg, tmp_path / "run", task=shift_task(), progress=False, stop_after=12) is None
    resumed = train(cfg, tmp_path / "run", task=shift_task(), progress=False)
    assert (tmp_path / "ref" / "log.csv").read_text() == (tmp_path / "run" / "log.csv").read_text()
    for key in ("accuracy", "confusion_matrix", "class_weights", "target_mean_prediction"):
        assert resumed[key] == ref[key], key
    a, b = (torch.load(p / "checkpoint.pt", weights_only=False) for p in (tmp_path / "ref", tmp_path / "run"))
    assert a["modules"].keys() == b["modules"].keys() and ("map.r_f" in a["modules"]) == (dims[-1] == 1025)
    for k in a["modules"]:
        assert torch.equal(a["modules"][k], b["modules"][k]), k


def test_every_comparison_method_has_its_row_in_method_md():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "method.md").read_text()
    section = text[text.index("## Comparison methods"):]
    for name in BASELINES:
        assert f"| {methods.label(name)} (`{name}`)" in section or f"(`{name}`)" in section, name
    not_dmp = [n for n in methods.names() if methods.get(n).comparison]   # the registry says, not the name
    assert sorted(not_dmp) == sorted(BASELINES)     # a new comparison method is added to this file's lists too
