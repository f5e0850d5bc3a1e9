"""Backbones (registry), manifold layers and the DMP network."""
from . import backbones
from .backbones import BACKBONES, BackboneSpec, WeightsUnavailableError, build_backbone
from .network import DMPNet, batch_statistics

__all__ = ["BACKBONES", "BackboneSpec", "DMPNet", "WeightsUnavailableError", "batch_statistics", "build_backbone"]
