"""What the trainer reads: torch datasets for image lists, in-memory arrays and precomputed features, the
paper's image transforms, and a deterministic batch stream.

Every sample is fetched as ``dataset[(index, seed)]``: the random augmentation of a sample is drawn from
``seed`` alone, and the seed of the ``j``-th sample of iteration ``t`` depends only on ``(run seed, domain,
t, j)``. Batches are therefore identical whatever the number of DataLoader workers and whether the run
was resumed, which is what makes a resumed run end with the same numbers as an uninterrupted one.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from .cached_images import CachedImages, DeviceImages, device_parts
from .load import IMAGENET_MEAN, IMAGENET_STD, sample_key


def image_transforms(train: bool, resize: int = 256, crop: int = 224):
    """The paper's protocol: train = resize to ``resize x resize``, random ``crop``, horizontal flip;
    test = resize, centre crop; both normalised with the ImageNet statistics.

    The deterministic steps (resize, to-tensor, normalise) come first, so a cached dataset can apply them
    once (:data:`FIXED_STEPS`); cropping and flipping a normalised tensor gives the same pixels as
    doing it on the image."""
    from torchvision import transforms as T

    steps = [T.Resize((resize, resize)), T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    steps += [T.RandomCrop(crop), T.RandomHorizontalFlip()] if train else [T.CenterCrop(crop)]
    return T.Compose(steps)


FIXED_STEPS = 3
"""Number of leading deterministic steps of :func:`image_transforms`."""


class ImageListDataset(Dataset):
    """Images listed in a text file of ``relative/path label`` lines (relative to ``root``), decoded to 8-bit RGB
    (:func:`dmp.data.load.open_rgb`). With ``num_classes`` every label must lie in ``0..num_classes-1``; a bad
    line is an error naming the file and line before any image is read.

    ``cache=True`` keeps each image in memory after the deterministic steps of an :func:`image_transforms`
    pipeline (small datasets such as the demo); only the random crop/flip run per sample."""

    def __init__(self, root, list_file, transform, cache: bool = False, num_classes: int | None = None):
        from .registry import read_list

        self.root, self.transform, self.cache = Path(root), transform, {} if cache else None
        entries = read_list(list_file, num_classes)
        self.paths = [p for p, _ in entries]
        self.labels = torch.tensor([lab for _, lab in entries], dtype=torch.long)
        if not self.paths:
            raise ValueError(f"{list_file} lists no images")
        first = self.root / self.paths[0]
        if not first.is_file():
            raise FileNotFoundError(f"image {first} (first entry of {list_file}) does not exist: the dataset is "
                                    f"not in place under {self.root}; see `python -m dmp data fetch --help`")

    def __len__(self):
        return len(self.paths)

    def _load(self, i):
        from .load import open_rgb

        if self.cache is not None and i in self.cache:
            return self.cache[i]
        try:
            img = open_rgb(self.root / self.paths[i])
        except (OSError, ValueError) as exc:
            raise ValueError(f"unreadable image {self.root / self.paths[i]}: {exc}") from None
        if self.cache is not None:
            img = self.cache[i] = self._fixed(img)
        return img

    def _fixed(self, img):
        from torchvision import transforms as T
        steps = getattr(self.transform, "transforms", [])
        return T.Compose(steps[:FIXED_STEPS])(img) if len(steps) > FIXED_STEPS else img

    def _random(self, img):
        from torchvision import transforms as T
        if self.cache is None:
            return self.transform(img)
        steps = getattr(self.transform, "transforms", [])
        return T.Compose(steps[FIXED_STEPS:])(img) if len(steps) > FIXED_STEPS else self.transform(img)

    def __getitem__(self, key):
        i, seed = sample_key(key)
        img = self._load(i)
        if seed is None:
            return self._random(img), self.labels[i]
        # Seed only the CPU generator that torchvision's random transforms draw from (torch.manual_seed would
        # also seed every accelerator, which costs milliseconds per sample), and restore it afterwards.
        state = torch.get_rng_state()
        torch.default_generator.manual_seed(seed)
        try:
            return self._random(img), self.labels[i]
        finally:
            torch.set_rng_state(state)


class TensorDataset(Dataset):
    """Arrays already in memory (precomputed features ``[N, D]`` or small images ``[N, C, H, W]``).

    ``shift`` / ``scale_jitter`` (small images only; :func:`build_task` refuses them on vectors): a training
    sample keyed with an augmentation seed is translated by up to ``shift`` pixels in each direction and scaled by
    a factor in ``1 +- scale_jitter``, the new border filled with the sample's corner value (its background); the
    draw comes from the sample's seed, so a batch is the same whatever the worker count or a resume.

    ``views`` (vectors only): ``[N, V, D]`` stored augmented views of each sample (a trunk's activations of V
    random crops, ``extract-features --views``); a training sample keyed with a seed is view ``seed mod V``."""

    def __init__(self, x, y, shift: int = 0, scale_jitter: float = 0.0, views=None):
        self.views = None if views is None else torch.as_tensor(np.asarray(views), dtype=torch.float32)
        self.x = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        self.labels = torch.as_tensor(np.asarray(y), dtype=torch.long)
        if len(self.x) != len(self.labels):
            raise ValueError(f"{len(self.x)} samples but {len(self.labels)} labels")
        self.shift, self.scale_jitter = int(shift), float(scale_jitter)
        self.augment = bool(shift or scale_jitter)
        if self.views is not None and (self.views.shape[0] != len(self.x) or self.x.ndim != 2):
            raise ValueError(f"views of shape {list(self.views.shape)} do not fit {list(self.x.shape)} samples")

    def __len__(self):
        return len(self.labels)

    def _augmented(self, x, seed):
        from torchvision.transforms.v2 import functional as TF
        u = torch.rand(3, generator=torch.Generator().manual_seed(int(seed))).tolist()
        s = self.shift
        translate = [int((2 * s + 1) * u[1]) - s, int((2 * s + 1) * u[2]) - s]   # integers in [-s, s]
        scale = 1.0 + self.scale_jitter * (2.0 * u[0] - 1.0)
        return TF.affine(x, angle=0.0, translate=translate, scale=scale, shear=[0.0, 0.0],
                         fill=float(x[:, 0, 0].mean()))

    def __getitem__(self, key):
        i, seed = sample_key(key)
        if self.views is not None and seed is not None:
            return self.views[i, int(seed) % self.views.shape[1]], self.labels[i]
        x = self.x[i]
        return (self._augmented(x, seed) if self.augment and seed is not None else x), self.labels[i]

    def batch(self, idx, seeds=None):
        """Fast path: gather a whole batch without a DataLoader (``seeds``: augmentation seeds, per sample)."""
        if self.views is not None and seeds is not None:
            pick = torch.as_tensor([int(sd) % self.views.shape[1] for sd in seeds])
            return self.views[torch.as_tensor(idx), pick], self.labels[torch.as_tensor(idx)]
        x, y = self.x[torch.as_tensor(idx)], self.labels[torch.as_tensor(idx)]
        if self.augment and seeds is not None:
            x = torch.stack([self._augmented(xi, sd) for xi, sd in zip(x, seeds)])
        return x, y


@dataclasses.dataclass
class Task:
    """The data of one transfer task."""
    source_train: Dataset
    source_eval: Dataset
    target_train: Dataset
    target_eval: Dataset
    classes: list[str]
    in_channels: int = 3
    in_dim: int | None = None
    dataset_version: str = "unknown"
    scored: dict = dataclasses.field(default_factory=dict)  # what target_eval is (splits.scored), for metrics
    # the input the run trains on (:func:`input_record`), written into metrics.json as ``input``
    input: dict = dataclasses.field(default_factory=dict)

    @property
    def num_classes(self):
        return len(self.classes)

    def place(self, device):
        """Convert the batches of the input-cached parts (:class:`CachedImages`) on ``device`` (config
        ``input_device``: hold their images there, :class:`DeviceImages`)."""
        for part in (self.source_train, self.source_eval, self.target_train, self.target_eval):
            if isinstance(part, CachedImages):
                part.place(device)


def mix_seeds(*ints) -> int:
    """A stable 63-bit hash of a few integers (independent of PYTHONHASHSEED)."""
    h = 0x9E3779B97F4A7C15
    for v in ints:
        h = ((h ^ (int(v) & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 31
    return h & 0x7FFFFFFFFFFFFFFF


class BatchStream:
    """Deterministic infinite stream of batches of one domain: position ``q`` of the stream is sample
    ``perm_e[q mod n]`` with ``perm_e`` a permutation drawn from ``(seed, stream id, epoch e)``; iteration
    ``t`` takes positions ``[t b, (t + 1) b)``. Each sample also gets its own augmentation seed."""

    def __init__(self, dataset, batch_size: int, seed: int, stream_id: int, num_workers: int = 0):
        self.dataset, self.b, self.seed, self.sid = dataset, batch_size, seed, stream_id
        self.n, self.num_workers = len(dataset), num_workers
        self._perms: dict[tuple, torch.Tensor] = {}  # (epoch, device or None) -> permutation

    def _perm(self, epoch, device=None):
        """Epoch ``epoch``'s permutation; on ``device``: copied there once (page-locked, without waiting, on CUDA)."""
        key = (epoch, None if device is None else str(device))
        if key not in self._perms:
            if len(self._perms) > 5:
                self._perms.pop(min(self._perms, key=lambda k: k[0]))
            if device is None:
                perm = torch.randperm(self.n, generator=torch.Generator().manual_seed(mix_seeds(self.seed, self.sid, epoch)))
            else:
                cuda = torch.device(device).type == "cuda"
                perm = (self._perm(epoch).pin_memory() if cuda else self._perm(epoch)).to(device, non_blocking=cuda)
            self._perms[key] = perm
        return self._perms[key]

    def indices(self, t: int, device=None) -> torch.Tensor:
        """The sample indices ``[b]`` of iteration ``t`` (on ``device``: cut from permutations held there)."""
        q0, q1, n = t * self.b, (t + 1) * self.b, self.n
        parts = [self._perm(e, device)[max(q0 - e * n, 0):min(q1 - e * n, n)]
                 for e in range(q0 // n, (q1 - 1) // n + 1)]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def keys(self, t: int):
        """The ``(index, augmentation seed)`` pairs of iteration ``t``."""
        return [(i, mix_seeds(self.seed, self.sid, t, j, 1)) for j, i in enumerate(self.indices(t).tolist())]

    def iterate(self, start: int, stop: int, pin_memory: bool = False):
        """Yield ``(x, y)`` for iterations ``start .. stop-1`` (``pin_memory``: page-locked batches, for
        asynchronous copies to a CUDA device)."""
        if isinstance(self.dataset, TensorDataset):
            for t in range(start, stop):
                keys = self.keys(t)
                yield self.dataset.batch([i for i, _ in keys], [sd for _, sd in keys])
            return
        if isinstance(self.dataset, DeviceImages):  # cut on the device: the indices, crops drawn from (seed, t)
            for t in range(start, stop):
                yield self.dataset.draw(self.indices(t, self.dataset.device), mix_seeds(self.seed, self.sid, t, 2))
            return
        if isinstance(self.dataset, CachedImages):
            yield from self.dataset.batches(([i for i, _ in keys], [sd for _, sd in keys])
                                            for keys in map(self.keys, range(start, stop)))
            return
        loader = DataLoader(self.dataset, batch_sampler=_KeySampler(self, start, stop),
                            **loader_options(self.num_workers, pin_memory))
        yield from loader


class _KeySampler:
    def __init__(self, stream, start, stop):
        self.stream, self.start, self.stop = stream, start, stop

    def __iter__(self):
        for t in range(self.start, self.stop):
            yield self.stream.keys(t)

    def __len__(self):
        return self.stop - self.start


def loader_options(num_workers: int, pin_memory: bool = False) -> dict:
    """DataLoader options of the training streams and the no-grad passes: ``num_workers`` processes, each keeping
    up to ``prefetch_factor`` = 4 batches ready, kept for the loader's life (``persistent_workers``; a training
    stream is one loader for the whole run); ``pin_memory`` (CUDA) copies batches to page-locked memory."""
    workers = num_workers > 0
    return dict(num_workers=num_workers, pin_memory=pin_memory, persistent_workers=workers,
                prefetch_factor=4 if workers else None)


def eval_loader(dataset, batch_size: int, num_workers: int = 0, order=None, pin_memory: bool = False):
    """Batches without augmentation randomness, of near-equal sizes (``ceil(N / batch_size)`` chunks differing
    by at most one sample, so no batch of one when ``N > 1``: BatchNorm in batch-statistics mode needs two).
    ``order``: the sample indices to batch, in that order (default: all, sequential)."""
    order = list(range(len(dataset))) if order is None else [int(i) for i in order]
    n = len(order)
    chunks = max(1, math.ceil(n / batch_size))
    bounds = [round(i * n / chunks) for i in range(chunks + 1)]
    batches = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    if isinstance(dataset, TensorDataset):
        return (dataset.batch(idx) for idx in batches)
    if isinstance(dataset, CachedImages):
        return dataset.batches((idx, None) for idx in batches)
    return DataLoader(dataset, batch_sampler=batches, **loader_options(num_workers, pin_memory))


def sample_norm(x):
    """Each sample (axis 0) scaled to zero mean and unit variance (config ``sample_norm``)."""
    axes = tuple(range(1, x.ndim))
    return (x - x.mean(axes, keepdims=True)) / (x.std(axes, keepdims=True) + 1e-6)


def _standardize(source_x, *others):
    mu = source_x.mean(0, keepdims=True)
    sd = source_x.std(0, keepdims=True) + 1e-6
    return [(a - mu) / sd for a in (source_x, *others)]


def _stored_size(meta: dict, key: str, transform: str):
    """The resize / crop a features dataset's images had when its activations were stored: ``meta[key]``, else read
    from the recorded transform (``Resize(size=(146, 146)``, ``CenterCrop(size=(128, 128))``), else None."""
    if meta.get(key) is not None:
        return int(meta[key])
    import re
    m = re.search(r"(?<![A-Za-z])" + ("Resize" if key == "resize" else "CenterCrop") + r"\(size=\((\d+)", transform or "")
    return int(m.group(1)) if m else None


def input_record(spec, cfg, views) -> dict:
    """What a run of ``cfg`` on ``spec`` actually trains on, for its metrics.json: for images the resize, crop and
    the fresh random crop + flip of every draw; for stored activations (``extract-features``) the size of the images
    they were stored from, the backbone and trunk stage that stored them, the head that reads them
    (``reads_it``) and the number of stored training views (0: every draw is the centre crop)."""
    if spec.kind == "images":
        return {"kind": "images", "resize": int(cfg["resize"]), "crop": int(cfg["crop"]),
                "train_views": "a random crop + flip per draw", "input_cache": bool(cfg["input_cache"]),
                "input_device": bool(cfg["input_device"])}
    meta = {k: json.loads(v) for k, v in spec.meta}
    out = {"kind": spec.kind, "views": 0 if views is None else int(views.shape[1])}
    if meta.get("backbone"):
        out.update(stored_by=meta["backbone"], resize=_stored_size(meta, "resize", meta.get("transform")),
                   crop=_stored_size(meta, "crop", meta.get("transform")), trunk=bool(meta.get("trunk", False)),
                   trunk_stage=meta.get("trunk_stage"), reads_it=meta.get("reads_it"),
                   source_dataset=meta.get("source_dataset"))
    return out


def build_task(cfg) -> Task:
    """Resolve ``cfg`` (dataset, source, target, splits) into a :class:`Task`: the declaration (registry), the
    committed lists or the validated arrays (splits), then the torch datasets. Inputs are checked before any
    work: domains, list files (labels in range), array files (labels, values, dimensions)."""
    from . import registry
    from .splits import check_classes, load_arrays, load_views, run_lists, scored

    spec = registry.get_dataset(cfg["dataset"])
    names = [d.name for d in spec.domains]
    for key in ("source", "target"):
        if cfg[key] not in names:
            raise ValueError(f"config key {key!r}: unknown domain {cfg[key]!r} of dataset {spec.name}; "
                             f"known: {', '.join(names)}")
    classes = list(spec.classes)
    src, tgt = (cfg["source"], cfg["source_split"]), (cfg["target"], cfg["target_split"])
    reads, scores = run_lists(spec, *src, *tgt), scored(spec, *tgt)  # eval_lists: train / eval parts
    # images: the version of what this run reads (its lists and the bytes they name); arrays: their files
    if spec.kind == "images":  # lists written for other classes than today's: refused, never read under new names
        check_classes(spec, [d for d, *_ in reads.values()])
    version = registry.dataset_version(spec, *([list(reads.values()), True] if spec.kind == "images" else []))
    if spec.kind == "images":
        root = registry.require_dataset(spec)   # clear "how to get it" error when missing
        train_tf = image_transforms(True, cfg["resize"], cfg["crop"])
        test_tf = image_transforms(False, cfg["resize"], cfg["crop"])
        if cfg["input_cache"]:  # decoded and resized once (dmp/data/cache.py); crops, flips, normalisation per batch
            from . import cache

            held = {role: cache.load(spec, d, split, cfg["resize"], part) for role, (d, split, part) in reads.items()}
            roles = (("source_train", True), ("source_train", False), ("target_train", True), ("target_eval", False))
            cached = device_parts(held, cfg["crop"], roles) if cfg["input_device"] else [
                CachedImages(*held[role], cfg["crop"], train) for role, train in roles]
            return Task(*cached, classes, 3, None, version, scores, input_record(spec, cfg, None))
        small = spec.name == "demo" or spec.cache_images
        lists = {role: registry.list_file(spec, *k) for role, k in reads.items()}

        def images(role, tf):
            return ImageListDataset(root, lists[role], tf, cache=small, num_classes=len(classes))
        return Task(images("source_train", train_tf), images("source_train", test_tf),
                    images("target_train", train_tf), images("target_eval", test_tf), classes, 3, None, version,
                    scores, input_record(spec, cfg, None))
    from ..params import INPUT_PARAMS as PARAMS
    for key in ("resize", "crop", "input_cache", "input_device"):  # the image pipeline's keys do nothing here: refused, never ignored
        if cfg[key] != PARAMS[key].default:
            raise ValueError(f"config key {key!r} = {cfg[key]}: dataset {spec.name} is of kind {spec.kind!r}, read at "
                             f"its stored size; resize, crop and the ImageNet normalisation apply to image datasets "
                             f"(drop {key}; scaling of arrays: sample_norm / standardize)")
    xs, ys = load_arrays(spec, *src)
    xt, yt = load_arrays(spec, *tgt)
    if xs.shape[1:] != xt.shape[1:]:
        root = registry.data_root(spec)
        raise ValueError(f"dataset {spec.name}: source {root / spec.domain(src[0]).folder} has samples of shape "
                         f"{list(xs.shape[1:])}, target {root / spec.domain(tgt[0]).folder} {list(xt.shape[1:])}")
    xs, xt = np.asarray(xs, np.float32), np.asarray(xt, np.float32)
    if cfg["sample_norm"]:
        xs, xt = sample_norm(xs), sample_norm(xt)
    if cfg["standardize"]:
        xs, xt = _standardize(xs, xt)
    for key in ("shift", "scale_jitter"):
        if cfg[key] and xs.ndim != 4:
            raise ValueError(f"config key {key!r} = {cfg[key]}: dataset {spec.name} holds feature vectors, not "
                             f"images; this augmentation needs images (set {key}=0)")
    vs, vt = load_views(spec, *src), load_views(spec, *tgt)  # stored augmented views, if declared
    if (vs is None) != (vt is None) or ((vs is not None) and (cfg["sample_norm"] or cfg["standardize"])):
        raise ValueError(f"dataset {spec.name}: stored training views (views_key) need them on both domains "
                         f"({src[0]}: {vs is not None}, {tgt[0]}: {vt is not None}) and no sample_norm / standardize")
    s = TensorDataset(xs, ys, cfg["shift"], cfg["scale_jitter"], views=vs)
    t = TensorDataset(xt, yt, cfg["shift"], cfg["scale_jitter"], views=vt)
    # the no-grad passes (anchors, evaluation) see the samples as they are
    s_eval, t_eval = TensorDataset(xs, ys), TensorDataset(xt, yt)
    in_channels = xs.shape[1] if xs.ndim == 4 else 1
    return Task(s, s_eval, t, t_eval, classes, in_channels, xs.shape[1] if xs.ndim == 2 else None, version, scores,
                input_record(spec, cfg, vs))
