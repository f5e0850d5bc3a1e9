"""studies/weak_features.py (the weak-feature studies' datasets): the SURF-like descriptors and the bag of visual
words."""
from __future__ import annotations

import numpy as np

from studies import weak_features as wf


def test_surf_descriptors_are_unit_64d_and_skip_flat_windows():
    img = np.zeros((16, 16))
    img[:, 1:3] = 1.0  # a vertical stroke at the left edge, from top to bottom
    desc = wf.surf_descriptors(img, 8, 2)
    assert desc.shape[1] == 64 and 0 < len(desc) < 25  # windows on the flat background are dropped
    np.testing.assert_allclose(np.linalg.norm(desc, axis=1), 1.0, rtol=1e-9)
    # a vertical stroke has horizontal gradients only: no dy, no |dy| anywhere
    assert np.abs(desc[:, 1::4]).max() == 0 and np.abs(desc[:, 3::4]).max() == 0
    assert wf.surf_descriptors(np.full((16, 16), 0.5), 8, 2).shape == (0, 64)


def test_bag_of_words_gives_word_frequencies(monkeypatch):
    rng = np.random.default_rng(0)
    images = [rng.random((16, 16)) for _ in range(6)]
    desc = [wf.surf_descriptors(im, 8, 2) for im in images] + [np.zeros((0, 64))]
    monkeypatch.setattr(wf, "WORDS", 5)
    book = wf._codebook(desc[:-1])
    bags = wf.bag_of_words(desc, book)
    assert bags.shape == (7, 5)
    np.testing.assert_allclose(bags[:-1].sum(1), 1.0, rtol=1e-6)
    assert not bags[-1].any()  # no descriptor: an all-zero histogram
    # the frequencies are those of the nearest words
    np.testing.assert_allclose(bags[0], np.bincount(book.predict(desc[0]), minlength=5) / len(desc[0]), rtol=1e-6)
