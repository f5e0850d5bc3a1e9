"""Tests of dmp.manifolds: fast n x n distances against slow d x d references, hand-computed values, gradients,
and finiteness on degenerate batches (hypothesis)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmp.manifolds import (LE_EPS, METRICS, affine_grassmann_distance, alignment_distance, covariance_spectrum,
                           error_index, error_index_from_spectra, grassmann_distance, log_euclidean_distance)

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors here are tiny: one intra-op thread avoids oversubscription on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ----------------------------------------------------------------------------------------------------------------
# Slow, obviously-correct references: explicit SVD / eigh / scipy logm on d x d matrices, float64.
# ----------------------------------------------------------------------------------------------------------------
def ref_projector(h: np.ndarray, dim: int) -> np.ndarray:
    hc = h - h.mean(axis=0)
    u, _, _ = np.linalg.svd(hc.T, full_matrices=False)  # left singular vectors of the centred H^T
    return u[:, :dim] @ u[:, :dim].T


def ref_grassmann(hs, ht, dim):
    return ((ref_projector(hs, dim) - ref_projector(ht, dim)) ** 2).sum() / hs.shape[1] ** 2


def ref_affine(hs, ht, dim):
    d = hs.shape[1]
    ps, pt, eye = ref_projector(hs, dim), ref_projector(ht, dim), np.eye(d)
    offset = (eye - ps) @ hs.mean(axis=0) - (eye - pt) @ ht.mean(axis=0)
    return (np.linalg.norm(ps - pt, "fro") + np.linalg.norm(offset)) / d ** 2


def ref_cov(h):
    hc = h - h.mean(axis=0)
    return hc.T @ hc / max(h.shape[0] - 1, 1)


def ref_log_euclidean(hs, ht, eps=LE_EPS):
    d = hs.shape[1]
    logs = [scipy.linalg.logm(ref_cov(h) + eps * np.eye(d)).real for h in (hs, ht)]
    return np.linalg.norm(logs[0] - logs[1], "fro") / d ** 2


def torch_ref(metric, hs, ht, dim=None, eps=LE_EPS):
    """Differentiable d x d reference (eigh of the covariance); valid for distinct eigenvalues (n > d + 1)."""
    d = hs.shape[1]

    def cov(h):
        hc = h - h.mean(0)
        return hc.T @ hc / (h.shape[0] - 1)

    if metric == "LE":
        def logm(c):
            lam, v = torch.linalg.eigh(c + eps * torch.eye(d, dtype=F64))
            return (v * lam.log()) @ v.T
        return torch.linalg.matrix_norm(logm(cov(hs)) - logm(cov(ht))) / d ** 2

    def proj(h):
        v = torch.linalg.eigh(cov(h))[1][:, -dim:]
        return v @ v.T
    ps, pt = proj(hs), proj(ht)
    if metric == "G":
        return ((ps - pt) ** 2).sum() / d ** 2
    eye = torch.eye(d, dtype=F64)
    offset = (eye - ps) @ hs.mean(0) - (eye - pt) @ ht.mean(0)
    return (torch.linalg.matrix_norm(ps - pt) + offset.norm()) / d ** 2


def randn(*shape, seed=0, dtype=F64):
    return torch.from_numpy(np.random.default_rng(seed).normal(size=shape)).to(dtype)


# ----------------------------------------------------------------------------------------------------------------
# Agreement with the references
# ----------------------------------------------------------------------------------------------------------------
SHAPES = [(10, 10, 30, None), (10, 10, 30, 4), (8, 12, 5, None), (8, 12, 5, 3), (6, 6, 6, 2), (20, 15, 40, None),
          (2, 2, 7, None), (50, 50, 64, None), (50, 50, 64, 10)]


@pytest.mark.parametrize("ns,nt,d,dim", SHAPES)
def test_values_match_svd_and_logm_references(ns, nt, d, dim):
    hs, ht = randn(ns, d, seed=1), randn(nt, d, seed=2) * 1.5 + 0.3
    k = min(ns - 1, nt - 1, d) if dim is None else dim
    a, b = hs.numpy(), ht.numpy()
    assert grassmann_distance(hs, ht, dim).item() == pytest.approx(ref_grassmann(a, b, k), rel=1e-7, abs=1e-12)
    assert affine_grassmann_distance(hs, ht, dim).item() == pytest.approx(ref_affine(a, b, k), rel=1e-7, abs=1e-9)
    assert log_euclidean_distance(hs, ht).item() == pytest.approx(ref_log_euclidean(a, b), rel=1e-8)
    assert log_euclidean_distance(hs, ht, eps=0.3).item() == pytest.approx(ref_log_euclidean(a, b, 0.3), rel=1e-8)


@pytest.mark.parametrize("metric", ["G", "AG", "LE"])
@pytest.mark.parametrize("ns,nt,d,dim", [(12, 9, 5, 3), (10, 10, 4, 2), (15, 15, 6, 5)])
def test_gradients_match_reference(metric, ns, nt, d, dim):
    hs = randn(ns, d, seed=3).requires_grad_()
    ht = (randn(nt, d, seed=4) * 0.7 + 1.0).requires_grad_()
    fast = grad_pair(lambda a, b: alignment_distance(metric, a, b, dim=dim), hs, ht)
    slow = grad_pair(lambda a, b: torch_ref(metric, a, b, dim=dim), hs, ht)
    for g_fast, g_slow in zip(fast, slow):
        torch.testing.assert_close(g_fast, g_slow, rtol=1e-6, atol=1e-10)


def grad_pair(fn, hs, ht):
    return torch.autograd.grad(fn(hs, ht), (hs, ht))


@pytest.mark.parametrize("metric", ["G", "AG", "LE"])
@pytest.mark.parametrize("ns,nt,d,dim", [(5, 5, 8, None), (7, 5, 3, 2), (6, 6, 8, 2), (2, 3, 4, None)])
def test_gradcheck(metric, ns, nt, d, dim):
    hs = randn(ns, d, seed=5).requires_grad_()
    ht = (randn(nt, d, seed=6) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: alignment_distance(metric, a, b, dim=dim, eps=0.05), (hs, ht))


def test_float32_agrees_with_float64_and_keeps_dtype():
    hs, ht = randn(32, 256, seed=7), randn(32, 256, seed=8) + 0.1
    for metric in METRICS:
        v64 = alignment_distance(metric, hs, ht)
        v32 = alignment_distance(metric, hs.float(), ht.float())
        assert v64.dtype == F64 and v32.dtype == torch.float32
        assert v32.item() == pytest.approx(v64.item(), rel=1e-5)
        assert alignment_distance(metric, hs.float(), ht).dtype == F64  # promoted like torch ops


def test_never_forms_d_by_d_matrices():
    """d = 200000: a d x d float64 matrix would need 320 GB."""
    hs, ht = randn(6, 200_000, seed=9), randn(6, 200_000, seed=10)
    for metric in METRICS:
        assert math.isfinite(alignment_distance(metric, hs, ht).item())


# ----------------------------------------------------------------------------------------------------------------
# Hand-computed values
# ----------------------------------------------------------------------------------------------------------------
def test_hand_example_d3_n3():
    """h_s spans the xy-plane, h_t the yz-plane (d = 3, n = 3, d' = 2): ||P_s - P_t||_F^2 = 2."""
    hs = torch.tensor([[1.0, 0, 0], [-1, 0, 0], [0, 1, 0]], dtype=F64)
    ht = torch.tensor([[0.0, 1, 0], [0, -1, 0], [0, 0, 1]], dtype=F64)
    assert grassmann_distance(hs, ht).item() == pytest.approx(2 / 9, rel=1e-9)
    # offsets (I - P)mu are 0 here; shift s by (0,0,2) and t by (5,0,0): (I-P_s)mu_s = (0,0,2), (I-P_t)mu_t = (5,0,0)
    assert affine_grassmann_distance(hs, ht).item() == pytest.approx(math.sqrt(2) / 9, rel=1e-9)
    shifted_s, shifted_t = hs + torch.tensor([0, 0, 2.0], dtype=F64), ht + torch.tensor([5.0, 0, 0], dtype=F64)
    assert affine_grassmann_distance(shifted_s, shifted_t).item() == pytest.approx((math.sqrt(2) + math.sqrt(29)) / 9,
                                                                                   rel=1e-9)


def test_hand_example_top1_subspace():
    """Covariances diag(8, 2, 0)/3 and diag(0, 18, 2)/3: top-1 directions x and y, ||e_x e_x^T - e_y e_y^T||^2 = 2."""
    hs = torch.tensor([[2.0, 0, 0], [-2, 0, 0], [0, 1, 0], [0, -1, 0]], dtype=F64)
    ht = torch.tensor([[0.0, 3, 0], [0, -3, 0], [0, 0, 1], [0, 0, -1]], dtype=F64)
    assert grassmann_distance(hs, ht, dim=1).item() == pytest.approx(2 / 9, rel=1e-9)
    assert grassmann_distance(hs, ht, dim=2).item() == pytest.approx(2 / 9, rel=1e-9)  # xy-plane vs yz-plane


@pytest.mark.parametrize("d,dim", [(10, 3), (7, 1), (40, 5)])
def test_orthogonal_subspaces_give_2dim_over_d2(d, dim):
    q = torch.linalg.qr(randn(d, 2 * dim, seed=11))[0]
    coef_s, coef_t = randn(dim + 3, dim, seed=12), randn(dim + 3, dim, seed=13)
    hs, ht = coef_s @ q[:, :dim].T, coef_t @ q[:, dim:].T  # rank-dim batches in orthogonal subspaces
    assert grassmann_distance(hs, ht, dim=dim).item() == pytest.approx(2 * dim / d ** 2, rel=1e-8)


def test_same_subspace_gives_zero():
    hs = randn(9, 20, seed=14)
    mix = torch.eye(9, dtype=F64) + 0.3 * randn(9, 9, seed=15)
    mix = mix - (mix.sum(1, keepdim=True) - 1) / 9  # rows sum to 1: same affine hull, same centred row space
    same_affine = mix @ hs
    rescaled = 3.0 * hs[torch.randperm(9, generator=torch.Generator().manual_seed(0))] + 7.0
    for ht in (same_affine, rescaled):
        assert grassmann_distance(hs, ht).item() == pytest.approx(0.0, abs=1e-14)
    # equal projectors: AG is the offset term alone, ||(I - P)(mu_s - mu_t)|| / d^2
    p = torch.from_numpy(ref_projector(hs.numpy(), 8))
    offset = (torch.eye(20, dtype=F64) - p) @ (hs.mean(0) - rescaled.mean(0))
    assert affine_grassmann_distance(hs, rescaled).item() == pytest.approx(offset.norm().item() / 400, rel=1e-7)


def test_affine_reduces_to_unsquared_frobenius_for_zero_means():
    hs, ht = randn(8, 12, seed=16), randn(8, 12, seed=17)
    hs, ht = hs - hs.mean(0), ht - ht.mean(0)
    g = grassmann_distance(hs, ht).item()  # ||P_s - P_t||_F^2 / d^2
    assert affine_grassmann_distance(hs, ht).item() == pytest.approx(math.sqrt(g) / 12, rel=1e-9)


def test_log_euclidean_hand_example_diagonal_covariances():
    """Rows +-a e_i give C = diag(2 a_i^2 / (n - 1)); LE = ||log(l_s + eps) - log(l_t + eps)||_2 / d^2."""
    a_s, a_t = np.array([1.0, 0.5, 0.0]), np.array([0.2, 2.0, 1.0])
    hs, ht = (torch.from_numpy(np.concatenate([np.diag(a), -np.diag(a)])) for a in (a_s, a_t))
    lam_s, lam_t = 2 * a_s ** 2 / 5, 2 * a_t ** 2 / 5
    expected = np.linalg.norm(np.log(lam_s + 0.01) - np.log(lam_t + 0.01)) / 9
    assert log_euclidean_distance(hs, ht, eps=0.01).item() == pytest.approx(expected, rel=1e-10)


def test_log_euclidean_zero_for_equal_covariances_and_symmetric():
    hs, ht = randn(10, 25, seed=18), randn(14, 25, seed=19)
    permuted_shifted = hs[torch.randperm(10, generator=torch.Generator().manual_seed(1))] - 4.0
    # the trace expansion limits the absolute accuracy near 0 to ~sqrt(eps_float64 * tr(L^2)) / d^2
    assert log_euclidean_distance(hs, permuted_shifted).item() == pytest.approx(0.0, abs=1e-8)
    assert log_euclidean_distance(hs, ht).item() > 1e-3
    assert log_euclidean_distance(hs, ht).item() == pytest.approx(log_euclidean_distance(ht, hs).item(), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_identical_inputs_give_exact_zero_and_finite_zero_gradient(dtype):
    for n, d in [(5, 7), (50, 512), (3, 2)]:
        h = randn(n, d, seed=n, dtype=dtype).requires_grad_()
        for metric in METRICS:
            value = alignment_distance(metric, h, h.detach().clone())
            (grad,) = torch.autograd.grad(value, h)
            assert value.item() == 0.0
            assert torch.isfinite(grad).all() and grad.abs().max().item() < 1e-10


# ----------------------------------------------------------------------------------------------------------------
# Edge cases
# ----------------------------------------------------------------------------------------------------------------
def test_single_sample_per_domain():
    hs = randn(1, 4, seed=20).requires_grad_()
    ht = randn(1, 4, seed=21).requires_grad_()
    for metric in ("G", "LE"):
        value = alignment_distance(metric, hs, ht)
        grads = torch.autograd.grad(value, (hs, ht))
        assert value.item() == 0.0 and all((g == 0).all() for g in grads)
    ag = affine_grassmann_distance(hs, ht)  # d' = 0: P = 0, only ||mu_s - mu_t|| remains
    assert ag.item() == pytest.approx((hs - ht).norm().item() / 16, rel=1e-12)


def test_single_source_sample_against_a_batch():
    hs, ht = randn(1, 6, seed=22), randn(9, 6, seed=23)
    assert grassmann_distance(hs, ht).item() == 0.0  # d' = min(n_s, n_t) - 1 = 0
    expected = np.linalg.norm(scipy.linalg.logm(ref_cov(ht.numpy()) + LE_EPS * np.eye(6)).real
                              - np.log(LE_EPS) * np.eye(6)) / 36  # C_s = 0
    assert log_euclidean_distance(hs, ht).item() == pytest.approx(expected, rel=1e-8)


def test_batch_size_two():
    hs, ht = randn(2, 5, seed=24), randn(2, 5, seed=25)
    assert grassmann_distance(hs, ht).item() == pytest.approx(ref_grassmann(hs.numpy(), ht.numpy(), 1), rel=1e-8)
    assert log_euclidean_distance(hs, ht).item() == pytest.approx(ref_log_euclidean(hs.numpy(), ht.numpy()), rel=1e-8)


def test_dim_is_clipped_to_rank_bound():
    hs, ht = randn(6, 4, seed=26), randn(9, 4, seed=27)
    assert grassmann_distance(hs, ht, dim=100).item() == grassmann_distance(hs, ht, dim=4).item()
    assert grassmann_distance(hs, ht, dim=4).item() == pytest.approx(0.0, abs=1e-12)  # both project onto all of R^4
    assert grassmann_distance(hs, ht, dim=0).item() == 0.0


def test_clear_errors():
    h = randn(4, 3)
    with pytest.raises(ValueError, match="same feature dimension"):
        grassmann_distance(h, randn(4, 5))
    with pytest.raises(ValueError, match=r"h_t must have shape \[n, d\]"):
        grassmann_distance(h, torch.zeros(3, dtype=F64))
    with pytest.raises(ValueError, match="h_s must be a floating-point"):
        grassmann_distance(torch.zeros(4, 3, dtype=torch.long), h)
    with pytest.raises(ValueError, match="at least one sample"):
        log_euclidean_distance(torch.zeros(0, 3, dtype=F64), h)
    with pytest.raises(ValueError, match="dim"):
        grassmann_distance(h, h, dim=-1)
    with pytest.raises(ValueError, match="eps"):
        log_euclidean_distance(h, h, eps=0.0)
    with pytest.raises(ValueError, match=r"known: \['AG', 'G', 'LE'\]"):
        alignment_distance("SPD", h, h)
    bad = h.clone()
    bad[1, 2] = float("nan")
    for metric in METRICS:
        with pytest.raises(ValueError, match="NaN or Inf"):
            alignment_distance(metric, bad, h)


def test_dispatcher_matches_direct_calls():
    hs, ht = randn(7, 9, seed=28), randn(7, 9, seed=29)
    assert alignment_distance("G", hs, ht, dim=3).item() == grassmann_distance(hs, ht, 3).item()
    assert alignment_distance("AG", hs, ht).item() == affine_grassmann_distance(hs, ht).item()
    assert alignment_distance("LE", hs, ht, dim=3, eps=0.1).item() == log_euclidean_distance(hs, ht, 0.1).item()


# ----------------------------------------------------------------------------------------------------------------
# Error indices
# ----------------------------------------------------------------------------------------------------------------
def test_error_index_from_given_eigenvalues():
    eig_s, eig_t = [4.0, 2.0, 1.0, 0.5, 0.0], [3.0, 3.0, 1.0, 0.0, 0.0]
    got = error_index_from_spectra(eig_s, eig_t, [1, 2, 3, 4]).tolist()
    # d'=1: t has a zero gap (3 - 3); d'=4: t gap 0 - 0
    assert got[0] == math.inf and got[3] == math.inf
    assert got[1] == pytest.approx(math.sqrt(2) / 1 + math.sqrt(2) / 2)
    assert got[2] == pytest.approx(math.sqrt(3) / 0.5 + math.sqrt(3) / 1)
    weighted = error_index_from_spectra(eig_s, eig_t, [2, 3], weight_s=2.0, weight_t=0.5).tolist()
    assert weighted == pytest.approx([2 * math.sqrt(2) + 0.5 * math.sqrt(2) / 2, 2 * 2 * math.sqrt(3) + 0.5 * math.sqrt(3)])


def features_with_spectrum(lam, mean):
    """Rows +-a_i e_i (n = 2 len(lam)), so C = diag(2 a_i^2 / (n - 1)) = diag(lam); shifted by ``mean``."""
    lam = np.asarray(lam, dtype=float)
    a = np.sqrt(lam * (2 * len(lam) - 1) / 2)
    return torch.from_numpy(np.concatenate([np.diag(a), -np.diag(a)]) + np.asarray(mean, dtype=float))


def test_error_index_from_features_G_and_AG():
    lam_s, lam_t = [5.0, 3.0, 2.5, 1.0, 0.2], [4.0, 1.0, 0.9, 0.1, 0.05]
    mu_s, mu_t = [3.0, 0, 4.0, 0, 0], [0, 1.0, 0, 0, 0]
    hs, ht = features_with_spectrum(lam_s, mu_s), features_with_spectrum(lam_t, mu_t)
    torch.testing.assert_close(covariance_spectrum(hs), torch.tensor(lam_s, dtype=F64))
    dims = [1, 2, 3, 4]
    e_g = error_index(hs, ht, dims, kind="G")
    e_ag = error_index(hs, ht, dims, kind="AG")
    for k, g, ag in zip(dims, e_g.tolist(), e_ag.tolist()):
        gs, gt = lam_s[k - 1] - lam_s[k], lam_t[k - 1] - lam_t[k]
        assert g == pytest.approx(math.sqrt(k) / gs + math.sqrt(k) / gt, rel=1e-9)
        assert ag == pytest.approx(math.sqrt(k) * 5.0 / gs + math.sqrt(k) * 1.0 / gt, rel=1e-9)


def test_error_index_beyond_rank_and_constant_batch_is_inf():
    hs, ht = randn(4, 10, seed=30), randn(4, 10, seed=31)
    e = error_index(hs, ht, [3, 4, 5])
    assert math.isfinite(e[0].item()) and e[1].item() == math.inf and e[2].item() == math.inf
    assert error_index(torch.ones(5, 10, dtype=F64), ht, [1]).item() == math.inf
    # AG too (the module docstring promises inf for a zero gap), with a non-zero mean weighting the gap's term:
    # a constant batch, and a repeated eigenvalue (lambda_1 = lambda_2) whose d' = 1 gap is zero but d' = 2's is not
    assert error_index(torch.ones(5, 10, dtype=F64), ht, [1], kind="AG").item() == math.inf
    tied = features_with_spectrum([3.0, 3.0, 1.0, 0.5, 0.2], [2.0, 0, 0, 0, 0])
    other = features_with_spectrum([4.0, 1.0, 0.9, 0.1, 0.05], [0, 1.0, 0, 0, 0])
    for kind, norms in (("G", (1.0, 1.0)), ("AG", (2.0, 1.0))):
        e = error_index(tied, other, [1, 2], kind=kind).tolist()
        assert e[0] == math.inf, f"{kind}: a zero eigen-gap gives {e[0]}, not inf"
        assert e[1] == pytest.approx(math.sqrt(2) * (norms[0] / 2.0 + norms[1] / 0.1), rel=1e-9)
    with pytest.raises(ValueError, match=r"\[1, 9\]"):
        error_index(hs, ht, [0, 10])
    with pytest.raises(ValueError, match="kind"):
        error_index(hs, ht, [1], kind="LE")


# ----------------------------------------------------------------------------------------------------------------
# Properties on degenerate batches
# ----------------------------------------------------------------------------------------------------------------
KINDS = ("gaussian", "duplicated", "constant_columns", "all_equal", "zeros", "low_rank", "ties", "integers")


def make_batch(kind, n, d, rng, scale):
    if kind == "gaussian":
        h = rng.normal(size=(n, d))
    elif kind == "duplicated":
        h = rng.normal(size=(max(1, n // 2), d))[rng.integers(0, max(1, n // 2), size=n)]
    elif kind == "constant_columns":
        h = rng.normal(size=(n, d))
        h[:, rng.random(d) < 0.5] = rng.normal()
    elif kind == "all_equal":
        h = np.repeat(rng.normal(size=(1, d)), n, axis=0)
    elif kind == "zeros":
        h = np.zeros((n, d))
    elif kind == "low_rank":  # rank-deficient product, computed in float32 like a network layer
        r = int(rng.integers(1, min(n, d) + 1))
        h = (rng.normal(size=(n, r)).astype(np.float32) @ rng.normal(size=(r, d)).astype(np.float32)).astype(float)
    elif kind == "ties":  # rows +-e_i: equal singular values (exact ties)
        h = np.zeros((n, d))
        h[np.arange(n), np.arange(n) % d] = np.where(np.arange(n) // d % 2 == 0, 1.0, -1.0)
    else:
        h = rng.integers(-2, 3, size=(n, d)).astype(float)
    return h * scale + rng.normal() * scale


@st.composite
def batch_pairs(draw):
    n_s, n_t, d = draw(st.integers(2, 12)), draw(st.integers(2, 12)), draw(st.integers(1, 20))
    kinds = draw(st.sampled_from(KINDS)), draw(st.sampled_from(KINDS))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    dtype = draw(st.sampled_from([torch.float32, F64]))
    hs = torch.from_numpy(make_batch(kinds[0], n_s, d, rng, scale)).to(dtype)
    ht = hs.clone() if draw(st.booleans()) and kinds[0] == kinds[1] else \
        torch.from_numpy(make_batch(kinds[1], n_t, d, rng, scale)).to(dtype)
    return hs, ht, draw(st.one_of(st.none(), st.integers(0, 25)))


@settings(max_examples=150, deadline=None)
@given(batch_pairs())
def test_values_and_gradients_are_finite_on_degenerate_batches(pair):
    hs, ht, dim = pair
    n_s, n_t, d = hs.shape[0], ht.shape[0], hs.shape[1]
    dim_used = min(n_s - 1, n_t - 1, d) if dim is None else min(dim, n_s - 1, n_t - 1, d)
    for metric in METRICS:
        a, b = hs.clone().requires_grad_(), ht.clone().requires_grad_()
        value = alignment_distance(metric, a, b, dim=dim)
        grads = torch.autograd.grad(value, (a, b))
        assert torch.isfinite(value) and value.item() >= 0.0, (metric, value)
        assert all(torch.isfinite(g).all() for g in grads), metric
        if torch.equal(hs, ht):
            assert value.item() == 0.0
        if metric == "G":
            assert value.item() <= 2 * dim_used / d ** 2 * (1 + 1e-6) + 1e-12
        # symmetric up to round-off (the unsquared norms of AG/LE have an absolute floor ~sqrt(eps_float64 tr(A^2)))
        swapped = alignment_distance(metric, ht, hs, dim=dim).item()
        assert swapped == pytest.approx(value.item(), rel=1e-6, abs=1e-6 / d ** 2), metric


@settings(max_examples=60, deadline=None)
@given(batch_pairs())
def test_batched_device_path_is_finite_on_degenerate_batches(pair):
    """The path a GPU takes (layers and domains stacked, one batched eigh: ``PER_MATRIX_ON_CPU = False``) on the
    degenerate batches above, as two layers of different widths: finite values and gradients, never negative."""
    from dmp.manifolds import spectral

    hs, ht, dim = pair
    half = max(1, hs.shape[1] // 2)
    before, spectral.PER_MATRIX_ON_CPU = spectral.PER_MATRIX_ON_CPU, False
    try:
        for metric in METRICS:
            a = [hs.clone().requires_grad_(), hs[:, :half].clone().requires_grad_()]
            b = [ht.clone().requires_grad_(), ht[:, :half].clone().requires_grad_()]
            value = alignment_distance(metric, a, b, dim=dim)
            grads = torch.autograd.grad(value, a + b)
            assert torch.isfinite(value) and value.item() >= 0.0, (metric, value)
            assert all(torch.isfinite(g).all() for g in grads), metric
    finally:
        spectral.PER_MATRIX_ON_CPU = before


@pytest.mark.parametrize("metric", ["G", "AG", "LE"])
@pytest.mark.parametrize("widths, dim", [((6, 4), 3), ((6, 4), 5), ((6,), 3)])
def test_batched_device_path_matches_the_references(monkeypatch, metric, widths, dim):
    """The path a GPU takes (``PER_MATRIX_ON_CPU = False``) against the d x d references, values and gradients: all
    layers in one batch (equal d'), per-layer stacks (d' clipped to a narrow layer's width: unequal d'), one layer."""
    from dmp.manifolds import spectral

    monkeypatch.setattr(spectral, "PER_MATRIX_ON_CPU", False)
    n = 9
    hs = [randn(n, d, seed=20 + i).requires_grad_() for i, d in enumerate(widths)]
    ht = [(randn(n, d, seed=30 + i) * 0.8 + 0.4).requires_grad_() for i, d in enumerate(widths)]
    value = alignment_distance(metric, hs, ht, dim=dim)
    ref = sum(torch_ref(metric, a, b, dim=min(dim, a.shape[1])) for a, b in zip(hs, ht))
    torch.testing.assert_close(value, ref, rtol=1e-7, atol=1e-12)
    for g_fast, g_slow in zip(torch.autograd.grad(value, hs + ht), torch.autograd.grad(ref, hs + ht)):
        torch.testing.assert_close(g_fast, g_slow, rtol=1e-6, atol=1e-10)
