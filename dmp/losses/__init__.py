"""The discriminative losses of DMP, one small module each (rows of every feature matrix are samples)."""
from .adversarial import (DomainDiscriminator, RandomizedMultilinearMap, domain_adversarial_loss, entropy_weights,
                          grad_reverse, grl_coefficient, multilinear_map, step_generator, use_randomized_map)
from .bsp import bsp_loss
from .entropy import entropy_loss
from .feature_norm import hafn_loss, safn_loss
from .inter_class import batch_class_means, inter_class_loss
from .intra_class import intra_class_loss
from .partial_weights import etn_weights, iwan_weights, leaky_softmax, pada_class_weights

__all__ = ["batch_class_means", "entropy_loss", "inter_class_loss", "intra_class_loss",
           # the comparison methods (dmp/methods/)
           "DomainDiscriminator", "RandomizedMultilinearMap", "bsp_loss", "domain_adversarial_loss", "entropy_weights",
           "etn_weights", "grad_reverse", "grl_coefficient", "hafn_loss", "iwan_weights", "leaky_softmax",
           "multilinear_map", "pada_class_weights", "safn_loss", "step_generator", "use_randomized_map"]
