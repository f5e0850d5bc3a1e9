"""Anchors of Sec. "Global Structure Learning": per manifold layer, the source class means
:math:`\\bar H^s_l` ``[c, d_l]`` and the source mean :math:`\\bar h^s_l` ``[d_l]`` (constants in the losses),
plus the mean target prediction used by the partial class weights (Eq. ClassWeight).

Two ways to obtain them (config ``anchor_mode``):

* ``full_pass`` - Algorithm DMP: every ``T_up`` iterations, a no-grad pass over the whole source set (and, in
  the partial setting, the whole target set), with BatchNorm as set by ``anchor_bn`` (``batch``: per-domain
  batch statistics, as in the losses; ``eval``: running statistics); see ``Trainer.refresh_anchors``.
* ``accumulate`` - the authors' earlier DRMEA code: running sums over the training batches since the last
  refresh; no extra pass. Until the first refresh there are no anchors and the discriminative terms are off.
"""
from __future__ import annotations

import torch


class Anchors:
    """Holds the current anchors and (for ``accumulate``) the running sums since the last refresh."""

    def __init__(self, num_classes: int, dims: list[int], prediction_momentum: float = 0.0):
        self.num_classes, self.dims, self.prediction_momentum = num_classes, list(dims), float(prediction_momentum)
        self.class_means: list[torch.Tensor] | None = None
        self.means: list[torch.Tensor] | None = None
        self.mean_prediction: torch.Tensor | None = None
        self._reset_sums()

    # -- accumulation ----------------------------------------------------------------------------------
    def _reset_sums(self):
        c = self.num_classes
        self._sum = [torch.zeros(c, d, dtype=torch.float64) for d in self.dims]
        self._count = torch.zeros(c, dtype=torch.float64)
        self._pred_sum = torch.zeros(c, dtype=torch.float64)
        self._pred_count = 0

    def _sums_on(self, device):
        """The running sums live on the device of the features they add up (no copy to the host per batch, which
        would wait for a GPU)."""
        if self._count.device != device:
            self._sum = [s.to(device) for s in self._sum]
            self._count, self._pred_sum = self._count.to(device), self._pred_sum.to(device)

    @torch.no_grad()
    def add_source(self, feats: list[torch.Tensor], y: torch.Tensor):
        self._sums_on(feats[0].device)
        y = y.to(feats[0].device)
        onehot = (y.unsqueeze(1) == torch.arange(self.num_classes, device=y.device)).double()  # no host read
        for s, h in zip(self._sum, feats):
            s += onehot.t() @ h.detach().double()
        self._count += onehot.sum(0)

    @torch.no_grad()
    def add_target(self, probs: torch.Tensor):
        self._sums_on(probs.device)
        self._pred_sum += probs.detach().double().sum(0)
        self._pred_count += probs.shape[0]

    def refresh_from_sums(self):
        """Turn the running sums into anchors and reset them. Classes never seen keep a zero mean."""
        if self._count.sum() > 0:
            n = self._count.clamp_min(1).unsqueeze(1)
            self.class_means = [(s / n).float() for s in self._sum]
            self.means = [(s.sum(0) / self._count.sum()).float() for s in self._sum]
        if self._pred_count:
            new = (self._pred_sum / self._pred_count).float()
            m, old = self.prediction_momentum, self.mean_prediction
            # config mean_prediction_momentum: pi <- m pi_previous + (1 - m) pi_new (m = 0: Eq. ClassWeight's pi)
            self.mean_prediction = new if m == 0 or old is None else m * old.to(new.device) + (1 - m) * new
        self._reset_sums()

    @property
    def ready(self) -> bool:
        return self.class_means is not None

    # -- checkpointing ---------------------------------------------------------------------------------
    def state_dict(self):
        return {k: getattr(self, k) for k in ("class_means", "means", "mean_prediction", "_sum", "_count",
                                              "_pred_sum", "_pred_count")}

    def load_state_dict(self, state):
        for k, v in state.items():
            setattr(self, k, v)

    def on(self, device):
        """Anchors as tensors on ``device`` (lists per layer)."""
        return ([m.to(device) for m in self.class_means], [m.to(device) for m in self.means])
