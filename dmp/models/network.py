"""The DMP network: backbone -> manifold layers -> classifier (paper Fig. "network", Sec. "Low-Dimensional
Manifold Layers")."""
from __future__ import annotations

import contextlib

import torch
from torch import nn


def manifold_layers(in_dim: int, dims: list[int], batch_norm: bool = True) -> nn.ModuleList:
    """Linear -> [BatchNorm1d ->] activation per layer: LeakyReLU(0.2) for all but the last, Tanh for the last
    (the paper's two layers: 1024-d LeakyReLU, 512-d Tanh; the BatchNorm is the authors' DRMEA code's)."""
    layers = nn.ModuleList()
    for i, d in enumerate(dims):
        act = nn.Tanh() if i == len(dims) - 1 else nn.LeakyReLU(0.2)
        norm = [nn.BatchNorm1d(d)] if batch_norm else []
        layers.append(nn.Sequential(nn.Linear(in_dim, d), *norm, act))
        in_dim = d
    return layers


class DMPNet(nn.Module):
    """``forward(x) -> (features, logits)`` with ``features`` the list of manifold-layer outputs ``[n, d_l]``."""

    def __init__(self, backbone: nn.Module, backbone_dim: int, dims: list[int], num_classes: int,
                 batch_norm: bool = True, backbone_bn: str = "train"):
        super().__init__()
        self.backbone = backbone
        self.manifold = manifold_layers(backbone_dim, dims, batch_norm)
        self.classifier = nn.Linear(dims[-1], num_classes)
        self.backbone_bn = backbone_bn

    def train(self, mode: bool = True):
        """``backbone_bn`` = ``frozen``: the backbone's BatchNorm layers stay in eval mode whatever ``mode`` (they
        normalise with their pre-trained running statistics and never update them; their affine weights still
        learn at the backbone's lr); ``train``: PyTorch's default, every layer follows ``mode``."""
        super().train(mode)
        if self.backbone_bn == "frozen":
            for m in self.backbone.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.eval()
        return self

    def forward(self, x: torch.Tensor):
        h = self.backbone(x)
        feats = []
        for layer in self.manifold:
            h = layer(h)
            feats.append(h)
        return feats, self.classifier(h)

    def param_groups(self, lr: float, backbone_lr_mult: float):
        """Backbone at ``backbone_lr_mult * lr`` (paper: 0.1x), new layers at ``lr``. Each group stores its
        base lr in ``initial_lr`` for the schedule."""
        head = list(self.manifold.parameters()) + list(self.classifier.parameters())
        groups = [{"params": head, "lr": lr, "initial_lr": lr}]
        backbone = [p for p in self.backbone.parameters() if p.requires_grad]
        if backbone:
            groups.insert(0, {"params": backbone, "lr": lr * backbone_lr_mult,
                              "initial_lr": lr * backbone_lr_mult})
        return groups


@contextlib.contextmanager
def batch_statistics(model: nn.Module):
    """BatchNorm layers normalise with the statistics of each batch (as in training) while their running
    statistics stay untouched; the model's train/eval mode is restored afterwards."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    tracked, was_training = [m.track_running_stats for m in norms], model.training
    model.train()
    for m in norms:
        m.track_running_stats = False
    try:
        yield model
    finally:
        for m, t in zip(norms, tracked):
            m.track_running_stats = t
        model.train(was_training)
