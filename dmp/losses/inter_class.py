"""Source inter-class similarity loss (paper Sec. "Source Inter-Class Similarity")."""
from __future__ import annotations

import torch
import torch.nn.functional as F


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
    # (F.one_hot would read max(y) to the host: a device synchronisation)
    onehot = (y.unsqueeze(1) == torch.arange(num_classes, device=y.device)).to(h.dtype)  # [n, c]
    counts = onehot.sum(0)                                    # [c]
    means = (onehot.t() @ h) / counts.clamp_min(1).unsqueeze(1)
    return means, counts > 0


def inter_class_loss(h_s: torch.Tensor, y_s: torch.Tensor, source_mean: torch.Tensor, num_classes: int,
                     absent: str = "zero", eps: float = 1e-8) -> torch.Tensor:
    r"""Inter-class loss, Eq. (InterLoss) with Eq. (CentralizedClassMeans).

    .. math::
        \hat{H}^s = \bar{H}^s - \bar{h}^s 1_c^T, \quad
        s^b_{ij} = \frac{\hat{h}_i^T \hat{h}_j}{\|\hat{h}_i\| \|\hat{h}_j\|}, \quad
        \mathcal{L}_{inter} = \frac{2}{c(c-1)} \sum_{i<j} s^b_{ij}

    where :math:`\bar{H}^s` are the class means of the current source batch (the variables) and the anchor
    :math:`\bar{h}^s` (``source_mean``, the mean over the whole source set) is a constant (detached).

    Args:
        h_s: ``[n, d]`` source features of one manifold layer.
        y_s: ``[n]`` source labels.
        source_mean: ``[d]`` anchor.
        num_classes: ``c``.
        absent: how classes absent from the batch are treated. ``"zero"`` (default, the paper): their
            class mean is the all-zero vector, so their centralised mean is the constant ``-source_mean`` and
            every pair ``i<j`` of the ``c`` classes is averaged with ``2/(c(c-1))``. ``"skip"``: only the pairs
            of classes present in the batch are averaged (``2/(m(m-1))`` over the ``m`` present classes).
        eps: floor of the l2 norm in the normalisation (a zero centralised mean gives a zero vector, not NaN).
    Returns:
        A scalar; 0 when fewer than two classes take part (nothing to separate).
    """
    means, present = batch_class_means(h_s, y_s, num_classes)
    centred = means - source_mean.detach().unsqueeze(0)
    if absent == "skip":
        centred = centred[present]
    elif absent != "zero":
        raise ValueError(f"absent must be 'zero' or 'skip', got {absent!r}")
    m = centred.shape[0]
    if m < 2:
        return h_s.sum() * 0.0
    unit = F.normalize(centred, dim=1, eps=eps)
    cos = unit @ unit.t()                                    # [m, m]
    iu = torch.triu_indices(m, m, offset=1, device=h_s.device)
    return cos[iu[0], iu[1]].mean()
