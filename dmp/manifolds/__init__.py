"""Manifold metric alignment distances of DMP (paper section "Manifold Metric Alignment").

Metrics (rows = samples; ``h_s [n_s, d]``, ``h_t [n_t, d]``, or lists of such layers for the sum over the layers;
float32/float64; differentiable w.r.t. both):

* ``"G"``  :func:`grassmann_distance`        Eq. (GrassMetric), the paper's default;
* ``"AG"`` :func:`affine_grassmann_distance` Eq. (AffineGrassMetric);
* ``"LE"`` :func:`log_euclidean_distance`    Eq. (LogEucMetric).

All are computed from ``n x n`` Gram matrices (cost ``O(n^2 d)``, no ``d x d`` matrix) and give finite values and
gradients on any finite batch: rank-deficient or duplicated rows, constant features, repeated singular values,
``n = 1``, ``d < n`` or ``d > n``, identical source and target (distance exactly 0, gradient finite).

Partial UDA (Eq. WeightedAlignLoss): pass the weighted source rows ``h_s' = w[y_s, None] * h_s``; the
distances then compare the weighted covariance ``C^{s'}`` with the target one.

:func:`error_index` gives the error indices ``e^G(d')`` / ``e^AG(d')`` of Theorems Grass_Bound /
AffineGrass_Bound for the ``d'`` analysis figure.
"""
from __future__ import annotations

import torch

from .error_index import covariance_spectrum, error_index, error_index_from_spectra
from .grassmann import affine_grassmann_distance, grassmann_distance
from .log_euclidean import LE_EPS, log_euclidean_distance

METRICS = {"G": grassmann_distance, "AG": affine_grassmann_distance, "LE": log_euclidean_distance}
"""Config ``metric`` id -> distance function."""


def alignment_distance(metric: str, h_s, h_t, *, dim: int | None = None, eps: float = LE_EPS) -> torch.Tensor:
    """``METRICS[metric](h_s, h_t, ...)``: ``dim`` (Grassmann dimension d') goes to G/AG, ``eps`` to LE; the other is
    ignored, so a run config can pass both.  Unknown ``metric`` -> ``ValueError`` listing the known ids.
    ``h_s``, ``h_t``: one layer's features, or lists of all the manifold layers' (the sum over the layers, one
    batched computation: pass lists in a training step)."""
    if metric not in METRICS:
        raise ValueError(f"unknown alignment metric {metric!r}; known: {sorted(METRICS)}")
    if metric == "LE":
        return log_euclidean_distance(h_s, h_t, eps=eps)
    return METRICS[metric](h_s, h_t, dim=dim)


__all__ = ["METRICS", "LE_EPS", "alignment_distance", "grassmann_distance", "affine_grassmann_distance",
           "log_euclidean_distance", "error_index", "error_index_from_spectra", "covariance_spectrum"]
