"""The backbone registry (dmp/models/backbones.py) says everything the trainer and the config ask of a backbone: a
toy backbone registered in one place trains without a change to the trainer, and no module outside dmp/models/
compares a backbone's name."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch

from dmp.config import ConfigError
from dmp.models import backbones
from dmp.train import train
from synthetic import shift_task, small_cfg

DMP = Path(__file__).resolve().parents[1] / "dmp"
FAMILIES = ("resnet", "efficientnet", "smallcnn")
"""Name prefixes of the registered backbones (a comparison with one of them is a name test)."""


def _register(monkeypatch, spec: backbones.BackboneSpec) -> None:
    monkeypatch.setitem(backbones.BACKBONES, spec.name, spec)


def test_a_toy_backbone_registered_in_one_place_trains(tmp_path, monkeypatch):
    built = []

    def build(in_dim=None, **_):
        built.append(in_dim)
        torch.manual_seed(0)
        module = torch.nn.Sequential(torch.nn.Linear(in_dim, 12), torch.nn.ReLU())
        module.weights_file = None
        return module, 12

    _register(monkeypatch, backbones.BackboneSpec("toy_mlp", build, reads="vector", weights=False))
    m = train(small_cfg(backbone="toy_mlp", iterations=6, checkpoint_every=6, log_every=3), tmp_path,
              task=shift_task(per_class=20), progress=False)
    assert built == [16]  # the trainer asked the registry's builder, with the features' dimension
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["config"]["backbone"] == "toy_mlp" and 0 <= m["accuracy"] <= 100


def test_what_a_backbone_reads_is_the_registrys_word(tmp_path, monkeypatch):
    """An image reader on feature vectors is refused before it is built, naming the vector readers the registry
    declares (a toy one among them)."""
    def never(**_):
        raise AssertionError("built although it cannot read the task's input")

    _register(monkeypatch, backbones.BackboneSpec("toy_cnn", never))
    _register(monkeypatch, backbones.BackboneSpec("toy_vec", never, reads="vector", weights=False))
    with pytest.raises(ConfigError, match=r"'toy_cnn'.*feature vectors.*backbone=identity/toy_vec"):
        train(small_cfg(backbone="toy_cnn"), tmp_path, task=shift_task(), progress=False)
    with pytest.raises(ConfigError, match="'weights_path'.*toy_vec backbone has no weights"):
        from dmp.config import resolve
        resolve(small_cfg(backbone="toy_vec", weights_path="w.pt"))


def test_the_registry_is_consistent():
    for name, spec in backbones.BACKBONES.items():
        assert spec.name == name and backbones.get(name) is spec and backbones.known(name)
        if spec.reads == "trunk":  # a head reads the trunk of a registered image backbone, and is found from it
            assert backbones.BACKBONES[spec.trunk[0]].reads == "image"
            assert backbones.trunk_reader(*spec.trunk) == name
    assert backbones.get("timm:resnet18").reads == "image" and not backbones.known("vgg")
    with pytest.raises(ValueError, match="trunk"):
        backbones.BackboneSpec("bad", print, reads="trunk")
    with pytest.raises(KeyError, match="unknown backbone 'vgg'"):
        backbones.get("vgg")


def name_tests(source: str, names=frozenset()) -> list[int]:
    """The lines of ``source`` that compare with a backbone's name: a comparison (``==``, ``in``, ...) or a string
    test (``startswith``, ``endswith``, a regular expression) one of whose strings is a registered name or starts
    with a family's prefix (:data:`FAMILIES`)."""
    def named(node):
        return any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                   and (c.value in names or c.value.lstrip("^(").startswith(FAMILIES)) for c in ast.walk(node))

    def is_test(node):
        if isinstance(node, ast.Compare):
            return True
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "startswith", "endswith", "match", "fullmatch", "search")

    return sorted({n.lineno for n in ast.walk(ast.parse(source)) if is_test(n) and named(n)})


def test_the_name_test_sees_what_it_must():
    source = ("a = cfg['backbone'].startswith('resnet')\nb = x == 'identity'\nc = re.fullmatch(r'efficientnet_(\\d)', n)"
              "\nd = n in ('smallcnn', 'x')\ne = dict(backbone='resnet50')\nf = n == 'other'\n")
    assert name_tests(source, {"identity"}) == [1, 2, 3, 4]


def test_no_module_outside_the_models_tests_a_backbone_name():
    names = frozenset(backbones.BACKBONES)
    found = [f"{path.relative_to(DMP.parent)}:{line}" for path in sorted(DMP.rglob("*.py"))
             if DMP / "models" not in path.parents for line in name_tests(path.read_text(), names)]
    assert not found, ("a backbone's name is tested outside dmp/models/ (ask the registry, "
                       "dmp/models/backbones.py, instead): " + ", ".join(found))
