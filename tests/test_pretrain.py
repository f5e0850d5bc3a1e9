"""The demo's miniature of the paper's regime: a backbone pre-trained on a corpus that is no demo domain, loaded
through weights_path and fine-tuned at 0.1x lr; and the anchors' BatchNorm modes."""
import numpy as np
import pytest
import torch

from dmp.config import resolve
from dmp.data import demo
from dmp.models import WeightsUnavailableError, batch_statistics, build_backbone
from dmp.train.pretrain import pretrain_backbone, pretrain_images


def test_pretraining_corpus_is_its_own_domain():
    assert set(demo.DEMO_CLASSES) < set(demo.PRETRAIN_CLASSES)
    a = np.asarray(demo.render_pretrain("star", 3))
    assert np.array_equal(a, np.asarray(demo.render_pretrain("star", 3)))  # deterministic
    # not a copy of any demo domain's image of the same class and index
    for domain, _ in demo.DEMO_DOMAINS:
        assert not np.array_equal(a, np.asarray(demo.render(domain, "star", 3)))


def test_pretrained_weights_load_through_weights_path(tmp_path):
    out = tmp_path / "w.pt"
    info = pretrain_backbone(out, progress=False, per_class=3, iterations=4, batch_size=8)
    assert info["classes"] == len(demo.PRETRAIN_CLASSES)
    model, _ = build_backbone("smallcnn", pretrained=True, weights_path=str(out))
    saved = torch.load(out, weights_only=True)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
    fresh, _ = build_backbone("smallcnn", pretrained=False)
    assert not all(torch.equal(fresh.state_dict()[k], v) for k, v in saved.items())
    pretrain_backbone(tmp_path / "again.pt", progress=False, per_class=3, iterations=4, batch_size=8)
    again = torch.load(tmp_path / "again.pt", weights_only=True)
    assert all(torch.equal(again[k], v) for k, v in saved.items())  # a pure function of the recipe


def test_demo_preset_is_the_papers_regime():
    cfg = resolve(dict(dataset="demo", source="S", target="O"))
    assert cfg["pretrained"] is True and cfg["backbone_lr_mult"] == 0.1
    from dmp.train.schedule import schedule
    s = schedule(cfg, 300)
    assert 0 < s["intra_start_iteration"] < s["iterations"] / 2 and s["anchor_refreshes"] >= 10
    with pytest.raises(WeightsUnavailableError, match="pretrain-demo"):
        build_backbone(cfg["backbone"], cfg["pretrained"], cfg["weights_path"])


def test_digits_recipe_is_a_grey_groupnorm_cnn(tmp_path):
    x, y, classes = pretrain_images(2, 16, channels=1)
    assert x.shape == (2 * classes, 1, 16, 16) and classes == len(demo.PRETRAIN_CLASSES)
    flat = x.flatten(1)
    assert torch.allclose(flat.mean(1), torch.zeros(len(x)), atol=1e-4)  # the mnist_usps preset's sample_norm
    assert torch.allclose(flat.std(1, correction=0), torch.ones(len(x)), atol=1e-3)
    out = tmp_path / "digits.pt"
    info = pretrain_backbone(out, "digits", progress=False, per_class=3, iterations=4, batch_size=8)
    assert info["recipe"] == "digits" and info["channels"] == 1
    model, _ = build_backbone("smallcnn_gn", pretrained=True, weights_path=str(out), in_channels=1)
    saved = torch.load(out, weights_only=True)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
    # another CNN's weights: one clear error naming the file and the recipe to use, not a state_dict dump
    demo_w = tmp_path / "demo.pt"
    pretrain_backbone(demo_w, "demo", progress=False, per_class=2, iterations=2, batch_size=4)
    with pytest.raises(WeightsUnavailableError, match=r"demo\.pt does not fit this CNN.*--recipe digits") as exc:
        build_backbone("smallcnn_gn", pretrained=True, weights_path=str(demo_w), in_channels=1)
    assert "\n" not in str(exc.value)
    with pytest.raises(WeightsUnavailableError, match="does not exist"):
        build_backbone("smallcnn_gn", pretrained=True, weights_path=str(tmp_path / "missing.pt"), in_channels=1)
    with pytest.raises(ValueError, match="unknown pre-training recipe 'mnist'"):
        pretrain_backbone(tmp_path / "x.pt", "mnist", progress=False)


def test_pretraining_fixes_its_thread_count(tmp_path):
    """CPU kernels give the same numbers for a fixed thread count only: the recipe fixes it, so a machine with
    more cores writes the same weights file (and the caller's count comes back)."""
    before = torch.get_num_threads()
    small = dict(progress=False, per_class=4, iterations=6, batch_size=16)
    try:
        torch.set_num_threads(1)
        pretrain_backbone(tmp_path / "one.pt", **small)
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        pretrain_backbone(tmp_path / "two.pt", **small)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    one, two = torch.load(tmp_path / "one.pt", weights_only=True), torch.load(tmp_path / "two.pt", weights_only=True)
    assert all(torch.equal(one[k], two[k]) for k in one)


def test_cli_offers_every_recipe():
    from dmp.cli import build_parser
    from dmp.train.pretrain import RECIPES
    for recipe in RECIPES:
        assert build_parser().parse_args(["pretrain-demo", "--out", "w.pt", "--recipe", recipe]).recipe == recipe
    assert build_parser().parse_args(["pretrain-demo", "--out", "w.pt"]).recipe == "demo"


def test_digits_preset_fine_tunes_a_pretrained_cnn():
    cfg = resolve(dict(dataset="mnist_usps", source="mnist", target="usps"))
    assert (cfg["backbone"], cfg["pretrained"], cfg["backbone_lr_mult"]) == ("smallcnn_gn", True, 1.0)
    with pytest.raises(WeightsUnavailableError, match="recipe digits"):
        build_backbone(cfg["backbone"], cfg["pretrained"], cfg["weights_path"], in_channels=1)


def test_runs_record_the_weights_file_they_start_from(tmp_path):
    from dmp.data.inputs import Task, TensorDataset
    from dmp.io import sha256_file
    from dmp.train import train
    from tests.synthetic import small_cfg
    rng = np.random.default_rng(0)
    data = TensorDataset(rng.normal(size=(40, 1, 16, 16)).astype(np.float32), np.arange(40) % 4)
    task = Task(data, data, data, data, [f"c{i}" for i in range(4)], 1, None, "synthetic")
    w = tmp_path / "w.pt"
    pretrain_backbone(w, "digits", progress=False, per_class=2, iterations=2, batch_size=4)
    m = train(small_cfg(backbone="smallcnn_gn", pretrained=True, weights_path=str(w), iterations=4, batch_size=8,
                        save_features=0), tmp_path / "run", task=task, progress=False)
    assert m["weights_sha256"] == sha256_file(w)


def test_batch_statistics_leaves_running_statistics_alone():
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).eval()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    x = torch.randn(16, 4) * 5 + 3
    with batch_statistics(net):
        y = net(x)
        assert net.training
    assert not net.training
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert torch.allclose(y.mean(0), net[1].bias, atol=1e-5)  # normalised with the batch's own statistics
    assert not torch.allclose(net(x).mean(0), net[1].bias, atol=1e-2)  # eval mode: the running statistics


@pytest.mark.parametrize("anchor_bn", ["batch", "eval"])
def test_anchor_pass_does_not_touch_running_statistics(tmp_path, anchor_bn):
    from tests.synthetic import shift_task, small_cfg
    from dmp.train.trainer import Trainer
    cfg = resolve(small_cfg(anchor_bn=anchor_bn, iterations=2))
    trainer = Trainer(cfg, shift_task(), tmp_path, progress=False)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items() if "running" in k}
    trainer.refresh_anchors()
    after = trainer.model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items())
    assert trainer.anchors.ready


def test_eval_loader_batches_exactly_the_given_order():
    from dmp.data.inputs import TensorDataset, eval_loader
    data = TensorDataset(np.arange(20, dtype=np.float32)[:, None], np.zeros(20, dtype=np.int64))
    order = [7, 3, 11, 0, 19]
    got = torch.cat([x for x, _ in eval_loader(data, 2, order=order)]).flatten().tolist()
    assert got == [float(i) for i in order]


def test_an_existing_folder_as_out_is_refused_before_training(tmp_path, monkeypatch, capsys):
    """The weights file is written at the end of minutes of training; an --out that cannot be written then
    is refused at the start (the corpus is never rendered)."""
    from dmp.cli import main
    from dmp.train import pretrain

    monkeypatch.setattr(pretrain, "pretrain_images", lambda *a, **k: pytest.fail("training started"))
    with pytest.raises(SystemExit) as exit_:
        main(["pretrain-demo", "--quiet", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (f"error: --out {tmp_path} is a folder; give the weights file to write (e.g. "
                                       f"{tmp_path / 'smallcnn.pt'})\n")
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="cannot create its folder"):
        pretrain.pretrain_backbone(tmp_path / "file" / "w.pt")


def test_weights_file_does_not_depend_on_the_callers_thread_count_and_records_its_stack(tmp_path):
    """Two pretrainings under different caller thread counts write one file (the recipe fixes the count), and
    ``<file>.json`` records its sha256 and what it still depends on."""
    import json

    from dmp.io import sha256_file
    before = torch.get_num_threads()
    try:
        for n, name in ((1, "a.pt"), (3, "b.pt")):
            torch.set_num_threads(n)
            pretrain_backbone(tmp_path / name, progress=False, per_class=2, iterations=3, batch_size=8, threads=1)
            assert torch.get_num_threads() == n  # restored
    finally:
        torch.set_num_threads(before)
    assert sha256_file(tmp_path / "a.pt") == sha256_file(tmp_path / "b.pt")
    meta = json.loads((tmp_path / "a.pt.json").read_text())
    assert meta["sha256"] == sha256_file(tmp_path / "a.pt") and meta["threads"] == 1
    assert meta["recipe"]["iterations"] == 3 and meta["packages"]["torch"] == torch.__version__.split("+")[0]
    assert meta["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
