"""The network, backbone registry (weights never silently random) and the trainer's data inputs."""
import urllib.error

import numpy as np
import pytest
import torch
from torch import nn

from dmp.data.inputs import BatchStream, ImageListDataset, TensorDataset, image_transforms
from dmp.models import DMPNet, WeightsUnavailableError, build_backbone


def test_network_layers_and_param_groups():
    bb, d = build_backbone("smallcnn", pretrained=False, in_channels=1)
    net = DMPNet(bb, d, [64, 32], 5)
    kinds = [[type(m) for m in layer] for layer in net.manifold]
    assert kinds == [[nn.Linear, nn.BatchNorm1d, nn.LeakyReLU], [nn.Linear, nn.BatchNorm1d, nn.Tanh]]
    assert net.manifold[0][2].negative_slope == 0.2
    feats, logits = net(torch.randn(4, 1, 16, 16))
    assert [f.shape for f in feats] == [(4, 64), (4, 32)] and logits.shape == (4, 5)
    groups = net.param_groups(1e-3, 0.1)
    assert [g["lr"] for g in groups] == [pytest.approx(1e-4), 1e-3]
    assert sum(p.numel() for g in groups for p in g["params"]) == sum(p.numel() for p in net.parameters())


def test_pretrained_resnet_without_network_fails_clearly(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def offline(*a, **k):
        raise urllib.error.URLError("no network")
    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    with pytest.raises(WeightsUnavailableError) as err:
        build_backbone("resnet50", pretrained=True)
    msg = str(err.value)
    assert "resnet50-" in msg and ".pth" in msg and str(tmp_path) in msg and "weights_path" in msg


def test_explicit_weights_path_is_loaded(tmp_path):
    bb, _ = build_backbone("smallcnn", pretrained=False)
    for p in bb.parameters():
        nn.init.constant_(p, 0.5)
    torch.save(bb.state_dict(), tmp_path / "w.pt")
    loaded, _ = build_backbone("smallcnn", pretrained=False, weights_path=str(tmp_path / "w.pt"))
    assert all(torch.equal(p, torch.full_like(p, 0.5)) for p in loaded.parameters())
    with pytest.raises(WeightsUnavailableError, match="no downloadable weights.*pretrain-demo"):
        build_backbone("smallcnn", pretrained=True)
    with pytest.raises(KeyError, match="unknown backbone"):
        build_backbone("vgg")


def _image_list(tmp_path, n=6):
    from PIL import Image

    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        path = tmp_path / "img" / f"c{i % 2}" / f"{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8)).save(path)
        lines.append(f"img/c{i % 2}/{i}.png {i % 2}")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "list.txt"


def test_image_list_transforms_and_seeded_augmentation(tmp_path):
    lst = _image_list(tmp_path)
    train = ImageListDataset(tmp_path, lst, image_transforms(True, 36, 32))
    test = ImageListDataset(tmp_path, lst, image_transforms(False, 36, 32))
    x, y = train[(3, 123)]
    assert x.shape == (3, 32, 32) and y.item() == 1
    assert torch.equal(train[(3, 123)][0], x)                       # same seed, same crop/flip
    assert any(not torch.equal(train[(3, s)][0], x) for s in range(124, 130))
    # test: the centre crop of the resized, normalised image, computed here without image_transforms
    import torchvision.transforms.functional as F
    from PIL import Image

    img = F.resize(Image.open(tmp_path / "img" / "c0" / "2.png").convert("RGB"), [36, 36])
    expected = F.normalize(F.to_tensor(img), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])[:, 2:34, 2:34]
    assert torch.allclose(test[2][0], expected, atol=1e-6) and test[2][1].item() == 0


def test_missing_images_and_bad_lines_are_clear_errors(tmp_path):
    (tmp_path / "l.txt").write_text("nothing/here.png 0\n")
    with pytest.raises(FileNotFoundError, match="not in place"):
        ImageListDataset(tmp_path, tmp_path / "l.txt", None)
    (tmp_path / "bad.txt").write_text("just-a-path\n")
    with pytest.raises(ValueError, match="bad.txt:1"):
        ImageListDataset(tmp_path, tmp_path / "bad.txt", None)


def test_batch_stream_is_a_function_of_seed_and_iteration():
    ds = TensorDataset(np.arange(10, dtype=np.float32)[:, None], np.zeros(10, dtype=np.int64))
    a, b = BatchStream(ds, 4, seed=3, stream_id=0), BatchStream(ds, 4, seed=3, stream_id=0)
    seq = [x.flatten().tolist() for x, _ in a.iterate(0, 6)]
    assert [x.flatten().tolist() for x, _ in b.iterate(4, 6)] == seq[4:]   # resume mid-way
    epoch0 = sorted(v for batch in seq[:2] for v in batch) + sorted(seq[2][:2])
    assert sorted(epoch0) == list(range(10))                                # each epoch is a permutation
    other = [x.flatten().tolist() for x, _ in BatchStream(ds, 4, seed=4, stream_id=0).iterate(0, 6)]
    assert other != seq


def test_image_batches_identical_with_workers(tmp_path):
    lst = _image_list(tmp_path)
    ds = ImageListDataset(tmp_path, lst, image_transforms(True, 36, 32))
    serial = [x for x, _ in BatchStream(ds, 3, 0, 0, num_workers=0).iterate(2, 5)]
    parallel = [x for x, _ in BatchStream(ds, 3, 0, 0, num_workers=2).iterate(2, 5)]
    assert all(torch.equal(a, b) for a, b in zip(serial, parallel))


def test_image_array_augmentation_is_seeded_and_training_only():
    x = np.zeros((6, 1, 16, 16), dtype=np.float32)
    x[:, :, 5:11, 6:10] = 1.0                                     # a bar on a flat background
    ds = TensorDataset(x, np.arange(6), shift=2, scale_jitter=0.25)
    stream = BatchStream(ds, 3, seed=1, stream_id=0)
    batches = [xb for xb, _ in stream.iterate(0, 4)]
    again = [xb for xb, _ in BatchStream(ds, 3, seed=1, stream_id=0).iterate(2, 4)]
    assert all(torch.equal(a, b) for a, b in zip(batches[2:], again))          # a function of (seed, iteration)
    assert any(not torch.equal(b[0], torch.from_numpy(x[0])) for b in batches)  # samples do move
    assert all(float(b.min()) >= 0.0 and float(b.max()) <= 1.0 for b in batches)  # background fill, no wrap
    keys = stream.keys(1)
    by_item = torch.stack([ds[k][0] for k in keys])                             # the DataLoader path agrees
    assert torch.equal(by_item, batches[1])
    plain, _ = ds.batch([0, 1])                                                # no seeds (evaluation): untouched
    assert torch.equal(plain, torch.from_numpy(x[:2]))
