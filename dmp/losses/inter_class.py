"""Source inter-class similarity loss (paper Sec. "Source Inter-Class Similarity")."""
from __future__ import annotations

import functools
import operator

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ..manifolds.spectral import batching


@functools.lru_cache(maxsize=None)
def _upper(m: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``[m, m]``: 1 above the diagonal (the pairs ``i < j``), 0 elsewhere, made once per shape."""
    return torch.ones(m, m, dtype=dtype, device=device).triu(1)


@functools.lru_cache(maxsize=None)
def _pair_mask(m: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``[m, m]``: ``2 / (m (m - 1))`` above the diagonal, 0 elsewhere (the mean over the pairs ``i < j`` as a
    weighted sum), made once per shape (a constant of every step)."""
    return _upper(m, dtype, device) / (m * (m - 1) // 2)


def _present_pairs(counts: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[c, c]``: ``1 / P`` at the pairs ``i < j`` of the classes present in the batch (``counts > 0``; ``P`` of
    them), 0 elsewhere (all 0 when ``P`` is 0): the mean over those pairs as a weighted sum, with no count read on
    the host."""
    present = (counts > 0).to(dtype)
    pairs = _upper(len(counts), dtype, counts.device) * present.unsqueeze(1) * present.unsqueeze(0)
    return pairs / pairs.sum().clamp_min(1.0)


def _layers(h, anchors):
    """``(h, anchors)`` as equal-length lists of layers (a tensor is one layer)."""
    if isinstance(h, torch.Tensor):
        return [h], [anchors]
    h, anchors = list(h), list(anchors)
    if not h or len(h) != len(anchors):
        raise ValueError(f"one anchor per layer: got {len(h)} feature layers and {len(anchors)} anchors")
    return h, anchors


def _sum_layers(terms: list[torch.Tensor]) -> torch.Tensor:
    """``t_1 + t_2 + ...`` in layer order (the sum over the manifold layers of Eq. Objective)."""
    return functools.reduce(operator.add, terms)


def padded_stack(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``[L, ..., D]``: the tensors (one per manifold layer) zero-padded in their last dimension to the widest."""
    width = max(t.shape[-1] for t in tensors)
    return torch.stack([F.pad(t, (0, width - t.shape[-1])) if t.shape[-1] < width else t for t in tensors])


class _UnitRows(torch.autograd.Function):
    """``x / max(||x||, eps)`` along the last dimension with a fused backward,
    ``dx = (dy - y (y . dy) [||x|| > eps]) / max(||x||, eps)``: three operations forward and six backward, where
    ``F.normalize`` dispatches five and fifteen (the batched path of the losses, :func:`unit_rows`)."""

    generate_vmap_rule = True  # torch.func.vmap runs forward and backward on the batched tensors (dmp/train/stacked.py)

    @staticmethod
    def forward(x: torch.Tensor, eps: float):  # noqa: D401
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        scale = norm.clamp_min(eps)
        return x / scale, scale, norm > eps

    @staticmethod
    def setup_context(ctx, inputs, output):
        y, scale, above = output
        ctx.mark_non_differentiable(scale, above)
        ctx.save_for_backward(y, scale, above)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor, _scale=None, _above=None):
        y, scale, above = ctx.saved_tensors
        along = (y * dy).sum(-1, keepdim=True) * above
        return (dy - y * along) / scale, None


def unit_rows(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``F.normalize(x, dim=-1, eps=eps)`` where matrices are batched (:func:`~dmp.manifolds.spectral.batching`), in
    fewer operations (:class:`_UnitRows`; a detached ``x`` dispatches no backward); ``F.normalize`` itself on the CPU
    path (its arithmetic, bit for bit)."""
    if not batching(x):
        return F.normalize(x, dim=-1, eps=eps)
    if not x.requires_grad:
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(eps)
    return _UnitRows.apply(x, eps)[0]


def class_onehot(y: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """``[n, c]`` one-hot rows of the labels ``y [n]``, read nowhere on the host (``F.one_hot`` reads ``max(y)``: a
    device synchronisation)."""
    return (y.unsqueeze(1) == torch.arange(num_classes, device=y.device)).to(dtype)


def batch_class_means(h: torch.Tensor, y: torch.Tensor, num_classes: int):
    """Class-wise means of a batch.

    Args:
        h: ``[n, d]`` features (rows are samples).
        y: ``[n]`` integer labels in ``[0, num_classes)``.
    Returns:
        ``(means [c, d], present [c] bool)``; the mean of a class absent from the batch is the zero vector
        (the paper: "If there are no samples of the i-th class in the current batch, then the corresponding
        class center is an all-zero vector").
    """
    onehot = class_onehot(y, num_classes, h.dtype)           # [n, c]
    counts = onehot.sum(0)                                    # [c]
    means = (onehot.t() @ h) / counts.clamp_min(1).unsqueeze(1)
    return means, counts > 0


def inter_class_loss(h_s, y_s: torch.Tensor, source_mean, num_classes: int,
                     absent: str = "zero", eps: float = 1e-8) -> torch.Tensor:
    r"""Inter-class loss, Eq. (InterLoss) with Eq. (CentralizedClassMeans).

    .. math::
        \hat{H}^s = \bar{H}^s - \bar{h}^s 1_c^T, \quad
        s^b_{ij} = \frac{\hat{h}_i^T \hat{h}_j}{\|\hat{h}_i\| \|\hat{h}_j\|}, \quad
        \mathcal{L}_{inter} = \frac{2}{c(c-1)} \sum_{i<j} s^b_{ij}

    where :math:`\bar{H}^s` are the class means of the current source batch (the variables) and the anchor
    :math:`\bar{h}^s` (``source_mean``, the mean over the whole source set) is a constant (detached).

    Args:
        h_s: ``[n, d]`` source features of one manifold layer, or a list of them (one per manifold layer ``l``,
            with ``source_mean`` a list of their anchors): the sum :math:`\sum_l \mathcal{L}^l_{inter}` (what the
            class one-hots, counts and pair indices cost is paid once for all the layers).
        y_s: ``[n]`` source labels.
        source_mean: ``[d]`` anchor (or a list, as ``h_s``).
        num_classes: ``c``.
        absent: how classes absent from the batch are treated. ``"zero"`` (default, the paper): their
            class mean is the all-zero vector, so their centralised mean is the constant ``-source_mean`` and
            every pair ``i<j`` of the ``c`` classes is averaged with ``2/(c(c-1))``. ``"skip"``: only the pairs
            of classes present in the batch are averaged (``2/(m(m-1))`` over the ``m`` present classes; on the
            CPU path the count ``m`` is read on the host, where batched it is a weighted sum, with no read).
        eps: floor of the l2 norm in the normalisation (a zero centralised mean gives a zero vector, not NaN).
    Returns:
        A scalar; 0 when fewer than two classes take part (nothing to separate).
    """
    if absent not in ("zero", "skip"):
        raise ValueError(f"absent must be 'zero' or 'skip', got {absent!r}")
    layers, anchors = _layers(h_s, source_mean)
    onehot = class_onehot(y_s, num_classes, layers[0].dtype)  # [n, c], shared by the layers
    counts = onehot.sum(0)
    scale = counts.clamp_min(1).unsqueeze(1)
    onehot_t = onehot.t()
    m, batched = num_classes, batching(layers[0]) and (len(layers) > 1 or absent == "skip")
    if absent == "skip" and not batched:
        present_idx = (counts > 0).nonzero().squeeze(1)       # (reads the device: the CPU path's arithmetic)
        m = present_idx.numel()
    if m < 2:
        return layers[0].sum() * 0.0
    if batched:  # a GPU: the layers zero-padded into one batch [L, c, D]
        h, mean = padded_stack(layers), padded_stack([a.detach() for a in anchors])
        centred = torch.bmm((onehot_t / scale).expand(len(layers), -1, -1), h) - mean.unsqueeze(1)  # (1/n_i: once)
        unit = unit_rows(centred, eps=eps)                    # (zero columns change no norm)
        # the mean over i < j as a masked sum: a gather's backward is index_put_ with accumulate, which on CUDA sorts
        # its indices (deterministic mode) and may wait for the host; a masked sum's backward is elementwise
        pairs = _present_pairs(counts, unit.dtype) if absent == "skip" else _pair_mask(m, unit.dtype, unit.device)
        return (torch.bmm(unit, unit.mT) * pairs).sum()
    iu = torch.triu_indices(m, m, offset=1, device=layers[0].device)
    terms = []
    for h, mean in zip(layers, anchors):
        centred = (onehot_t @ h) / scale - mean.detach().unsqueeze(0)
        if absent == "skip":
            centred = centred[present_idx]
        unit = F.normalize(centred, dim=1, eps=eps)
        cos = unit @ unit.t()                                 # [m, m]
        terms.append(cos[iu[0], iu[1]].mean())
    return _sum_layers(terms)
