"""Domain-adversarial alignment of the comparison methods: DANN (Ganin & Lempitsky, ICML 2015 / JMLR 2016), CDAN
and CDAN+E (Long et al., NeurIPS 2018), and the source-weighted form PADA uses (Cao et al., ECCV 2018).

Every choice and its source is listed in docs/method.md, section "Comparison methods". Domain labels follow the
official code of all three papers: source = 1, target = 0. The discriminator returns a logit (no sigmoid) and the
loss is the binary cross-entropy on logits, which equals the papers' ``BCE(sigmoid(.))`` and stays finite where
the sigmoid saturates.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def grl_coefficient(progress: float, gamma: float = 10.0) -> float:
    r"""The gradient-reversal coefficient of DANN (the schedule of the experiments in Ganin & Lempitsky, ICML 2015
    and JMLR 2016; the "calc_coeff" of the CDAN, PADA and BSP official code with high = 1, low = 0, alpha = 10):

    .. math:: \lambda_p = \frac{2}{1 + \exp(-\gamma p)} - 1, \qquad \gamma = 10,

    ``p`` the training progress in ``[0, 1]``. 0 at the start (the noisy early discriminator does not reach the
    features), about 0.9866 at ``p = 0.5`` and 0.99991 at the end."""
    return 2.0 / (1.0 + math.exp(-gamma * progress)) - 1.0


class _GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, coeff):
        ctx.coeff = coeff
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.coeff * grad, None


def grad_reverse(x: torch.Tensor, coeff: float) -> torch.Tensor:
    r"""The gradient reversal layer :math:`R` of DANN (ICML 2015 / JMLR 2016, Sec. "Optimization with backpropagation"):
    :math:`R(x) = x` forward, :math:`\partial R / \partial x = -\lambda I` backward. ``coeff`` is a number, or a
    (constant) tensor broadcast against the gradient (SAN's per-class coefficients, without a host read)."""
    return _GradientReversal.apply(x, coeff.detach() if torch.is_tensor(coeff) else float(coeff))


class DomainDiscriminator(nn.Module):
    """The domain classifier of DANN's Office experiments (JMLR 2016: ``x -> 1024 -> 1024 -> 1``) as in the
    CDAN/PADA/BSP official code (``AdversarialNetwork``): Linear -> ReLU -> Dropout(0.5), twice, then a linear unit
    (a logit here; the code's sigmoid sits in :func:`domain_adversarial_loss`). Weights are Xavier-normal and
    biases zero, as that code's ``init_weights``.

    The dropout masks are drawn from ``generator`` when one is given (the methods pass one seeded by the run's seed
    and the iteration, so a resumed run draws the same masks as an uninterrupted one without saving the global
    random state); otherwise from the global generator, as ``nn.Dropout``."""

    def __init__(self, in_dim: int, hidden: int = 1024, dropout: float = 0.5, out_dim: int = 1):
        super().__init__()
        self.hidden = nn.ModuleList([nn.Linear(in_dim, hidden), nn.Linear(hidden, hidden)])
        self.out = nn.Linear(hidden, out_dim)  # out_dim > 1: ETN's auxiliary label predictor, same body
        self.dropout = float(dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        p = self.dropout
        for layer in self.hidden:
            x = torch.relu(layer(x))
            if self.training and p > 0:
                keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype) >= p
                x = x * keep / (1.0 - p)
        return self.out(x)


def step_generator(seed: int, iteration: int, device, stream: int = 0) -> torch.Generator:
    """A random generator that depends only on (seed, iteration, stream), on ``device``: the same after a resume
    (``stream`` tells apart the modules of one step that draw their own masks)."""
    seed = int(seed) * 1_000_003 + int(iteration) + 7 + int(stream) * 0x9E3779B9  # < 2**32: the CPU keeps 32 bits
    return torch.Generator(device=device).manual_seed(seed)


def domain_adversarial_loss(d_s: torch.Tensor, d_t: torch.Tensor, weight_s: torch.Tensor | None = None,
                            weight_t: torch.Tensor | None = None) -> torch.Tensor:
    r"""The discriminator's binary cross-entropy (the domain loss of DANN, of CDAN's minimax objective and of PADA's
    objective):

    .. math::
        \mathcal{L}_d = \frac{1}{2} \Big[ \frac{1}{n_s} \sum_i w^s_i\, \ell(D(x^s_i), 1)
                      + \frac{1}{n_t} \sum_j w^t_j\, \ell(D(x^t_j), 0) \Big],
        \quad \ell(z, y) = -y \log\sigma(z) - (1 - y) \log(1 - \sigma(z)),

    the mean over the ``n_s + n_t`` rows of the official code when ``n_s = n_t`` (each domain counts half when
    they differ). Weights ``w`` default to 1; CDAN+E passes entropy weights scaled to mean one per domain
    (:func:`entropy_weights`), PADA the source class weights :math:`\gamma_{y_i}`.

    Args:
        d_s, d_t: ``[n_s]`` / ``[n_t]`` (or ``[n, 1]``) discriminator logits.
    Returns:
        A scalar (the discriminator minimises it; the gradient reversal layer makes the features maximise it).
    """
    d_s, d_t = d_s.reshape(-1), d_t.reshape(-1)
    ls = F.binary_cross_entropy_with_logits(d_s, torch.ones_like(d_s), reduction="none")
    lt = F.binary_cross_entropy_with_logits(d_t, torch.zeros_like(d_t), reduction="none")
    if weight_s is not None:
        ls = ls * weight_s.reshape(-1)
    if weight_t is not None:
        lt = lt * weight_t.reshape(-1)
    return 0.5 * (ls.mean() + lt.mean())


def multilinear_map(f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    r"""CDAN's multilinear map (NeurIPS 2018, "Multilinear Conditioning"): :math:`T_\otimes(f, g) = f \otimes g`,
    the outer product flattened to ``[n, c * d_f]`` (row ``i``: :math:`g_{i1} f_i, g_{i2} f_i, \dots`, the official
    code's order)."""
    return (g.unsqueeze(2) * f.unsqueeze(1)).reshape(f.shape[0], -1)


class RandomizedMultilinearMap(nn.Module):
    r"""CDAN's randomized multilinear map (NeurIPS 2018, "Multilinear Conditioning"):

    .. math:: T_\odot(f, g) = \frac{1}{\sqrt d} (R_f f) \odot (R_g g),

    :math:`R_f, R_g` drawn once from N(0, 1) and fixed (buffers: saved in checkpoints, so a resumed run uses the
    same matrices), ``d`` = 1024 in the paper. ``seed`` makes them a function of the run's seed only."""

    def __init__(self, feature_dim: int, num_classes: int, dim: int = 1024, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("r_f", torch.randn(feature_dim, dim, generator=gen))
        self.register_buffer("r_g", torch.randn(num_classes, dim, generator=gen))
        self.dim = dim

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return (f @ self.r_f) * (g @ self.r_g) / math.sqrt(self.dim)


def use_randomized_map(feature_dim: int, num_classes: int, threshold: int = 4096) -> bool:
    """CDAN (NeurIPS 2018, "Multilinear Conditioning"; the official code's ``--random`` switch): the randomized map
    replaces the full one when ``d_f * d_g`` exceeds 4096."""
    return feature_dim * num_classes > threshold


def prediction_entropy(p: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    r"""Per-row entropy :math:`H(g) = -\sum_c g_c \log(g_c + \epsilon)` with the official CDAN code's
    :math:`\epsilon = 10^{-5}`."""
    return -(p * torch.log(p + eps)).sum(1)


def entropy_weights(p: torch.Tensor, coeff: float = 1.0) -> torch.Tensor:
    r"""CDAN+E's entropy conditioning (NeurIPS 2018, "Entropy Conditioning"): :math:`w(H(g)) = 1 + e^{-H(g)}` per
    row of ``p``, scaled to mean one over the rows (the official code divides each domain's weights by their
    detached sum; see :func:`domain_adversarial_loss`). As in that code
    (``entropy.register_hook(grl_hook(coeff))``), the gradient reaching ``p`` through the weights is reversed and
    scaled by the same ``coeff`` as the features'; pass a detached ``p`` for constant weights."""
    h = grad_reverse(prediction_entropy(p), coeff)
    w = 1.0 + torch.exp(-h)
    return w / w.detach().mean()
