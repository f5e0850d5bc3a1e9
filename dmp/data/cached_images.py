"""The datasets that read the input cache (:mod:`dmp.data.cache`, config ``input_cache``): whole batches gathered
from a domain's uint8 memory map and augmented on the training device with the uncached pipeline's own draws
(:class:`CachedImages`), or cut from the run's domains held whole on the training device, with crops and flips drawn
there (:class:`DeviceImages`, config ``input_device``)."""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from .load import IMAGENET_MEAN, IMAGENET_STD, sample_key


class CachedImages(Dataset):
    """The images of a run's list read from the input cache (:mod:`dmp.data.cache`, config ``input_cache``): rows
    ``rows`` of ``pixels``, a uint8 ``[N, 3, resize, resize]`` memory map holding each image after the resize of
    :func:`image_transforms`.

    ``train``: the random crop and horizontal flip of :func:`image_transforms`, drawn from each sample's
    augmentation seed with the calls torchvision's RandomCrop and RandomHorizontalFlip make (:meth:`draws`), so
    the crops and flips are the uncached pipeline's; else its centre crop. A whole batch is gathered at once (one
    copy out of the map, into page-locked memory when :attr:`device` is CUDA), copied to :attr:`device`, cropped
    and flipped there (one gather) and converted with the float operations of ToTensor and Normalize (``x / 255``,
    then ``(x - mean) / std``): the batches are bit-identical to the uncached pipeline's. :meth:`batches` gathers
    the next batch in a background thread while the current one is used. No DataLoader workers are involved, so the
    batches are the same for any worker count."""

    cache = "disk"  # read from the input cache: the trainer's num_workers auto gives no workers

    def __init__(self, pixels, rows, labels, crop: int, train: bool):
        self.pixels, self.rows = pixels, np.asarray(rows, dtype=np.int64)
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        self.crop, self.train, self.size = int(crop), bool(train), int(pixels.shape[-1])
        self.device = torch.device("cpu")  # where batches are converted (Task.place)
        self._stats: dict = {}

    def __len__(self):
        return len(self.rows)

    def draws(self, seeds) -> list[tuple[int, int, bool]]:
        """``(top, left, flip)`` of each sample: for training, what ``RandomCrop(crop)`` then
        ``RandomHorizontalFlip()`` draw from torch's CPU generator seeded with the sample's seed (``None``: torch's
        default generator as it stands): two ``torch.randint`` offsets (none when the crop is the whole image), then
        ``torch.rand(1) < 0.5``; else the centre crop of ``CenterCrop`` (``round((resize - crop) / 2)``)."""
        size, c = self.size, self.crop
        if not self.train:
            off = int(round((size - c) / 2.0))
            return [(off, off, False)] * len(seeds)
        out, g = [], torch.Generator()
        for seed in seeds:
            gen = None if seed is None else g.manual_seed(int(seed))
            top = left = 0
            if size != c:
                top = int(torch.randint(0, size - c + 1, size=(1,), generator=gen).item())
                left = int(torch.randint(0, size - c + 1, size=(1,), generator=gen).item())
            out.append((top, left, bool(torch.rand(1, generator=gen) < 0.5)))
        return out

    def _gather(self, idx, seeds, draws=None):
        """The whole uint8 images ``[B, 3, resize, resize]`` of samples ``idx`` (one copy out of the map), their draws
        ``[B, 3]`` (top, left, flip) and labels; page-locked for a CUDA device."""
        draws = self.draws(seeds) if draws is None else draws
        pin = self.device.type == "cuda"
        images = torch.empty((len(idx), *self.pixels.shape[1:]), dtype=torch.uint8, pin_memory=pin)
        np.take(self.pixels, self.rows[np.asarray(idx, dtype=np.int64)], axis=0, out=images.numpy())
        params = torch.tensor(draws, dtype=torch.long).reshape(len(idx), 3)
        return images, params.pin_memory() if pin else params, self.labels[torch.as_tensor(idx, dtype=torch.long)]

    def place(self, device):
        """Convert the batches on ``device`` (:meth:`dmp.data.inputs.Task.place`)."""
        self.device = torch.device(device)

    def _convert(self, images, params, index=None):
        """On :attr:`device`: each image's crop (flipped where drawn), then uint8 -> float with ToTensor's ``x / 255``
        and Normalize's ``(x - mean) / std``. The 255 is a tensor on the device: CUDA divides by a host scalar as a
        multiplication by its reciprocal (up to 1 ulp away, 7e-7 after normalisation on an H200), by a tensor with
        an IEEE division, as the CPU does. ``index``: the rows of ``images`` that hold the batch (``images`` is then
        a whole :class:`DevicePixels` tensor); by default row ``i`` is sample ``i``."""
        cuda = self.device.type == "cuda"
        x = images.to(self.device, non_blocking=cuda)
        c, dev = self.crop, x.device
        if dev not in self._stats:
            self._stats[dev] = [torch.as_tensor(v, dtype=torch.get_default_dtype(), device=dev).view(-1, 1, 1)
                                for v in (255.0, IMAGENET_MEAN, IMAGENET_STD)]
            self._stats[dev] += [torch.arange(c, device=dev), torch.arange(3, device=dev).view(1, 3, 1, 1)]
        full, mean, std, span, channels = self._stats[dev]
        if self.train:  # one gather for the batch: rows top + i, columns left + j (reversed when flipped)
            p = params.to(dev, non_blocking=cuda)
            rows, cols = p[:, :1] + span, p[:, 1:2] + span
            cols = torch.where(p[:, 2:].bool(), cols.flip(1), cols)
            b = (torch.arange(len(x), device=dev) if index is None else index).view(-1, 1, 1, 1)
            x = x[b, channels, rows[:, None, :, None], cols[:, None, None, :]]
        else:  # the centre crop
            top, left = int(params[0, 0]), int(params[0, 1])
            x = x[:, :, top:top + c, left:left + c] if index is None else x[index, :, top:top + c, left:left + c]
        return x.to(torch.get_default_dtype()).div_(full).sub_(mean).div_(std)

    def batches(self, jobs):
        """Yield ``(x, y)`` for each ``(indices, seeds or None)`` of ``jobs``, ``x`` on :attr:`device`; the next
        batch is gathered in a background thread meanwhile (one batch ahead)."""
        from concurrent.futures import ThreadPoolExecutor

        jobs = iter(jobs)
        with ThreadPoolExecutor(1) as pool:
            def submit():
                job = next(jobs, None)
                if job is None:
                    return None
                idx, seeds = [int(i) for i in job[0]], job[1]
                if seeds is None:  # draws from the default generator (training only) stay in this thread
                    seeds = [None] * len(idx)
                    return pool.submit(self._gather, idx, seeds, self.draws(seeds))
                return pool.submit(self._gather, idx, list(seeds))
            ahead = submit()
            while ahead is not None:
                images, params, y = ahead.result()
                ahead = submit()
                yield self._convert(images, params), y

    def subset(self, indices) -> "CachedImages":
        """The samples ``indices`` of this dataset, read from the same map."""
        part = type(self)(self.pixels, self.rows[np.asarray(indices, dtype=np.int64)],
                          self.labels[torch.as_tensor(indices, dtype=torch.long)], self.crop, self.train)
        part.place(self.device)
        return part

    def batch(self, idx, seeds=None):
        """One batch (``seeds``: augmentation seeds, per sample)."""
        return next(self.batches([(idx, seeds)]))

    def __getitem__(self, key):
        i, seed = sample_key(key)
        x, y = self.batch([i], [seed])
        return x[0], y[0]


class DevicePixels:
    """The uint8 images of a run's domains as one tensor ``[N, 3, resize, resize]``: each domain's input cache
    (:func:`dmp.data.cache.load`), one after another (domain ``k`` from row ``offsets[k]``), copied to a device once,
    in chunks of 256 images (:meth:`on`). Office-31 at 256 px: 4,110 images, 808 MB."""

    def __init__(self, arrays):
        self.arrays = list(arrays)
        self.offsets = [int(v) for v in np.cumsum([0] + [len(a) for a in self.arrays])]
        self.shape = (self.offsets[-1], *self.arrays[0].shape[1:])
        self._held: tuple = (None, None)

    def on(self, device) -> torch.Tensor:
        """The images as one uint8 tensor on ``device`` (copied there on the first call for that device)."""
        device = torch.device(device)
        if self._held[0] != device:
            held = torch.empty(self.shape, dtype=torch.uint8, device=device)
            for start, arr in zip(self.offsets, self.arrays):
                for i in range(0, len(arr), 256):
                    part = torch.from_numpy(np.array(arr[i:i + 256]))  # (a writable copy of the map)
                    held[start + i:start + i + len(part)].copy_(part)
            self._held = (device, held)
        return self._held[1]


class DeviceImages(CachedImages):
    """The images of a run's list (config ``input_device``), cut from :class:`DevicePixels`, the run's domains held
    whole on :attr:`device`; rows ``rows`` of it, labels ``labels``. No DataLoader workers, and no copy from the host
    per batch but the sample indices of an evaluation batch.

    Training batches (:meth:`draw`, what :class:`dmp.data.inputs.BatchStream` yields for this dataset): the images
    the standard loader takes at that iteration (the same sample indices), each with a random crop and a horizontal
    flip drawn on the device from a generator seeded with the iteration's seed (:meth:`crops`): the same
    distribution as :meth:`CachedImages.draws` (offsets uniform over ``0..resize - crop``, a flip with probability
    1/2, all independent; tests/test_device_inputs.py), not the same draws (torch's CPU generator cannot run on a
    GPU). A draw depends on (run seed, stream, iteration) only, so a resumed run cuts the same later batches. The
    keyed access ``dataset[(index, seed)]`` and :meth:`batches` keep :class:`CachedImages`' draws; evaluation is the
    centre crop, as there."""

    cache = "device"

    def place(self, device):
        """Hold the images (:meth:`DevicePixels.on`), rows and labels on ``device``."""
        self.device = torch.device(device)
        self._on = (self.pixels.on(self.device), torch.as_tensor(self.rows).to(self.device),
                    self.labels.to(self.device))
        self._generator, self._placed_on = torch.Generator(device=self.device), self.device

    def _placed(self):
        """``(images, rows, labels)`` on :attr:`device` (placed there first if they are not)."""
        if getattr(self, "_placed_on", None) != self.device:
            self.place(self.device)
        return self._on

    def crops(self, count: int, seed: int) -> torch.Tensor:
        """``[count, 3]`` long on :attr:`device`: (top, left, flip) of ``count`` samples, from one ``torch.randint``
        over the ``2 (resize - crop + 1)^2`` combinations of a generator on the device seeded with ``seed``: every
        combination equally likely (up to the modulo of torch's 32-bit draw, below 1e-6), so the two offsets and the
        flip are uniform and independent."""
        self._placed()
        span = self.size - self.crop + 1
        u = torch.randint(0, 2 * span * span, (count,), generator=self._generator.manual_seed(int(seed)),
                          device=self.device)
        return torch.stack([u // (2 * span), u // 2 % span, u % 2], 1)

    def draw(self, index: torch.Tensor, seed: int):
        """The training batch ``(x, y)`` of samples ``index`` (long, on :attr:`device`), cropped and flipped as
        :meth:`crops` draws from ``seed``, both on :attr:`device`."""
        held, rows, labels = self._placed()
        return self._convert(held, self.crops(len(index), seed), rows[index]), labels[index]

    def batches(self, jobs):
        """Yield ``(x, y)`` for each ``(indices, seeds or None)`` of ``jobs``: the crops :meth:`CachedImages.draws`
        gives (a training part) or the centre crop, cut on :attr:`device`; ``y`` on the host, as there."""
        held, rows, _ = self._placed()
        for job in jobs:
            idx = torch.as_tensor([int(i) for i in job[0]], dtype=torch.long)
            seeds = [None] * len(idx) if job[1] is None else list(job[1])
            params = torch.tensor(self.draws(seeds), dtype=torch.long).reshape(len(idx), 3)
            cuda = self.device.type == "cuda"
            if cuda:  # (page-locked: copied without waiting)
                params, idx = params.pin_memory(), idx.pin_memory()
            on = idx.to(self.device, non_blocking=cuda)
            yield self._convert(held, params, rows[on]), self.labels[idx]


def device_parts(held: dict, crop: int, roles) -> list[DeviceImages]:
    """A task's parts ``roles`` (``(role, train)`` pairs) as :class:`DeviceImages` cut from one
    :class:`DevicePixels` of the domains they read: ``held`` maps each role to :func:`dmp.data.cache.load`'s
    ``(memory map, rows, labels)``; a domain read by two roles is held once."""
    arrays: dict = {}
    for arr, _, _ in held.values():
        arrays.setdefault(getattr(arr, "filename", None) or id(arr), arr)
    pixels = DevicePixels(arrays.values())
    start = dict(zip(arrays, pixels.offsets))
    out = []
    for role, train in roles:
        arr, rows, labels = held[role]
        out.append(DeviceImages(pixels, np.asarray(rows) + start[getattr(arr, "filename", None) or id(arr)], labels,
                                crop, train))
    return out
