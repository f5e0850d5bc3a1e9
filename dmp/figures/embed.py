"""2-D t-SNE embeddings (van der Maaten & Hinton, 2008) with scikit-learn's implementation."""
from __future__ import annotations

import numpy as np


def tsne(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """``[n, 2]`` t-SNE of the rows of ``x``: scikit-learn's ``TSNE`` (Barnes-Hut, PCA initialisation, learning
    rate "auto", 1000 iterations) with perplexity ``min(30, (n - 1) / 3)`` (scikit-learn requires perplexity < n)
    and a fixed ``random_state``, so the same features give the same picture."""
    from sklearn.manifold import TSNE

    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 3:
        return np.zeros((n, 2))
    perplexity = float(min(30.0, max(1.0, (n - 1) / 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", learning_rate="auto",
                random_state=seed).fit_transform(x)
