"""DMP: Unsupervised Domain Adaptation via Discriminative Manifold Propagation (reproduction suite)."""
__version__ = "0.1.0"
