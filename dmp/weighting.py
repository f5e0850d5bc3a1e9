"""Partial-DA class weighting (paper Sec. "The Weighting Strategy", Eqs. ClassWeight and WeightedAlignLoss)."""
from __future__ import annotations

import torch


def class_weights(mean_prediction: torch.Tensor | None, num_classes: int, setting: str) -> torch.Tensor:
    r"""Eq. (ClassWeight): :math:`\hat w_i = \pi_i` (partial) or :math:`1/c` (vanilla), where
    :math:`\pi = \frac{1}{n^t}\sum_j p^t_j` is the mean target softmax over the whole target set.

    Returns ``[c]`` weights summing to 1.
    """
    if setting == "vanilla" or mean_prediction is None:
        return torch.full((num_classes,), 1.0 / num_classes)
    if setting != "partial":
        raise ValueError(f"unknown setting {setting!r}")
    w = mean_prediction.detach().double().clamp_min(0)
    return (w / w.sum().clamp_min(1e-12)).float()


def normalise_weights(w: torch.Tensor, mode: str) -> torch.Tensor:
    r"""``sum_one`` (default): the paper's :math:`\hat w` as is (sums to one: "constant mass"). ``mean_one``:
    :math:`c \hat w`, so that uniform weights are all ones and the vanilla intra-class loss is the unweighted
    Eq. (IntraLoss&Truncated)."""
    if mode == "sum_one":
        return w
    if mode == "mean_one":
        return w * w.numel()
    raise ValueError(f"unknown weight normalisation {mode!r}")


def weight_source_features(h_s, y_s: torch.Tensor, w: torch.Tensor):
    r"""Eq. (WeightedAlignLoss): :math:`h^{s'}_i = w_{y_i} h^s_i`; ``h_s [n, d]`` (or a list of layers, each
    weighted by the same row weights, gathered once), ``y_s [n]``, ``w [c]``."""
    layers = [h_s] if isinstance(h_s, torch.Tensor) else list(h_s)
    rows = w.to(layers[0])[y_s].unsqueeze(1)
    weighted = [h * rows for h in layers]
    return weighted[0] if isinstance(h_s, torch.Tensor) else weighted
