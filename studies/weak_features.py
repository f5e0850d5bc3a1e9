"""Hand-crafted features of the demo images and of the real MNIST<->USPS digits, declared as features datasets
(``datasets/<name>/dataset.yaml`` + ``.npz`` files, ignored by git) as a user brings their own features: the
stand-ins for the weak hand-crafted features (SURF bag-of-words, raw pixels) of the shallow-DA benchmarks, read by
the weak-feature studies (:mod:`studies.weak`). ``python -m studies weak-features demo`` (or ``digits``) declares
them; Snakemake does before the studies' first run on them.

* ``demo_pixels``: 12 x 12 grey levels (144-d);
* ``demo_gradients``: gradient-orientation histograms on a 4 x 4 grid plus a colour histogram (192-d);
* ``demo_bovw`` / ``digits_bovw``: a bag of visual words built as the Office-Caltech10 SURF features are
  (Gong et al., CVPR 2012: SURF descriptors quantised with a codebook learned on one domain, an orderless
  histogram per image): dense SURF-like descriptors, a k-means codebook of :data:`WORDS` words fitted on the first
  domain, each image's word frequencies;
* ``digits_pixels``: the digits' raw 16 x 16 pixels (256-d, the JDA protocol's features), read in place.
"""
from __future__ import annotations

import os

import numpy as np

WORDS = 256  # codebook size of the bag-of-words features (Office-Caltech10 SURF: 800, on far larger images)


def pixels(rgb: np.ndarray) -> np.ndarray:
    """12 x 12 grey levels in [0, 1] (144-d): the weakest hand-crafted feature."""
    from PIL import Image
    return np.asarray(Image.fromarray(rgb).convert("L").resize((12, 12), Image.BILINEAR), np.float32).ravel() / 255


def gradients(rgb: np.ndarray) -> np.ndarray:
    """Histograms of gradient orientation (8 bins, magnitude-weighted, 4 x 4 cells, l2-normalised; 128-d) and a
    4 x 4 x 4 colour histogram (64-d): a HOG-like hand-crafted feature (192-d)."""
    a = rgb.astype(np.float64) / 255.0
    g = a.mean(2)
    gx, gy = np.zeros_like(g), np.zeros_like(g)
    gx[:, 1:-1], gy[1:-1] = g[:, 2:] - g[:, :-2], g[2:] - g[:-2]
    mag, bins = np.hypot(gx, gy), np.minimum((np.arctan2(gy, gx) % np.pi / np.pi * 8).astype(int), 7)
    h, w = g.shape
    cells = [np.bincount(bins[i:i + h // 4, j:j + w // 4].ravel(), mag[i:i + h // 4, j:j + w // 4].ravel(), 8)
             for i in range(0, h, h // 4) for j in range(0, w, w // 4)]
    hog = np.concatenate(cells)
    q = np.minimum((a * 4).astype(int), 3)
    colour = np.bincount((q[..., 0] * 16 + q[..., 1] * 4 + q[..., 2]).ravel(), minlength=64) / q[..., 0].size
    return np.concatenate([hog / (np.linalg.norm(hog) + 1e-6), colour]).astype(np.float32)


def surf_descriptors(grey: np.ndarray, patch: int, stride: int, keep: float = 0.1) -> np.ndarray:
    """SURF-like descriptors on a dense grid of one grey image ``[H, W]``: each ``patch x patch`` window is cut
    into 4 x 4 sub-regions, each giving (sum dx, sum dy, sum |dx|, sum |dy|) of the image's gradient (64-d, as
    SURF's descriptor), l2-normalised. Windows whose gradient energy is below ``keep`` times the image's largest
    are dropped (flat background; SURF keeps only detected interest points). Returns ``[n, 64]``."""
    g = grey.astype(np.float64)
    dx, dy = np.zeros_like(g), np.zeros_like(g)
    dx[:, 1:-1], dy[1:-1] = (g[:, 2:] - g[:, :-2]) / 2, (g[2:] - g[:-2]) / 2
    maps = np.stack([dx, dy, np.abs(dx), np.abs(dy)])                       # [4, H, W]
    win = np.lib.stride_tricks.sliding_window_view(maps, (patch, patch), axis=(1, 2))[:, ::stride, ::stride]
    s = patch // 4
    c, ny, nx = win.shape[:3]
    sub = win.reshape(c, ny, nx, 4, s, 4, s).sum(axis=(4, 6))                # [4, ny, nx, 4, 4]
    desc = sub.transpose(1, 2, 3, 4, 0).reshape(ny * nx, 64)
    energy = desc[:, 2::4].sum(1) + desc[:, 3::4].sum(1)
    desc = desc[energy >= keep * energy.max()] if energy.max() > 0 else desc[:0]
    return desc / np.maximum(np.linalg.norm(desc, axis=1, keepdims=True), 1e-12)


def bag_of_words(descriptors: list[np.ndarray], codebook) -> np.ndarray:
    """Each image's word frequencies ``[N, WORDS]`` (a histogram of its descriptors' nearest words, summing to 1;
    zeros for an image without a descriptor)."""
    counts = np.array([len(d) for d in descriptors])
    image = np.repeat(np.arange(len(descriptors)), counts)
    words = codebook.predict(np.concatenate(descriptors)) if counts.sum() else np.zeros(0, np.int64)
    hist = np.zeros((len(descriptors), codebook.n_clusters))
    np.add.at(hist, (image, words), 1.0)
    return (hist / np.maximum(counts, 1)[:, None]).astype(np.float32)


def _codebook(descriptors: list[np.ndarray]):
    from sklearn.cluster import KMeans
    return KMeans(WORDS, n_init=1, random_state=0).fit(np.concatenate(descriptors))


def _write(folder, doc: dict) -> None:
    import yaml

    from dmp.io import write_text
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / "dataset.yaml", yaml.safe_dump(doc, sort_keys=False))


def _save(folder, domain, x, y) -> dict:
    (folder / "data").mkdir(parents=True, exist_ok=True)
    np.savez(folder / "data" / f"{domain.name}.npz", X=x, y=y)
    return dict(name=domain.name, short=domain.short, file=f"{domain.name}.npz", x_key="X", y_key="y")


def declare_demo() -> None:
    """``demo_pixels``, ``demo_gradients`` and ``demo_bovw`` from the generated demo images."""
    from PIL import Image

    from dmp.data import registry
    spec = registry.get_dataset("demo")
    root = registry.data_root(spec)
    images, labels = {}, {}
    for d in spec.domains:
        entries = registry.read_list(registry.list_file(spec, d.name, "full"))
        images[d.name] = [np.asarray(Image.open(root / p).convert("RGB")) for p, _ in entries]
        labels[d.name] = np.array([y for _, y in entries])
    common = dict(kind="features", classes=list(spec.classes), partial_classes=list(spec.partial_classes),
                  root="data")
    for name, fn in (("demo_pixels", pixels), ("demo_gradients", gradients)):
        folder = registry.DATASETS_DIR / name
        domains = [_save(folder, d, np.stack([fn(im) for im in images[d.name]]), labels[d.name])
                   for d in spec.domains]
        _write(folder, dict(common, title=f"{fn.__doc__.split(':')[0].strip()} of the demo images (evidence only)",
                            domains=domains))
    desc = {d.name: [surf_descriptors(im.mean(2) / 255, 12, 4) for im in images[d.name]] for d in spec.domains}
    book = _codebook(desc[spec.domains[0].name])
    folder = registry.DATASETS_DIR / "demo_bovw"
    domains = [_save(folder, d, bag_of_words(desc[d.name], book), labels[d.name]) for d in spec.domains]
    _write(folder, dict(common, title=f"Bag of {WORDS} visual words (dense SURF-like descriptors, codebook of the "
                        f"{spec.domains[0].name} domain) of the demo images (evidence only)", domains=domains))


def declare_digits() -> None:
    """``digits_pixels`` (declared in place on the shared .mat file, not copied) and ``digits_bovw``; nothing when
    the shared digits are absent."""
    from dmp.data import registry
    from dmp.data.splits import load_arrays
    digits = registry.get_dataset("mnist_usps")
    source = registry.data_root(digits)
    if not source.exists():
        return
    folder = registry.DATASETS_DIR / "digits_pixels"
    _write(folder, dict(kind="features", title="MNIST<->USPS raw 16 x 16 pixels as 256-d vectors (evidence only)",
                        classes=list(digits.classes), root=os.path.relpath(source, folder),
                        label_offset=digits.label_offset,
                        domains=[dict(name=d.name, short=d.short, file=d.folder, x_key=d.x_key, y_key=d.y_key,
                                      count=d.count) for d in digits.domains]))
    arrays = {d.name: load_arrays(digits, d.name) for d in digits.domains}
    desc = {k: [surf_descriptors(im[0], 8, 2) for im in x] for k, (x, _) in arrays.items()}
    book = _codebook(desc[digits.domains[0].name])
    folder = registry.DATASETS_DIR / "digits_bovw"
    domains = [_save(folder, d, bag_of_words(desc[d.name], book), arrays[d.name][1]) for d in digits.domains]
    _write(folder, dict(kind="features", title=f"Bag of {WORDS} visual words (dense SURF-like descriptors, codebook "
                        f"of {digits.domains[0].name}) of MNIST<->USPS (evidence only)",
                        classes=list(digits.classes), root="data", domains=domains))


def declare() -> None:
    declare_demo()
    declare_digits()


def main(argv=None) -> int:
    """``python -m studies weak-features demo|digits``: declare the demo images' features (the images generated first
    where absent) or the digits' (the developers' copy linked first where absent)."""
    import argparse

    from studies import runs, shared_copies
    ap = argparse.ArgumentParser(prog="python -m studies weak-features")
    ap.add_argument("set", choices=["demo", "digits"])
    if ap.parse_args(argv).set == "demo":
        runs.demo_images()
        declare_demo()
    else:
        shared_copies.link()
        declare_digits()
    return 0
