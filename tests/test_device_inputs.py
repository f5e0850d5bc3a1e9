"""The device input pipeline (config ``input_device``, :class:`dmp.data.cached_images.DeviceImages`): the run's input
caches held as one uint8 tensor on the training device, each training crop and flip drawn there. Checked on the CPU:
the images of every batch are the standard loader's; each sample is the crop of its image at its drawn offset
(mirrored where drawn), pixel for pixel; the draws are uniform and independent by a statistical test with a stated
margin (torchvision's CPU generator cannot run on a GPU, so the draws themselves differ from the standard loader's);
batches are deterministic for a seed and the same after a resume; no DataLoader and no host read per batch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from data_fixtures import isolated  # noqa: F401 (fixture)
from scipy import stats
from scripts_module import load_script
from test_input_cache import _cache, _cfg, _demo

from dmp.config import ConfigError, resolve
from dmp.data import inputs
from dmp.data.cached_images import DeviceImages, DevicePixels
from dmp.data.inputs import BatchStream, mix_seeds, build_task, eval_loader
from dmp.data.load import IMAGENET_MEAN, IMAGENET_STD

oc = load_script("op_count", "benchmarks")


def _normalise(img: torch.Tensor) -> torch.Tensor:
    """ToTensor's ``x / 255`` then Normalize's ``(x - mean) / std``, written out (float32)."""
    mean, std = (torch.tensor(v).view(-1, 1, 1) for v in (IMAGENET_MEAN, IMAGENET_STD))
    return (img.to(torch.float32) / torch.tensor(255.0) - mean) / std


def _by_hand(image: torch.Tensor, top: int, left: int, flip: bool, crop: int) -> torch.Tensor:
    out = image[:, top:top + crop, left:left + crop]
    return out.flip(-1) if flip else out


def test_a_crop_at_an_offset_is_that_window_of_the_image_and_a_flip_its_mirror():
    """Exact indexing, on generated images whose pixel values name their channel, row and column (3 x 9 x 9 values,
    all distinct): every one of the 6 x 6 offsets x 2 flips of a 4 px crop is drawn, and each sample equals
    ``image[:, i:i+4, j:j+4]`` (or its mirror) of its own image."""
    pos = torch.arange(3 * 9 * 9, dtype=torch.uint8).view(3, 9, 9)
    images = torch.stack([pos, 242 - pos])  # two images, so that a sample of the wrong image shows
    ds = DeviceImages(DevicePixels([images.numpy()]), np.array([1, 0]), np.array([5, 7]), crop=4, train=True)
    index = torch.arange(400) % 2
    x, y = ds.draw(index, seed=11)
    crops = ds.crops(400, seed=11)
    assert {tuple(c) for c in crops.tolist()} == {(i, j, f) for i in range(6) for j in range(6) for f in (0, 1)}
    for k, (top, left, flip) in enumerate(crops.tolist()):
        image = images[1 - int(index[k])]  # rows [1, 0]: sample 0 is image 1
        assert torch.equal(x[k], _normalise(_by_hand(image, top, left, bool(flip), 4))), (k, top, left, flip)
    assert y.tolist() == [5, 7] * 200
    # the mirror of a window is its columns reversed: the first column of a flipped crop is the window's last
    top, left, flip = crops[crops[:, 2] == 1][0].tolist()
    k = int(((crops == torch.tensor([top, left, flip])).all(1)).nonzero()[0])
    assert torch.equal(x[k][:, :, 0], _normalise(images[1 - int(index[k])][:, top:top + 4, left + 3:left + 4])[..., 0])


def test_the_draws_are_uniform_and_independent():
    """The draws of 4,000 iterations of 50 samples (the Office-31 protocol's 256 px images, 224 px crops: 33
    offsets each way), each iteration's generator seeded as a stream seeds it. The margins: a chi-square test of each
    offset (33 cells), of the flip, of the pair of offsets (33 x 33 cells) and of the offset-flip pairs, each refused
    only at p < 1e-6; the flip rate within 5 standard errors of 1/2 (0.0056 here); both ends of the range drawn."""
    pixels = DevicePixels([np.zeros((1, 3, 256, 256), np.uint8)])
    ds = DeviceImages(pixels, np.zeros(1, np.int64), np.zeros(1, np.int64), crop=224, train=True)
    draws = torch.cat([ds.crops(50, mix_seeds(0, 0, t, 2)) for t in range(4000)]).numpy()
    top, left, flip = draws.T
    n = len(draws)
    assert top.min() == left.min() == 0 and top.max() == left.max() == 32 and set(flip) == {0, 1}
    assert abs(flip.mean() - 0.5) < 5 * 0.5 / np.sqrt(n)

    def p_uniform(codes, cells):
        return stats.chisquare(np.bincount(codes, minlength=cells)).pvalue

    for name, codes, cells in (("top", top, 33), ("left", left, 33), ("flip", flip, 2),
                               ("top x left", top * 33 + left, 33 * 33), ("top x flip", top * 2 + flip, 66),
                               ("left x flip", left * 2 + flip, 66)):
        assert p_uniform(codes, cells) > 1e-6, name
    # across iterations: the first sample's offset of one iteration says nothing of the next's
    first = draws[::50, 0]
    assert stats.chi2_contingency(np.histogram2d(first[:-1], first[1:], bins=(11, 11))[0]).pvalue > 1e-6


def _tasks(isolated, **over):
    _demo(isolated)
    _cache(_cfg())
    plain = build_task(_cfg(**over))
    held = build_task(_cfg(input_cache=True, input_device=True, **over))
    held.place("cpu")
    return plain, held


def test_each_batch_holds_the_standard_loaders_images_cut_at_their_draws(isolated):
    """Source and target streams, 6 iterations of 7 (more than an epoch of some domains): the labels and images are
    those of the standard (uncached) loader's batches, and each sample is the torchvision-normalised image of that
    loader cut at the sample's drawn offset and flip."""
    plain, held = _tasks(isolated)
    crop = 20
    assert isinstance(held.source_train, DeviceImages) and held.input["input_device"] is True
    for sid, part in enumerate(("source_train", "target_train")):
        standard = BatchStream(getattr(plain, part), 7, 3, sid)
        device = BatchStream(getattr(held, part), 7, 3, sid)
        for t, ((_, y_std), (x, y)) in enumerate(zip(standard.iterate(0, 6), device.iterate(0, 6), strict=True)):
            assert torch.equal(y, y_std) and x.shape == (7, 3, crop, crop) and x.dtype == torch.float32
            crops = getattr(held, part).crops(7, mix_seeds(3, sid, t, 2)).tolist()
            for j, ((i, _), (top, left, flip)) in enumerate(zip(standard.keys(t), crops)):
                ds = getattr(plain, part)
                img = ds._load(i)  # decode, resize, ToTensor, Normalize: the standard loader's steps (kept in memory
                full = img if ds.cache is not None else ds._fixed(img)  # for the demo)
                assert torch.equal(x[j], _by_hand(full, top, left, bool(flip), crop)), (part, t, j)
    for part in ("source_eval", "target_eval"):  # evaluation: the centre crop, as the standard loader's
        want, got = list(eval_loader(getattr(plain, part), 8)), list(eval_loader(getattr(held, part), 8))
        assert len(want) == len(got) > 1
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(want, got))


def test_batches_are_deterministic_for_a_seed_and_the_same_after_a_resume(isolated, monkeypatch):
    """Two builds of the same task give the same batches; another seed other crops; a stream started at iteration
    4 (a resume) the batches 4 and 5 of one started at 0; no DataLoader is made and no batch reads the device on
    the host (the CPU counter of benchmarks/op_count.py)."""
    _, first = _tasks(isolated)
    second = build_task(_cfg(input_cache=True, input_device=True))
    monkeypatch.setattr(inputs, "DataLoader", None)  # a DataLoader made on this path would fail here
    a = list(BatchStream(first.source_train, 7, 3, 0).iterate(0, 6))
    b = list(BatchStream(second.source_train, 7, 3, 0).iterate(0, 6))
    resumed = list(BatchStream(second.source_train, 7, 3, 0).iterate(4, 6))
    other = list(BatchStream(second.source_train, 7, 4, 0).iterate(0, 6))
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(a, b, strict=True))
    assert all(torch.equal(p[0], q[0]) for p, q in zip(a[4:], resumed, strict=True))
    assert not any(torch.equal(p[0], q[0]) for p, q in zip(a, other))
    stream = BatchStream(second.source_train, 7, 3, 0).iterate(0, 20)
    next(stream)
    for _ in range(10):  # iterations 1..10: two epochs of the 30 images begin in them
        assert not oc.count(lambda: next(stream)).syncs


def test_a_run_on_the_device_pipeline_resumes_to_the_same_numbers(isolated, tmp_path):
    """A short DMP run of the demo with ``input_device`` on: 3 iterations, then resumed to 6, ends with the
    uninterrupted run's log.csv and accuracy; it has no DataLoader workers and records its input."""
    from dmp.train.trainer import Trainer
    _demo(isolated, per_class=4)
    _cache(_cfg())
    cfg = _cfg(input_cache=True, input_device=True, pretrained=False, iterations=6, batch_size=8, log_every=1,
               eval_batch_size=16, save_features=4, interpolation_per_class=2, threads=1)
    whole = Trainer(cfg, build_task(cfg), tmp_path / "whole", progress=False).run()
    assert Trainer(cfg, build_task(cfg), tmp_path / "resumed", progress=False).run(stop_after=3) is None
    resumed = Trainer(cfg, build_task(cfg), tmp_path / "resumed", progress=False).run()
    assert resumed["accuracy"] == whole["accuracy"] and whole["data_workers"] == 0
    assert (tmp_path / "resumed" / "log.csv").read_text() == (tmp_path / "whole" / "log.csv").read_text()
    assert whole["input"]["input_device"] is True
    # the key changes the crops: a checkpoint written with it off is not resumed with it on
    off = {**cfg, "input_device": False}
    assert Trainer(off, build_task(off), tmp_path / "off", progress=False).run(stop_after=3) is None
    with pytest.raises(ConfigError, match="config differs in: input_device;"):
        Trainer(cfg, build_task(cfg), tmp_path / "off", progress=False).run()


def test_the_key_needs_the_input_cache_and_images():
    with pytest.raises(ConfigError, match="'input_device' = on holds the input cache on the device: set input_cache"):
        resolve({"dataset": "demo", "source": "solid", "target": "outline", "input_device": True})
    assert resolve({"dataset": "demo", "source": "solid", "target": "outline"})["input_device"] is False
