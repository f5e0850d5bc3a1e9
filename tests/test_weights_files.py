"""Weights you can trust (dmp/models/backbones.py): a file under a torchvision name must carry the hash that name
promises; the common checkpoint forms load with one line saying what was loaded and left out; anything else is a
short error whose first words are the cause; every file loaded is known to the run (``weights_file``)."""
import hashlib
import urllib.error
from types import SimpleNamespace

import pytest
import torch
import torchvision

from dmp.models import WeightsUnavailableError, build_backbone
from dmp.models import backbones


@pytest.fixture(scope="module")
def resnet_state():
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None)
    return {k: v.clone() for k, v in model.state_dict().items()}


def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    folder = tmp_path / "torch" / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    return folder


def test_a_file_under_a_torchvision_name_with_other_bytes_is_refused(monkeypatch, tmp_path):
    cache = _cache(monkeypatch, tmp_path)
    name = torchvision.models.ResNet50_Weights.IMAGENET1K_V1.url.rsplit("/", 1)[1]  # resnet50-0676ba61.pth
    torch.save({"conv1.weight": torch.zeros(1)}, cache / name)  # a random-init or foreign file saved there
    with pytest.raises(WeightsUnavailableError) as err:
        build_backbone("resnet50", pretrained=True)
    msg = str(err.value)
    assert f"is not torchvision's {name}" in msg and "0676ba61" in msg and "\n" not in msg


def test_a_cached_file_with_the_promised_hash_is_loaded_and_known(monkeypatch, tmp_path, resnet_state):
    cache = _cache(monkeypatch, tmp_path)
    tmp = tmp_path / "w.pth"
    torch.save(resnet_state, tmp)
    prefix = hashlib.sha256(tmp.read_bytes()).hexdigest()[:8]
    path = cache / f"resnet50-{prefix}.pth"
    tmp.rename(path)
    fake = SimpleNamespace(IMAGENET1K_V1=SimpleNamespace(url=f"https://example.invalid/models/{path.name}"))
    model, dim = backbones._load_resnet("resnet50", fake, True, None)
    assert dim == 2048 and model.weights_file == path
    assert torch.equal(model.conv1.weight, resnet_state["conv1.weight"])


def test_missing_weights_offline_error_starts_with_the_cause(monkeypatch, tmp_path):
    _cache(monkeypatch, tmp_path)

    def offline(*a, **k):
        raise urllib.error.URLError("[Errno -2] Name or service not known")
    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    with pytest.raises(WeightsUnavailableError) as err:
        build_backbone("resnet50", pretrained=True)
    msg = str(err.value)
    assert msg.startswith("ImageNet weights for resnet50 missing: put resnet50-0676ba61.pth")
    assert "weights_path" in msg and msg.index("Name or service") > msg.index("weights_path")


def test_checkpoint_forms_load_and_say_what_was_left_out(tmp_path, resnet_state, capsys):
    wrapped = tmp_path / "ddp.pth"  # a DataParallel checkpoint of a whole classifier, wrapped
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in resnet_state.items()}}, wrapped)
    model, _ = build_backbone("resnet50", weights_path=str(wrapped))
    assert torch.equal(model.layer4[2].conv3.weight, resnet_state["layer4.2.conv3.weight"])
    assert model.weights_file == wrapped
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"loaded {len(resnet_state) - 2} tensors from {wrapped}") and "fc.weight, fc.bias" in line
    bare = tmp_path / "ssl.pth"  # backbone only (self-supervised files): no classifier at all
    torch.save({"model": {k: v for k, v in resnet_state.items() if not k.startswith("fc.")}}, bare)
    model, _ = build_backbone("resnet50", weights_path=str(bare))
    assert torch.equal(model.bn1.running_mean, resnet_state["bn1.running_mean"])
    assert "left out" not in capsys.readouterr().err


def test_foreign_and_broken_files_give_short_errors(tmp_path, resnet_state):
    other = tmp_path / "other.pth"
    torch.save({k.replace("layer", "stage"): v for k, v in resnet_state.items()}, other)
    with pytest.raises(WeightsUnavailableError) as err:
        build_backbone("resnet50", weights_path=str(other))
    msg = str(err.value)
    assert msg.startswith(f"weights file {other} does not fit resnet50: missing layer1.0.bn1.bias")
    assert "more" in msg and len(msg) < 600 and "\n" not in msg
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"\x00not a checkpoint" * 100)
    with pytest.raises(WeightsUnavailableError, match=r"^weights file .*garbage\.pth is not a PyTorch checkpoint"):
        build_backbone("smallcnn", weights_path=str(garbage))
    listed = tmp_path / "list.pth"
    torch.save([1, 2, 3], listed)
    with pytest.raises(WeightsUnavailableError, match="holds no state dict of tensors"):
        build_backbone("smallcnn", weights_path=str(listed))


def test_random_initialisation_has_no_weights_file():
    model, _ = build_backbone("smallcnn", pretrained=False)
    assert model.weights_file is None
