"""``backbone_bn``: with ``frozen`` the backbone's BatchNorm layers keep their running statistics through training
(and normalise with them), while the manifold layers' BatchNorm still tracks its batches; with ``train`` (the
default) the backbone's statistics move too."""
from __future__ import annotations

import torch
from torch import nn

from dmp.models.network import DMPNet


def _net(mode):
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU())
    return DMPNet(backbone, 8, [5, 4], 3, batch_norm=True, backbone_bn=mode)


def _step(net):
    x = torch.randn(16, 6) * 3 + 2                      # far from the initial statistics (mean 0, var 1)
    net.train()
    _, logits = net(x)
    logits.sum().backward()


def test_frozen_keeps_the_backbone_statistics_and_normalises_with_them():
    net = _net("frozen")
    bn = net.backbone[1]
    _step(net)
    assert not bn.training and net.training
    assert torch.equal(bn.running_mean, torch.zeros(8)) and torch.equal(bn.running_var, torch.ones(8))
    assert int(bn.num_batches_tracked) == 0
    manifold_bn = net.manifold[0][1]
    assert manifold_bn.training and int(manifold_bn.num_batches_tracked) == 1
    # it normalises with the running statistics: the backbone's output is the eval-mode output of the same layer
    x = torch.randn(4, 6)
    lin = net.backbone[0]
    expected = torch.relu((lin(x) - 0) / torch.sqrt(torch.ones(8) + bn.eps) * bn.weight + bn.bias)
    assert torch.allclose(net.backbone(x), expected, atol=1e-6)
    assert bn.weight.grad is not None                    # its affine weights still learn


def test_train_moves_the_backbone_statistics():
    net = _net("train")
    _step(net)
    bn = net.backbone[1]
    assert bn.training and int(bn.num_batches_tracked) == 1
    assert not torch.equal(bn.running_mean, torch.zeros(8))


def test_eval_is_eval_for_both():
    for mode in ("train", "frozen"):
        net = _net(mode).eval()
        assert not any(m.training for m in net.modules())


def test_the_trainer_builds_the_network_with_the_config_s_choice(tmp_path):
    from unbalanced import tiny_cfg, unbalanced_task

    from dmp.config import resolve
    from dmp.train.trainer import Trainer
    for mode in ("train", "frozen"):
        t = Trainer(resolve(tiny_cfg(backbone_bn=mode)), unbalanced_task(), tmp_path / mode, progress=False)
        assert t.model.backbone_bn == mode
