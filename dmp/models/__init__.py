"""Backbones (registry), manifold layers and the DMP network."""
from .backbones import BACKBONES, WeightsUnavailableError, build_backbone
from .network import DMPNet

__all__ = ["BACKBONES", "DMPNet", "WeightsUnavailableError", "build_backbone"]
