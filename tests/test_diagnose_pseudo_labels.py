"""studies/office31/pseudo_label_runs.py (the diagnosis of L_DS's share on Office-31): the intra-class term reads the
labels of a fixed fraction of the target, the rest of the run is DMP's own, and it is scored on the other images."""
from __future__ import annotations

import json
import types

import pytest
import torch
from data_fixtures import isolated  # noqa: F401 (fixture)
from test_diagnose_prototypes import _declare

from dmp.train import train
from studies.office31 import pseudo_label_runs


def _script():
    return pseudo_label_runs


def test_the_read_images_are_nested_across_fractions_and_fixed_by_the_seed():
    s = _script()
    small, large = s.read_mask(37, 3, 0.3), s.read_mask(37, 3, 0.6)
    assert int(small.sum()) == 11 and int(large.sum()) == 22  # round(0.3 * 37), round(0.6 * 37)
    assert bool((large | ~small).all())  # every image read at 0.3 is read at 0.6
    assert not s.read_mask(37, 3, 0.0).any()
    assert torch.equal(small, s.read_mask(37, 3, 0.3))
    assert not torch.equal(small, s.read_mask(37, 4, 0.3))


def test_only_the_read_rows_become_their_labels():
    p = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    out = _script().mixed_predictions(p, torch.tensor([2, 0, 1]), torch.tensor([True, False, True]))
    assert torch.equal(out, torch.tensor([[0.0, 0.0, 1.0], [0.1, 0.8, 0.1], [0.0, 1.0, 0.0]]))


def test_the_method_sees_the_labels_of_the_read_images_of_the_current_batch():
    seen = []
    method = types.SimpleNamespace(losses=lambda ctx: seen.append(ctx.p_t) or {}, name="dmp")
    stream = types.SimpleNamespace(last=[4, 1])  # the batch: target images 4 and 1
    labels = torch.tensor([0, 2, 1, 1, 0])
    read = torch.tensor([False, True, False, False, False])  # image 1's label is read, image 4's is not
    wrapped = _script().LabelledIntra(method, stream, labels, read)
    p = torch.tensor([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
    wrapped.losses(_ctx(p))
    assert torch.equal(seen[0], torch.tensor([[0.2, 0.5, 0.3], [0.0, 0.0, 1.0]]))
    assert wrapped.name == "dmp"  # everything else is the method's


def _ctx(p_t):
    from dmp.methods import StepContext
    return StepContext({}, 0, 0.0, {}, p_t.shape[1], torch.device("cpu"), [], None, None, p_t=p_t)


def _cfg():
    return dict(dataset="blobs", source="src", target="tgt", batch_size=20, epochs=4, intra_start="1ep", seed=0,
                threads=1, method="dmp", setting="vanilla", device="cpu")


def test_reading_no_label_is_dmp_bit_for_bit_and_reading_half_changes_the_run(isolated, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.delenv("DMP_DATA_DIR")
    _declare(2.0)
    s = _script()
    plain = train(_cfg(), tmp_path / "plain", progress=False)
    none = s.diagnose(_cfg(), 0.0, tmp_path / "q0")
    assert none["read"] == 0 and none["accuracy"] == none["accuracy_held_out"] == plain["accuracy"]
    assert (tmp_path / "q0" / "log.csv").read_text() == (tmp_path / "plain" / "log.csv").read_text()
    half = s.diagnose(_cfg(), 0.5, tmp_path / "q0.5")
    assert half["read"] == 60 and len(half["predictions"]) == 120
    read = s.read_mask(120, 0, 0.5)
    labels = torch.arange(120) % 3  # _declare's labels
    right = torch.tensor(half["predictions"]) == labels
    assert half["accuracy_held_out"] == pytest.approx(100.0 * float(right[~read].double().mean()))
    intra = [r.split(",") for r in (tmp_path / "q0.5" / "log.csv").read_text().splitlines()]
    plain_intra = [r.split(",") for r in (tmp_path / "plain" / "log.csv").read_text().splitlines()]
    col = intra[0].index("intra")
    assert [r[col] for r in intra[1:]] != [r[col] for r in plain_intra[1:]]  # the term read the labels
    assert json.loads((tmp_path / "q0.5" / "diagnosis.json").read_text()) == half  # a second call reads it back
    assert s.diagnose(_cfg(), 0.5, tmp_path / "q0.5") == half


def test_every_committed_run_that_read_target_labels_says_so_and_no_table_takes_it():
    """Each committed diagnosis run whose diagnosis.json counts labels read carries ``target_labels_read`` in its own
    metrics.json, with the same count, and :func:`dmp.metrics.read_metrics` refuses it whatever config is expected; a
    run that read none does not carry it."""
    from pathlib import Path

    from dmp.metrics import read_metrics

    root = Path(__file__).resolve().parents[1] / "results"
    seen = 0
    for diag in sorted(root.rglob("diagnosis.json")):
        record = diag.with_name("metrics.json")
        if not record.is_file():
            continue
        read, metrics = json.loads(diag.read_text()).get("read"), json.loads(record.read_text())
        if not read:
            assert not metrics.get("target_labels_read"), record
            continue
        seen += 1
        assert metrics["target_labels_read"].startswith(f"the labels of {read} of the "), record
        assert "no target labels" not in metrics["model_selection"], record
        got, why = read_metrics(record, {}, [("accuracy",)])
        assert got is None and why.startswith("a run that read target labels"), (record, why)
    assert seen >= 10
