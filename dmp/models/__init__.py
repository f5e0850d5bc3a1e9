"""Backbones (registry), manifold layers and the DMP network."""
from .backbones import BACKBONES, WeightsUnavailableError, build_backbone
from .network import DMPNet, batch_statistics

__all__ = ["BACKBONES", "DMPNet", "WeightsUnavailableError", "batch_statistics", "build_backbone"]
