"""Target entropy loss used by DMP+ent in the partial setting (paper Sec. "Comparative Experiment Under
Partial Setting"; Long et al., Xu et al.)."""
from __future__ import annotations

import torch


def entropy_loss(p_t: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    r"""Mean Shannon entropy of the target predictions.

    .. math:: \mathcal{L}_{ent} = -\frac{1}{n^t} \sum_{j=1}^{n^t} \sum_{i=1}^{c} p^t_{ij} \log p^t_{ij}

    Args:
        p_t: ``[n, c]`` softmax probabilities. ``eps`` guards ``log 0`` (``0 log 0 = 0``).
    Returns:
        A scalar in ``[0, log c]``.
    """
    return -(p_t * torch.log(p_t.clamp_min(eps))).sum(1).mean()
