"""The headline Office-31 form end to end on generated images (random weights): a Lite0 trunk stored with views,
its head fine-tuned (``efficientnet_lite0_top``) and stages 5.. (``_from5``) for a few iterations, resumed, the run's
record of the input it trained on, the frozen probe that trains nothing of the backbone, and the trunk a head reads."""
from __future__ import annotations

import json

import numpy as np
import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.cli import build_parser
from dmp.config import ConfigError, resolve
from dmp.data import registry, splits

torch = pytest.importorskip("torch")
pytest.importorskip("timm")


def _extract(isolated, monkeypatch, out, *extra):
    """The demo (1 image per class) generated, then a Lite0 trunk of it stored at 32 px crops of 40 px images."""
    import dataclasses

    from dmp.data.demo import generate

    if "demo" not in getattr(isolated, "_generated", ()):
        monkeypatch.delenv("DMP_DATA_DIR", raising=False)
        demo = registry.get_dataset("demo")
        isolated.use(dataclasses.replace(demo, images_per_class=1, domains=tuple(
            dataclasses.replace(d, count=10) for d in demo.domains)))
        generate(registry.data_root(registry.get_dataset("demo")), per_class=1, progress=False)
        splits.prepare("demo", ["full"])
        isolated._generated = ("demo",)
    args = build_parser().parse_args(["data", "extract-features", "demo", "--out-name", out, "--backbone",
                                      "efficientnet_lite0", "--no-pretrained", "--resize", "40", "--crop", "32",
                                      *extra])
    torch.manual_seed(0)
    assert args.func(args) == 0


def _cfg(dataset, **kw):
    base = dict(dataset=dataset, source="solid", target="noisy", iterations=6, batch_size=5, intra_start=2,
                anchor_period=3, checkpoint_every=3, save_features=0, interpolation_per_class=2, pretrained=False,
                eval_batch_size=8)
    return {**base, **kw}


def test_the_head_and_stage_forms_train_resume_and_record_their_input(isolated, monkeypatch, tmp_path):
    """``_top`` on a trunk with 2 views and ``_from5`` on a trunk before stage 5: each trains, a run stopped at
    iteration 3 resumes to the uninterrupted run's numbers, and metrics.json says the crop, resize, views and trunk
    stage that the dataset was stored with (not the config's image keys, which are left at their defaults)."""
    from dmp.train import train

    _extract(isolated, monkeypatch, "demo_t32v2", "--views", "2")
    _extract(isolated, monkeypatch, "demo_s5", "--trunk-stage", "5")
    for dataset, backbone, views, stage in (("demo_t32v2", "efficientnet_lite0_top", 2, None),
                                            ("demo_s5", "efficientnet_lite0_from5", 0, 5)):
        cfg = _cfg(dataset, method="dmp")
        assert resolve(cfg)["backbone"] == backbone                  # the dataset's preset: the head that reads it
        whole = train(cfg, tmp_path / dataset / "whole", progress=False)
        train(cfg, tmp_path / dataset / "cut", progress=False, stop_after=3)
        resumed = train(cfg, tmp_path / dataset / "cut", progress=False)
        assert resumed["accuracy"] == whole["accuracy"]
        assert resumed["target_mean_prediction"] == whole["target_mean_prediction"]
        record = json.loads((tmp_path / dataset / "whole" / "metrics.json").read_text())["input"]
        assert record == {"kind": "features", "views": views, "stored_by": "efficientnet_lite0", "resize": 40,
                          "crop": 32, "trunk": True, "trunk_stage": stage, "reads_it": backbone,
                          "source_dataset": "demo"}
        assert whole["config"]["crop"] == 224                        # the image keys' defaults: not what it read


def test_the_frozen_probe_trains_nothing_of_the_backbone(isolated, monkeypatch, tmp_path):
    """``frozen_probe`` is defined by ``backbone_lr_mult = 0`` and ``backbone_bn = frozen``: after training, every
    weight and BatchNorm statistic of the head equals the one it started from (the network of source-only's first
    iteration, same seed), while the manifold layers moved; a user value that contradicts it is refused."""
    from dmp.train import Trainer
    from dmp.data.inputs import build_task

    _extract(isolated, monkeypatch, "demo_t32", "--trunk")
    cfg = resolve(_cfg("demo_t32", method="frozen_probe", iterations=8))
    assert (cfg["backbone_lr_mult"], cfg["backbone_bn"]) == (0.0, "frozen")
    with pytest.raises(ConfigError, match="'backbone_lr_mult' = 0.1: method 'frozen_probe' is defined by "
                                          "backbone_lr_mult = 0.0"):
        resolve(_cfg("demo_t32", method="frozen_probe", backbone_lr_mult=0.1))
    assert resolve(_cfg("demo_t32", method="frozen_probe", backbone_lr_mult=0))["backbone_lr_mult"] == 0.0
    trainer = Trainer(cfg, build_task(cfg), tmp_path / "probe", progress=False)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.run()
    after = trainer.model.state_dict()
    backbone = [k for k in before if k.startswith("backbone.")]
    assert backbone and all(torch.equal(before[k], after[k]) for k in backbone)
    assert any("running_mean" in k for k in backbone)
    assert not torch.equal(before["classifier.weight"], after["classifier.weight"])


@pytest.mark.parametrize("stored, backbone, says", [
    (("--trunk",), "efficientnet_lite0_from4", "only 'efficientnet_lite0_top' reads"),
    (("--trunk-stage", "4"), "efficientnet_lite0_top", "only 'efficientnet_lite0_from4' reads"),
    (("--trunk",), "efficientnet_lite1_top", "only 'efficientnet_lite0_top' reads"),
    ((), "efficientnet_lite0_top", "holds pooled feature vectors: use backbone=identity"),
])
def test_a_head_never_reads_activations_it_was_not_made_for(isolated, monkeypatch, tmp_path, stored, backbone, says):
    """The trunk a dataset records (backbone, stage) is compared with the run's backbone before any weights load:
    one line naming both, where before only a size was checked (320 x 2 x 2 = 1280 passed for pooled features)."""
    from dmp.train import train

    _extract(isolated, monkeypatch, "demo_x", *stored)
    with pytest.raises(ConfigError, match=says):
        train(_cfg("demo_x", method="source_only", backbone=backbone), tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_record_reads_the_size_from_an_older_datasets_transform():
    """Datasets stored before the meta recorded ``resize`` / ``crop`` give them through their transform's repr."""
    from dmp.data.inputs import _stored_size

    tf = "Compose(\n    Resize(size=(146, 146), interpolation=bilinear)\n    CenterCrop(size=(128, 128))\n)"
    assert (_stored_size({}, "resize", tf), _stored_size({}, "crop", tf)) == (146, 128)
    assert _stored_size({"crop": 224}, "crop", tf) == 224 and _stored_size({}, "crop", "") is None


def test_the_head_form_goes_through_the_suite_into_a_table(isolated, monkeypatch, tmp_path):
    """A suite config over the stored trunk, as config/office31_lite.yaml is over Office-31's: the run trained with
    the suite's own arguments is taken by the table (its accuracy printed, to one decimal, in the Markdown table and
    the report card), and the frozen probe beside it on the same trunk."""
    from dmp.config import parse_overrides
    from dmp.suite import Suite
    from dmp.tables.cli import build
    from dmp.train import train

    _extract(isolated, monkeypatch, "demo_t32v2", "--views", "2")
    config = {"results": str(tmp_path / "results"), "seeds": [0], "threads": 1,
              "train": {"iterations": 6, "batch_size": 5, "intra_start": 2, "anchor_period": 3, "save_features": 0,
                        "interpolation_per_class": 2, "pretrained": False, "eval_batch_size": 8,
                        "backbone_bn": "frozen"},
              "tables": {"vanilla": {"methods": ["frozen_probe", "source_only"], "metric": "G",
                                     "datasets": {"demo_t32v2": {"tasks": ["S->N"]}}}}}
    suite = Suite(config)
    accuracy = {}
    for run in suite.table_runs("vanilla"):
        metrics = train(parse_overrides(suite.train_args(run)), run.folder(suite.results), progress=False)
        accuracy[run.method] = metrics["accuracy"]
    paths = build(config, "vanilla")
    md = next(p for p in paths if p.name == "vanilla.md").read_text()
    card = next(p for p in paths if p.name == "vanilla.card.md").read_text()
    for method, label in (("frozen_probe", "Frozen probe (source only, backbone frozen)"), ("source_only", "Source only")):
        row = next(line for line in md.splitlines() if line.startswith(f"| {label} "))
        assert f"{accuracy[method]:.1f}" in row
    assert "| not run" not in card and ", 0 not run." in card
