"""The input cache (config ``input_cache``, dmp/data/cache.py): images decoded and resized once, stored uint8; crops,
flips and the normalisation applied per batch. Checked against the uncached torchvision pipeline itself: the same
batches, bit for bit, for training (per-sample seeds) and evaluation (centre crop), after a resume and whatever
the worker count; a stale or missing cache refused in one line; the CLI writes the cache atomically."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from data_fixtures import isolated  # noqa: F401 (fixture)
from PIL import Image

from dmp.cli import main as dmp_main
from dmp.config import resolve
from dmp.data import cache, registry, splits
from dmp.data.demo import generate
from dmp.data.inputs import BatchStream, CachedImages, build_task, eval_loader
from tests import hang_guard


def _demo(isolated, per_class=3, odd_sizes=True):
    """A small demo dataset; ``odd_sizes``: some images replaced by JPEGs of other, non-square sizes (so the resize
    of the cached path meets real decoding and resampling work)."""
    demo = registry.get_dataset("demo")
    isolated.use(dataclasses.replace(demo, images_per_class=per_class, domains=tuple(
        dataclasses.replace(d, count=per_class * 10) for d in demo.domains)))
    root = registry.data_root(registry.get_dataset("demo"))
    generate(root, per_class=per_class, progress=False)
    splits.prepare("demo", ["full", "partial"])
    if odd_sizes:
        rng = np.random.default_rng(0)
        solid = registry.read_list(registry.list_file(registry.get_dataset("demo"), "solid"))
        for k, (rel, _) in enumerate(solid[::4]):
            h, w = 17 + 11 * k, 40 - 3 * k
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / rel, format="JPEG")
    return root


def _cfg(**over):
    return resolve({"dataset": "demo", "source": "solid", "target": "outline", **over})


def _cache(cfg, domains=("solid", "outline")):
    for d in domains:
        cache.build("demo", d, cfg["resize"], progress=False)


@pytest.mark.parametrize("resize,crop", [(24, 20), (31, 16), (20, 20)])
def test_cached_batches_are_the_uncached_pipelines_bit_for_bit(isolated, resize, crop):
    _demo(isolated)
    plain = build_task(_cfg(resize=resize, crop=crop))
    _cache(_cfg(resize=resize))
    cached = build_task(_cfg(resize=resize, crop=crop, input_cache=True))
    assert isinstance(cached.source_train, CachedImages) and not isinstance(plain.source_train, CachedImages)
    for part in ("source_train", "target_train"):
        sid = 0 if part.startswith("source") else 1
        want = list(BatchStream(getattr(plain, part), 7, 3, sid).iterate(0, 6))
        got = list(BatchStream(getattr(cached, part), 7, 3, sid, num_workers=2).iterate(0, 6))
        for (xw, yw), (xg, yg) in zip(want, got, strict=True):
            assert xg.dtype == xw.dtype == torch.float32 and xg.shape == xw.shape == (7, 3, crop, crop)
            assert torch.equal(xg, xw) and torch.equal(yg, yw)
        # a resumed stream (iterations 4..5 only) gives the same batches
        resumed = list(BatchStream(getattr(cached, part), 7, 3, sid).iterate(4, 6))
        assert all(torch.equal(a[0], b[0]) for a, b in zip(resumed, got[4:], strict=True))
    for part in ("source_eval", "target_eval"):
        want, got = list(eval_loader(getattr(plain, part), 8)), list(eval_loader(getattr(cached, part), 8))
        assert len(want) == len(got) > 1
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(want, got))


def test_the_draws_are_torchvisions_and_flips_and_offsets_vary(isolated):
    _demo(isolated, odd_sizes=False)
    _cache(_cfg())
    ds = build_task(_cfg(resize=24, crop=16, input_cache=True)).source_train
    draws = ds.draws(list(range(200)))
    tops, lefts, flips = zip(*draws)
    assert set(tops) == set(lefts) == set(range(9)) and 60 < sum(flips) < 140
    # independent: torchvision's own transforms on an image whose pixels encode their position
    from torchvision import transforms as T
    pos = torch.arange(24 * 24, dtype=torch.float32).view(1, 24, 24)
    for seed, (top, left, flip) in zip(range(20), draws):
        torch.manual_seed(seed)
        out = T.Compose([T.RandomCrop(16), T.RandomHorizontalFlip()])(pos)[0]
        assert int(out[0, -1 if flip else 0]) == top * 24 + left


def test_a_partial_split_reads_its_rows_of_the_domain_cache(isolated):
    _demo(isolated)
    _cache(_cfg())
    cfg = dict(setting="partial", target_split="partial")
    plain, cached = build_task(_cfg(**cfg)), build_task(_cfg(input_cache=True, **cfg))
    assert len(cached.target_eval) == len(plain.target_eval) < len(cached.source_eval)
    want, got = next(iter(eval_loader(plain.target_eval, 64))), next(iter(eval_loader(cached.target_eval, 64)))
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])


def test_missing_and_stale_caches_are_refused_in_one_line(isolated):
    root = _demo(isolated)
    with pytest.raises(registry.DatasetMissingError, match=r"python -m dmp data cache demo --resize 24 --domains"):
        build_task(_cfg(input_cache=True))
    _cache(_cfg())
    build_task(_cfg(input_cache=True))
    rel = registry.read_list(registry.list_file(registry.get_dataset("demo"), "outline"))[3][0]
    Image.new("RGB", (9, 9), (1, 2, 3)).save(root / rel, format="PNG")  # an image replaced in place
    with pytest.raises(ValueError, match=r"outline\.json: stale input cache \(its content_version differ") as err:
        build_task(_cfg(input_cache=True))
    assert "\n" not in str(err.value)
    cache.build("demo", "outline", 24, progress=False)
    build_task(_cfg(input_cache=True))
    lst = registry.list_file(registry.get_dataset("demo"), "solid")
    lst.write_text("".join(lst.read_text().splitlines(True)[1:]))  # the list changed
    with pytest.raises(ValueError, match=r"solid\.json: stale input cache \(its version, content_version, list_sha256"):
        build_task(_cfg(input_cache=True))


def test_the_cli_writes_the_cache_atomically_beside_the_data(isolated, capsys):
    _demo(isolated, odd_sizes=False)
    with pytest.raises(SystemExit) as done:
        dmp_main(["data", "cache", "demo", "--resize", "12", "--domains", "solid", "outline", "--workers", "0"])
    assert done.value.code == 0
    folder = isolated.path / "data" / ".demo.cache" / "12"
    assert sorted(p.name for p in folder.iterdir()) == ["outline.json", "outline.npy", "solid.json", "solid.npy"]
    meta = json.loads((folder / "solid.json").read_text())
    pixels = np.load(folder / "solid.npy", mmap_mode="r")
    assert isinstance(pixels, np.memmap) and pixels.shape == (30, 3, 12, 12) and pixels.dtype == np.uint8
    assert meta["size"] == 12 and len(meta["paths"]) == 30 and meta["labels"][:3] == [0, 0, 0]
    # the pixels are the PIL resize of the decoded image
    first = Image.open(registry.data_root(registry.get_dataset("demo")) / meta["paths"][0]).convert("RGB")
    first = first.resize((12, 12), Image.BILINEAR)
    assert np.array_equal(pixels[0], np.asarray(first).transpose(2, 0, 1))
    with pytest.raises(SystemExit):
        dmp_main(["data", "cache", "demo", "--domains", "nowhere"])
    assert "has no domain 'nowhere'" in capsys.readouterr().err


def test_a_run_with_the_cache_ends_with_the_same_numbers(isolated, tmp_path):
    from dmp.train.trainer import Trainer
    _demo(isolated, per_class=4)
    _cache(_cfg())
    common = dict(pretrained=False, iterations=6, batch_size=8, log_every=1, eval_batch_size=16, save_features=0,
                  interpolation_per_class=2, threads=1)
    out = {}
    for on in (False, True, "resumed"):
        cfg = _cfg(input_cache=bool(on), **common)
        if on == "resumed":  # 3 iterations without the cache, the rest with it (input_cache is a runtime key)
            off = _cfg(input_cache=False, **common)
            assert Trainer(off, build_task(off), tmp_path / str(on), progress=False).run(stop_after=3) is None
        out[on] = Trainer(cfg, build_task(cfg), tmp_path / str(on), progress=False).run()
    for on in (True, "resumed"):
        assert out[on]["accuracy"] == out[False]["accuracy"]
        assert out[on]["target_mean_prediction"] == out[False]["target_mean_prediction"]
        assert out[on]["class_weights"] == out[False]["class_weights"]
        assert (tmp_path / str(on) / "log.csv").read_text() == (tmp_path / "False" / "log.csv").read_text()


@pytest.mark.slow
def test_train_jobs_with_the_cache_depend_on_the_cache_of_their_domains(tmp_path):
    """A Snakemake dry run of one row with ``train: {input_cache: true}``: one cache job per domain at the runs'
    resize, its output the cache beside the data folder, each train job's inputs the caches of its two domains; the
    same row without the key has no cache job."""
    import os
    import re
    import sys

    import yaml
    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "config" / "config.yaml").read_text())
    cfg.setdefault("train", {})["input_cache"] = True
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    out = {}
    for extra in ([], ["--configfile", str(tmp_path / "c.yaml")]):
        proc = hang_guard.run([sys.executable, "-m", "snakemake", "-n", "row_vanilla_office31_dmp", *extra], cwd=root,
                              quiet=1800)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out[bool(extra)] = proc.stdout
    assert "input_cache_office31" not in out[False]
    caches = set(re.findall(r"output: (\S+)/256/(\w+)\.npy, \1/256/\2\.json", out[True]))
    assert {d for _, d in caches} == {"amazon", "dslr", "webcam"}
    folder = os.path.relpath(cache.cache_root(registry.get_dataset("office31")), root)
    assert {f for f, _ in caches} == {folder}
    trains = [b for b in out[True].split("\nrule ")[1:] if b.startswith("train:")]
    assert len(trains) == 18
    for block in trains:
        task = re.search(r"vanilla/(\w)-(\w)/", block).groups()
        names = {"A": "amazon", "D": "dslr", "W": "webcam"}
        assert re.search(r"^    input: (.*)$", block, re.M).group(1) == ", ".join(
            f"{folder}/256/{names[t]}.json" for t in task)
