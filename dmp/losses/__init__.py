"""The discriminative losses of DMP, one small module each (rows of every feature matrix are samples)."""
from .entropy import entropy_loss
from .inter_class import batch_class_means, inter_class_loss
from .intra_class import intra_class_loss

__all__ = ["batch_class_means", "entropy_loss", "inter_class_loss", "intra_class_loss"]
