"""Every preset pinned to its documented values: the optimiser, lr, schedule and lambdas of the
paper's datasets (paper Sec. "Datasets and Experimental Setting", NOTES.md), the demo, the digits and
Office-Caltech10 (docs/method.md), and the resolved schedule of one task of each (warm-up starts, anchor period,
length), computed here by hand from the registry's source sizes. A wrong preset fails with the key it got wrong."""
from __future__ import annotations

import json

import pytest

from dmp.cli import main
from dmp.config import resolve

PAPER_ADAM = dict(optimizer="adam", lr=2e-4, batch_size=50, backbone="resnet50", lr_schedule="constant",
                  backbone_lr_mult=0.1, lambda1=10.0, epochs=40, intra_start="15ep", inter_start=0,
                  anchor_period="1ep", epoch_iterations=None)
VISDA = dict(optimizer="sgd", lr=3e-3, momentum=0.9, weight_decay=5e-4, batch_size=32, lr_schedule="anneal",
             backbone_lr_mult=0.1, lambda1=10.0, epoch_iterations=1000, epochs=30, intra_start="10ep",
             anchor_period="1ep")
DEMO = dict(backbone="smallcnn", pretrained=True, batch_size=32, lr=1e-3, epochs=16, intra_start="6ep",
            anchor_period="1ep", lr_schedule="constant", backbone_lr_mult=0.1, lambda1=10.0)

EXPECTED = {
    **{(ds, "vanilla"): dict(PAPER_ADAM, lambda2=5e3) for ds in ("office31", "officehome", "imageclef")},
    **{(ds, "partial"): dict(PAPER_ADAM, lambda2=1.0) for ds in ("office31", "officehome", "imageclef")},
    ("visda2017", "vanilla"): dict(VISDA, backbone="resnet101", lambda2=5e3),
    ("visda2017", "partial"): dict(VISDA, backbone="resnet50", lambda2=1.0),
    ("demo", "vanilla"): dict(DEMO, lambda2=5e3),
    ("demo", "partial"): dict(DEMO, lambda2=1.0),
    ("mnist_usps", "vanilla"): dict(backbone="smallcnn_gn", batch_size=32, lr=1e-3, backbone_lr_mult=1.0,
                                    lr_schedule="anneal", epochs=24, intra_start="9ep", anchor_period="1ep",
                                    sample_norm=True, optimizer="adam", lambda1=10.0, lambda2=5e3),
    ("office_caltech10", "vanilla"): dict(backbone="identity", pretrained=False, standardize=True, batch_size=32,
                                          lr=2e-4, optimizer="adam", lr_schedule="constant", epochs=40,
                                          intra_start="15ep", anchor_period="1ep", lambda1=10.0, lambda2=5e3),
}


@pytest.mark.parametrize("dataset, setting", sorted(EXPECTED))
def test_preset_values(dataset, setting):
    cfg = resolve(dict(dataset=dataset, source="x", target="y", setting=setting))
    wrong = {k: (cfg[k], v) for k, v in EXPECTED[(dataset, setting)].items() if cfg[k] != v}
    assert not wrong, f"preset ({dataset}, {setting}): " + ", ".join(f"{k} = {got!r}, documented {want!r}"
                                                                     for k, (got, want) in wrong.items())


def schedule_of(capsys, *overrides):
    with pytest.raises(SystemExit) as exc:
        main(["config", "--schedule", *overrides])
    assert exc.value.code == 0
    return json.loads(capsys.readouterr().out)


# (overrides, source size, per epoch, T_max, intra start, anchor period, refreshes), by hand:
SCHEDULES = [
    # ceil(2427 / 50) = 49 per epoch; 40 epochs; intra after 15 epochs
    (("dataset=officehome", "source=Art", "target=Clipart"), 2427, 49, 1960, 735, 49, 40),
    # ImageCLEF: 600 images, ceil(600 / 50) = 12 per epoch
    (("dataset=imageclef", "source=i", "target=p", "setting=partial"), 600, 12, 480, 180, 12, 40),
    # VisDA: 1000-iteration epochs, 30 of them, intra after 10
    (("dataset=visda2017", "source=synthetic", "target=real"), 152397, 1000, 30000, 10000, 1000, 30),
    # demo: 300 images, ceil(300 / 32) = 10 per epoch; 16 epochs = 160 iterations; intra after 6 epochs
    (("dataset=demo", "source=S", "target=O"), 300, 10, 160, 60, 10, 16),
    # digits: 2000 MNIST images, ceil(2000 / 32) = 63 per epoch; 24 epochs; intra after 9
    (("dataset=mnist_usps", "source=mnist", "target=usps"), 2000, 63, 1512, 567, 63, 24),
    # Office-Caltech10 amazon: 958 images, ceil(958 / 32) = 30 per epoch; 40 epochs; intra after 15
    (("dataset=office_caltech10", "source=amazon", "target=webcam"), 958, 30, 1200, 450, 30, 40),
]


@pytest.mark.parametrize("overrides, n, per_epoch, total, intra, period, refreshes", SCHEDULES,
                         ids=[s[0][0].split("=")[1] for s in SCHEDULES])
def test_preset_schedule_by_hand(capsys, overrides, n, per_epoch, total, intra, period, refreshes):
    out = schedule_of(capsys, *overrides)
    want = {"source_samples": n, "iterations_per_epoch": per_epoch, "iterations": total,
            "intra_start_iteration": intra, "inter_start_iteration": 0, "anchor_period": period,
            "anchor_refreshes": refreshes, "epochs": total / per_epoch}
    assert out == want, f"{' '.join(overrides)}: " + ", ".join(f"{k} = {out.get(k)}, by hand {v}"
                                                            for k, v in want.items() if out.get(k) != v)
