"""Inputs validated before any work, each error naming the file (and line or sample): labels in range
and integral in list files and arrays, images decoded to 8-bit RGB whatever their mode (16-bit, palette, CMYK,
grey), ``data verify --verify-images`` catching unreadable images, finite features of matching dimensions, and
``extract-features --out-name`` never writing outside datasets/."""
from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)
from PIL import Image

from dmp.cli import main as dmp_main
from dmp.config import resolve
from dmp.data import cli, load, registry, splits
from dmp.data.demo import generate
from dmp.data.inputs import ImageListDataset, build_task


def _demo(isolated, per_class=3):
    demo = registry.get_dataset("demo")
    isolated.use(dataclasses.replace(demo, images_per_class=per_class, domains=tuple(
        dataclasses.replace(d, count=per_class * 10) for d in demo.domains)))
    generate(registry.data_root(registry.get_dataset("demo")), per_class=per_class, progress=False)
    splits.prepare("demo", ["full"])
    return registry.list_file(registry.get_dataset("demo"), "solid")


@pytest.mark.parametrize("label", ["-1", "10", "3.0", "2.5"])
def test_a_bad_label_in_a_list_stops_the_run_naming_file_and_line(isolated, label):
    lst = _demo(isolated)
    lines = lst.read_text().splitlines()
    lines[4] = lines[4].rsplit(" ", 1)[0] + " " + label
    lst.write_text("\n".join(lines) + "\n")
    cfg = resolve({"dataset": "demo", "source": "solid", "target": "outline"})
    with pytest.raises(ValueError, match=rf"solid_full\.txt:5: .*{label}"):
        build_task(cfg)


def test_list_files_accept_crlf_and_tabs(tmp_path):
    (tmp_path / "l.txt").write_bytes(b"c/a b.jpg 3\r\ni/x.JPEG\t11\r\n\r\n")
    assert registry.read_list(tmp_path / "l.txt", 12) == [("c/a b.jpg", 3), ("i/x.JPEG", 11)]


def _pixels(tmp_path, img, name, **save):
    img.save(tmp_path / name, **save)
    (tmp_path / "l.txt").write_text(f"{name} 0\n")
    return np.asarray(ImageListDataset(tmp_path, tmp_path / "l.txt", np.asarray, num_classes=1)[0][0])


def test_images_are_decoded_to_8_bit_rgb(tmp_path):
    ramp = (np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000)  # 0 .. 63000 of 65535
    deep = Image.fromarray(ramp)
    assert deep.mode.startswith("I;16")
    rgb = _pixels(tmp_path, deep, "deep.png")
    assert rgb.dtype == np.uint8 and rgb.shape == (8, 8, 3)
    assert np.abs(rgb[..., 0].astype(int) - np.rint(ramp / 257)).max() <= 1 and rgb.max() < 250  # not all white
    grey = np.arange(64, dtype=np.uint8).reshape(8, 8) * 4
    assert (_pixels(tmp_path, Image.fromarray(grey, "L"), "grey.png")[..., 1] == grey).all()
    pal = Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8) % 4, "P")
    pal.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30] + [0] * 756)
    out = _pixels(tmp_path, pal, "pal.png", transparency=3)
    assert out[0, 0].tolist() == [255, 0, 0] and out[0, 2].tolist() == [0, 0, 255]
    cmyk = Image.new("CMYK", (8, 8), (0, 255, 255, 0))  # red ink
    red = _pixels(tmp_path, cmyk, "cmyk.jpg", quality=95)
    assert red[..., 0].mean() > 200 and red[..., 1].mean() < 60
    assert _pixels(tmp_path, Image.fromarray(grey, "L").convert("LA"), "la.png")[..., 2].tolist() == grey.tolist()


def test_verify_images_catches_unreadable_images(isolated, capsys):
    _demo(isolated)
    root = registry.data_root(registry.get_dataset("demo"))
    bad = root / "noisy" / "images" / "star" / "star_0001.png"
    bad.write_bytes(bad.read_bytes()[:60])  # truncated
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):  # without decoding: the bytes differ from what the generator draws
        cli.main(parser.parse_args(["data", "verify", "demo"]))
    assert f"{bad} differ from what the demo generator draws" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(parser.parse_args(["data", "verify", "demo", "--verify-images"]))
    assert f"unreadable image {bad}" in capsys.readouterr().err


def _features(isolated, monkeypatch, x_src, y_src, x_tgt=None, y_tgt=None, extra=""):
    monkeypatch.delenv("DMP_DATA_DIR")
    root = registry.DATASETS_DIR / "feats"
    (root / "data").mkdir(parents=True)
    np.savez(root / "data" / "src.npz", X=x_src, y=y_src)
    np.savez(root / "data" / "tgt.npz", X=x_src if x_tgt is None else x_tgt, y=y_src if y_tgt is None else y_tgt)
    (root / "dataset.yaml").write_text("kind: features\nclasses: [a, b, c]\n" + extra + "domains:\n"
                                       "  - {name: src, file: src.npz}\n  - {name: tgt, file: tgt.npz}\n")
    return root / "data"


def test_schedule_of_a_features_dataset_counts_its_rows(isolated, monkeypatch, capsys):
    """``python -m dmp config --schedule`` on a features dataset that declares no counts: the split's size is read
    from the file's labels (it used to fail: "no image lists"); without the file, one line says what is missing."""
    data = _features(isolated, monkeypatch, np.zeros((120, 4), np.float32), np.arange(120) % 3,
                     extra="partial_classes: [0, 1]\n")
    assert splits.split_size(registry.get_dataset("feats"), "src", "full") == 120
    assert splits.split_size(registry.get_dataset("feats"), "tgt", "partial") == 80
    with pytest.raises(SystemExit) as exc:
        dmp_main(["config", "--schedule", "dataset=feats", "source=src", "target=tgt", "batch_size=50"])
    assert exc.value.code == 0
    assert '"iterations_per_epoch": 3' in capsys.readouterr().out  # ceil(120 / 50)
    (data / "src.npz").unlink()
    with pytest.raises(ValueError, match=r"dataset 'feats' domain 'src': the size of split 'full' needs the data "
                                         r"file .*src\.npz.* or a declared `count`"):
        splits.split_size(registry.get_dataset("feats"), "src", "full")


def test_float_labels_are_never_truncated(isolated, monkeypatch):
    _features(isolated, monkeypatch, np.zeros((3, 4), np.float32), np.array([0.0, 1.0, 2.5]))
    with pytest.raises(ValueError, match=r"src\.npz: labels 'y' must be integers; sample 2 has label 2\.5"):
        splits.load_arrays(registry.get_dataset("feats"), "src")


def test_a_label_below_zero_is_refused(isolated, monkeypatch):
    _features(isolated, monkeypatch, np.zeros((3, 4), np.float32), np.array([0, 1, 0]), extra="label_offset: -1\n")
    with pytest.raises(ValueError, match=r"src\.npz: labels \(after offset -1\) span -1\.\.0.*sample 0"):
        splits.load_arrays(registry.get_dataset("feats"), "src")


def test_labels_numbered_from_one_name_the_offset_to_set(isolated, monkeypatch):
    """MATLAB files (e.g. the Office-Caltech10 SURF features) number classes from 1: the error says which
    ``label_offset`` fixes it; labels that are merely out of range get no such hint."""
    data = _features(isolated, monkeypatch, np.zeros((3, 4), np.float32), np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=r"span 1\.\.3, expected 0\.\.2 .*numbered from 1\? set label_offset: -1"):
        splits.load_arrays(registry.get_dataset("feats"), "src")
    np.savez(data / "src.npz", X=np.zeros((3, 4), np.float32), y=np.array([0, 1, 7]))
    with pytest.raises(ValueError) as exc:
        splits.load_arrays(registry.get_dataset("feats"), "src")
    assert "label_offset" not in str(exc.value)


def test_features_must_be_finite_and_of_matching_dimensions(isolated, monkeypatch):
    x = np.zeros((3, 4), np.float32)
    x[1, 2] = np.inf
    _features(isolated, monkeypatch, x, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"src\.npz: 'X' contains NaN or infinite values \(first in sample 1\)"):
        splits.load_arrays(registry.get_dataset("feats"), "src")


def test_an_empty_domain_is_named(isolated, monkeypatch):
    """An empty features domain is named (not numpy's "cannot reshape array of size 0")."""
    _features(isolated, monkeypatch, np.zeros((0, 4), np.float32), np.zeros(0, np.int64))
    with pytest.raises(ValueError, match=r"src\.npz: 'X' holds no samples \(domain 'src' is empty\); store its "):
        splits.load_arrays(registry.get_dataset("feats"), "src")


def test_source_and_target_dimensions_must_match(isolated, monkeypatch):
    _features(isolated, monkeypatch, np.zeros((3, 4), np.float32), np.array([0, 1, 2]),
              x_tgt=np.zeros((3, 5), np.float32))
    cfg = resolve({"dataset": "feats", "source": "src", "target": "tgt", "backbone": "identity"})
    with pytest.raises(ValueError, match=r"source .*src\.npz has samples of shape \[4\], target .*tgt\.npz \[5\]"):
        build_task(cfg)


def test_declared_sample_shape_must_fit(isolated, monkeypatch):
    _features(isolated, monkeypatch, np.zeros((3, 250), np.float32), np.array([0, 1, 2]),
              extra="sample_shape: [1, 16, 16]\n")
    (registry.DATASETS_DIR / "feats" / "dataset.yaml").write_text(
        (registry.DATASETS_DIR / "feats" / "dataset.yaml").read_text().replace("kind: features", "kind: arrays"))
    with pytest.raises(ValueError, match=r"src\.npz: 'X' has 250 values per sample, the declared sample shape "
                                         r"\[1, 16, 16\] needs 256"):
        splits.load_arrays(registry.get_dataset("feats"), "src")


@pytest.mark.parametrize("out", ["../../escaped", "/tmp/escaped", "a/b", ".."])
def test_extract_features_never_writes_outside_datasets(isolated, out, tmp_path):
    from dmp.models.extract import extract_features

    with pytest.raises(ValueError, match="--out-name"):
        extract_features("demo", out, backbone="smallcnn", pretrained=False)
    assert not (tmp_path / "escaped").exists() and not (registry.DATASETS_DIR.parent / "escaped").exists()


def test_open_rgb_scales_float_images():
    img = Image.fromarray(np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4), "F")
    out = np.asarray(load.to_rgb(img))
    assert out[0, 0, 0] == 0 and out[-1, -1, 0] == 255


def test_a_features_dataset_defaults_to_the_identity_backbone(isolated, monkeypatch, tmp_path):
    from dmp.config import ConfigError
    from dmp.train.trainer import Trainer

    _features(isolated, monkeypatch, np.zeros((3, 4), np.float32), np.array([0, 1, 2]))
    cfg = resolve({"dataset": "feats", "source": "src", "target": "tgt"})
    assert (cfg["backbone"], cfg["pretrained"]) == ("identity", False)
    explicit = resolve({"dataset": "feats", "source": "src", "target": "tgt", "backbone": "resnet50"})
    with pytest.raises(ConfigError, match=r"'backbone' = 'resnet50': dataset feats holds feature vectors \(4-d\)"):
        Trainer(explicit, build_task(explicit), tmp_path / "run", progress=False)
    # a weights file for feature vectors would be silently ignored: refused before any work
    with pytest.raises(ConfigError, match=r"'weights_path' = 'w.pt': the identity backbone"):
        resolve({"dataset": "feats", "source": "src", "target": "tgt", "weights_path": "w.pt"})


def test_augmenting_feature_vectors_is_refused(isolated, monkeypatch):
    _features(isolated, monkeypatch, np.zeros((3, 4), np.float32), np.array([0, 1, 2]))
    cfg = resolve({"dataset": "feats", "source": "src", "target": "tgt", "shift": 2})
    with pytest.raises(ValueError, match=r"config key 'shift' = 2: dataset feats holds feature vectors"):
        build_task(cfg)


@pytest.mark.parametrize("key, value", [("resize", 32), ("crop", 20)])
def test_image_pipeline_keys_on_arrays_are_refused_not_ignored(isolated, monkeypatch, key, value):
    """resize / crop used to stay in the printed config of an arrays dataset and do nothing."""
    _features(isolated, monkeypatch, np.zeros((3, 1, 4, 4), np.float32), np.array([0, 1, 2]),
              extra="sample_shape: [1, 4, 4]\n")
    yml = registry.DATASETS_DIR / "feats" / "dataset.yaml"
    yml.write_text(yml.read_text().replace("kind: features", "kind: arrays"))
    cfg = resolve({"dataset": "feats", "source": "src", "target": "tgt", "crop": 20, key: value})
    with pytest.raises(ValueError, match=rf"config key '{key}' = {value}: dataset feats is of kind 'arrays', read "
                                         rf"at its stored size"):
        build_task(cfg)
    x, _ = build_task(resolve({"dataset": "feats", "source": "src", "target": "tgt"})).source_train.batch([0])
    assert x.shape == (1, 1, 4, 4)  # the defaults: the arrays as stored
    yml.write_text(yml.read_text() + f"{key}: {value}\n")  # in the declaration: refused by name
    with pytest.raises(ValueError, match=rf"dataset\.yaml: key '{key}': kind 'arrays' datasets are read at their "
                                         rf"stored size"):
        registry.get_dataset("feats")
