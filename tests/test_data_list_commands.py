"""`dmp data list` names the command that makes a features dataset that is not in place (from the options its
dataset.yaml's meta records, as `extract-features` writes them), and long dataset names keep the columns aligned."""
from __future__ import annotations

import shlex

import pytest
import yaml
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.cli import build_parser

TRANSFORM = ("Compose(\n    Resize(size=(146, 146), interpolation=bilinear, max_size=None, antialias=True)\n"
             "    ToTensor()\n    CenterCrop(size=(128, 128))\n)")
LONG = "a_features_dataset_with_a_long_name"


def _declare(root, name: str, meta: dict, data: str = "data") -> None:
    """A features dataset.yaml as extract-features writes it (its files not in place)."""
    doc = {"kind": "features", "title": f"features {name}", "classes": ["a", "b"], "root": data, "meta": meta,
           "domains": [{"name": d, "short": d[0].upper(), "file": f"{d}.npz", "x_key": "X", "y_key": "y"}
                       for d in ("amazon", "webcam")]}
    (root / name).mkdir(parents=True)
    (root / name / "dataset.yaml").write_text(yaml.safe_dump(doc))


@pytest.fixture
def features(isolated, monkeypatch):  # noqa: F811 (fixture)
    """Three features datasets of the checkout's datasets/: one with stored views, one reading its files, one
    extracted at the default sizes; the data of none in place."""
    monkeypatch.delenv("DMP_DATA_DIR")  # each reads the root its dataset.yaml names
    root = isolated.path / "datasets"
    meta = {"source_dataset": "office31", "backbone": "efficientnet_lite0", "split": "full", "pretrained": True,
            "weights_path": None, "transform": TRANSFORM, "trunk": True, "views": 4, "trunk_stage": 5}
    _declare(root, LONG, meta)
    _declare(root, "views_dropped", {**meta, "views": None}, data=f"../{LONG}/data")
    _declare(root, "t224", {"source_dataset": "office31", "backbone": "resnet50", "pretrained": True,
                            "resize": 256, "crop": 224, "trunk": False, "weights_path": "/w/r50.pth"})
    return root


def _list(capsys) -> dict[str, str]:
    args = build_parser().parse_args(["data", "list"])
    assert args.func(args) == 0
    return {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}


def test_a_features_dataset_not_in_place_says_the_command_that_makes_it(features, capsys):
    lines = _list(capsys)
    made = lines[LONG].split("then dmp ", 1)[1].rstrip(")")
    assert made == (f"data extract-features office31 --out-name {LONG} --backbone efficientnet_lite0 --resize 146 "
                    f"--crop 128 --views 4 --trunk-stage 5")
    assert f"not in place (make it: move {features / LONG / 'dataset.yaml'} aside, then dmp " in lines[LONG]
    args = build_parser().parse_args(shlex.split(made))  # the options are extract-features' own
    assert (args.name, args.out_name, args.resize, args.crop, args.views, args.trunk_stage) == \
        ("office31", LONG, 146, 128, 4, 5)
    assert lines["t224"].endswith("then dmp data extract-features office31 --out-name t224 --backbone resnet50 "
                                  "--weights-path /w/r50.pth)")
    assert lines["views_dropped"].endswith(f"]  not in place (its files are {LONG}'s: make that one)")


def test_a_long_name_keeps_the_columns_aligned(features, capsys):
    lines = list(_list(capsys).values())
    assert len(LONG) > 18 and len(lines) > 5
    for column in ("images", "features"):
        starts = {line.index(f" {column} ") for line in lines if f" {column} " in line}
        assert starts == {len(LONG)}, lines
    assert {line.index(" classes  ") for line in lines if " classes  " in line} == {len(LONG) + 13}
