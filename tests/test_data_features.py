"""``extract-features``: a backbone run once over an image dataset gives a registered features dataset whose
yaml records the backbone, weights and transform."""
from __future__ import annotations


import numpy as np
import pytest
import yaml
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.cli import build_parser
from dmp.data import registry, splits

torch = pytest.importorskip("torch")


def _run(parser, argv):
    args = parser.parse_args(argv)
    return args.func(args)


def _small_demo(isolated, monkeypatch, per_class: int):
    """The demo dataset generated with ``per_class`` images per class into the isolated copy, with its full lists."""
    import dataclasses

    from dmp.data.demo import generate

    monkeypatch.delenv("DMP_DATA_DIR")
    demo = registry.get_dataset("demo")
    isolated.use(dataclasses.replace(demo, images_per_class=per_class, domains=tuple(
        dataclasses.replace(d, count=10 * per_class) for d in demo.domains)))
    generate(registry.data_root(registry.get_dataset("demo")), per_class=per_class, progress=False)
    splits.prepare("demo", ["full"])


def test_extract_features_from_demo(isolated, monkeypatch):
    _small_demo(isolated, monkeypatch, 3)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    weights = isolated.path / "tiny.pt"
    torch.save(net.state_dict(), weights)
    from dmp.models import backbones
    net.weights_file = weights  # a builder's contract: the file its weights came from (hashed into the metadata)
    monkeypatch.setitem(backbones.BACKBONES, "tiny", backbones.BackboneSpec("tiny", lambda weights_path=None, **_: (
        net.load_state_dict(torch.load(weights_path, weights_only=True)) and None or net, 4)))
    parser = build_parser()
    args = parser.parse_args(["data", "extract-features", "demo", "--out-name", "demo_tiny", "--backbone", "tiny",
                              "--weights-path", str(weights), "--resize", "32", "--crop", "28"])
    assert args.func(args) == 0
    spec = registry.get_dataset("demo_tiny")
    assert spec.kind == "features" and spec.classes == registry.get_dataset("demo").classes
    x, y = splits.load_arrays(registry.get_dataset("demo_tiny"), "noisy")
    assert x.shape == (30, 4) and np.isfinite(x).all() and np.bincount(y).tolist() == [3] * 10
    xp, yp = splits.load_arrays(registry.get_dataset("demo_tiny"), "noisy", "partial")
    assert sorted(set(yp.tolist())) == [0, 1, 2, 3, 4]
    doc = yaml.safe_load((registry.dataset_dir("demo_tiny") / "dataset.yaml").read_text())
    meta = doc["meta"]
    assert meta["backbone"] == "tiny" and meta["weights_path"] == str(weights)
    assert len(meta["weights_sha256"]) == 64 and "CenterCrop" in meta["transform"]
    assert meta["source_dataset"] == "demo" and len(meta["source_version"]) == 12
    # the stored features are the backbone's output on the listed images, in list order
    from dmp.data.inputs import ImageListDataset, image_transforms
    demo = registry.get_dataset("demo")
    ds = ImageListDataset(registry.data_root(demo), registry.list_file(demo, "noisy"), image_transforms(False, 32, 28))
    with torch.no_grad():
        ref = net(ds[0][0][None]).numpy()[0]
    assert np.allclose(x[0], ref, atol=1e-5)


def test_extract_features_needs_the_images(isolated):
    from dmp.models.extract import extract_features

    with pytest.raises(registry.DatasetMissingError, match="python -m dmp data demo"):
        extract_features("demo", "x", backbone="smallcnn", pretrained=False)


def test_an_existing_dataset_is_never_replaced(isolated):
    """``--out-name`` naming a dataset that exists (a user's, or an earlier extraction) is refused before any work;
    its dataset.yaml is left as it was."""
    from dmp.models.extract import extract_features

    yml = registry.dataset_dir("mine") / "dataset.yaml"
    yml.parent.mkdir(parents=True, exist_ok=True)
    yml.write_text("kind: features  # the user's own declaration\n")
    with pytest.raises(FileExistsError, match=r"--out-name 'mine': .*dataset.yaml exists; extract-features never "
                                              r"replaces a dataset"):
        extract_features("demo", "mine", backbone="smallcnn", pretrained=False)
    assert yml.read_text() == "kind: features  # the user's own declaration\n"


def test_trunk_views_feed_the_head_and_the_preset_of_their_dataset(isolated, monkeypatch):
    """``--views 2``: the stored X is the trunk on the centre crop, X_views the trunk on the training transform drawn
    from (image, view); a training draw takes view ``seed mod V``, the no-grad passes X; the runs on it get the
    preset of the dataset the images came from, with the head of that trunk."""
    pytest.importorskip("timm")
    from dmp.config import _preset
    from dmp.models.extract import _Views
    from dmp.data.inputs import ImageListDataset, TensorDataset, image_transforms
    from dmp.models import build_backbone
    from dmp.models.efficientnet import trunk

    _small_demo(isolated, monkeypatch, 1)
    parser = build_parser()
    args = parser.parse_args(["data", "extract-features", "demo", "--out-name", "demo_trunk", "--backbone",
                              "efficientnet_lite0", "--no-pretrained", "--resize", "40", "--crop", "32", "--views", "2"])
    torch.manual_seed(0)  # the random initialisation of the trunk; the reference below is built the same way
    assert args.func(args) == 0
    x, _ = splits.load_arrays(registry.get_dataset("demo_trunk"), "noisy")
    views = splits.load_views(registry.get_dataset("demo_trunk"), "noisy")
    assert x.shape == (10, 320) and views.shape == (10, 2, 320)   # 320 channels x 1 x 1 at 32 px
    torch.manual_seed(0)
    net = trunk(build_backbone("efficientnet_lite0", pretrained=False)[0]).eval()
    demo = registry.get_dataset("demo")
    images = ImageListDataset(registry.data_root(demo), registry.list_file(demo, "noisy"), image_transforms(False, 40, 32))
    stack, _ = _Views(images, image_transforms(False, 40, 32), image_transforms(True, 40, 32), 2)[3]
    with torch.no_grad():
        ref = net(stack).flatten(1).numpy()
        centre = net(images[3][0][None]).flatten(1).numpy()[0]    # the image pipeline's own decode and crop
    assert np.allclose(x[3], centre, atol=1e-5) and np.allclose(stack[0], images[3][0])
    assert np.allclose(views[3], ref[1:], atol=1e-5)
    assert not np.allclose(views[3, 0], views[3, 1])          # two different crops
    ds = TensorDataset(x, np.zeros(10), views=views)
    got, _ = ds.batch([3, 3, 4], [7, 10, 10])                   # seeds 7, 10 -> views 1, 0, 0
    assert torch.equal(got, torch.as_tensor(np.stack([views[3, 1], views[3, 0], views[4, 0]])))
    assert torch.equal(ds[3][0], torch.as_tensor(x[3])) and torch.equal(ds[(3, 7)][0], torch.as_tensor(views[3, 1]))
    preset = _preset("demo_trunk", "vanilla")
    assert preset["backbone"] == "efficientnet_lite0_top" and preset["lr"] == 1e-3   # the demo's preset, its head
    assert "crop" not in preset and "resize" not in preset        # the stored activations were cropped already


def test_trunk_stage_stores_the_activations_before_that_stage_for_its_from_backbone(isolated, monkeypatch):
    """``--trunk-stage 5``: X is the network up to (not including) stage 5 on the centre crop, and the runs on it
    fine-tune stages 5.. and the head (``efficientnet_lite0_from5``); a stage the network has not is refused."""
    pytest.importorskip("timm")
    from dmp.config import _preset
    from dmp.data.inputs import ImageListDataset, image_transforms
    from dmp.models import build_backbone
    from dmp.models.efficientnet import trunk

    _small_demo(isolated, monkeypatch, 1)
    parser = build_parser()
    base = ["data", "extract-features", "demo", "--backbone", "efficientnet_lite0", "--no-pretrained", "--resize",
            "40", "--crop", "32"]
    torch.manual_seed(0)
    assert _run(parser, base + ["--out-name", "demo_s5", "--trunk-stage", "5"]) == 0
    x, _ = splits.load_arrays(registry.get_dataset("demo_s5"), "noisy")
    assert x.shape == (10, 112 * 2 * 2)                          # 112 channels x 2 x 2 before stage 5 at 32 px
    torch.manual_seed(0)
    backbone = build_backbone("efficientnet_lite0", pretrained=False)[0].eval()
    demo = registry.get_dataset("demo")
    images = ImageListDataset(registry.data_root(demo), registry.list_file(demo, "noisy"), image_transforms(False, 40, 32))
    with torch.no_grad():
        assert np.allclose(x[3], trunk(backbone, 5)(images[3][0][None]).flatten(1).numpy()[0], atol=1e-5)
    meta = dict(registry.get_dataset("demo_s5").meta)
    assert meta["reads_it"] == '"efficientnet_lite0_from5"' and meta["trunk_stage"] == "5"
    assert _preset("demo_s5", "vanilla")["backbone"] == "efficientnet_lite0_from5"
    for bad in (["--backbone", "efficientnet_lite0", "--trunk-stage", "7"], ["--backbone", "smallcnn", "--trunk-stage", "2"]):
        with pytest.raises(SystemExit):
            _run(parser, base[:3] + bad + ["--no-pretrained", "--out-name", "demo_bad"])
    assert not (registry.dataset_dir("demo_bad") / "dataset.yaml").exists()


def test_someone_elses_features_in_the_data_folder_are_never_replaced(isolated, monkeypatch, tmp_path, capsys):
    """With ``DMP_DATA_DIR=<dd>``, an existing ``<dd>/<out-name>/<domain>.npz`` (another user's, or an interrupted
    extraction's) is refused in one line naming it, before any work, and left as it was."""
    _small_demo(isolated, monkeypatch, 1)
    dd = tmp_path / "dd"
    theirs = dd / "ufeat2" / "solid.npz"
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"their features")
    monkeypatch.setenv("DMP_DATA_DIR", str(dd))
    parser = build_parser()
    with pytest.raises(SystemExit) as exit_:
        _run(parser, ["data", "extract-features", "demo", "--out-name", "ufeat2", "--backbone", "smallcnn",
                      "--no-pretrained", "--resize", "24", "--crop", "20"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and "\n" not in err and str(theirs) in err and "never replaces" in err
    assert theirs.read_bytes() == b"their features" and not (dd / "ufeat2" / "noisy.npz").exists()
    assert not (registry.dataset_dir("ufeat2") / "dataset.yaml").exists()
