"""Issue 53's input cases: every bad input is one line naming the option, file, key or line, before any work.

``extract-features`` options checked before the weights load (the memory of ``--views`` computed by hand), run
records read by the research reports with the checks ``dmp tables`` applies, a dataset.yaml whose title is not
text, a convergence log.csv with a non-number, and an explicit ``root:`` against ``DMP_DATA_DIR``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripts_module import load_script
from test_reliability_more import _one_line_error


# ----------------------------------------------------------------------------------------------- extract-features
def _extract(tmp_path, monkeypatch, *options) -> list[str]:
    """``data extract-features demo`` with a weights file that does not exist: an option refused before the weights
    load is the error; one checked after them would say that the file is missing."""
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "data"))
    return ["data", "extract-features", "demo", "--out-name", "feats_x", "--weights-path",
            str(tmp_path / "missing.pt"), *options]


@pytest.mark.parametrize("options, says", [
    (("--views", "-1"), "--views -1: the number of stored training views of each image is 0 (none) or more"),
    (("--crop", "0"), "--crop 0: an image side is a whole number of pixels from 1 to 4096"),
    (("--resize", "0"), "--resize 0: an image side is a whole number of pixels from 1 to 4096"),
    (("--resize", "5000", "--crop", "32"), "--resize 5000: an image side is a whole number of pixels from 1 to 4096"),
    (("--resize", "24", "--crop", "32"), "--crop 32 is larger than --resize 24 (the crop is cut from the resized "
                                         "image; a larger one would pad it with zeros): set --crop <= --resize"),
    (("--batch-size", "0"), "--batch-size 0: the images per forward pass are 1 or more"),
])
def test_extract_features_options_are_refused_before_the_weights_load(tmp_path, monkeypatch, capsys, options, says):
    err = _one_line_error(capsys, _extract(tmp_path, monkeypatch, *options))
    assert err == f"error: {says}"
    assert not (tmp_path / "data").exists()


def test_a_crop_equal_to_the_resize_is_accepted(tmp_path, monkeypatch, capsys):
    """The same bound as ``dmp train``'s (crop <= resize): the next error is the missing weights file."""
    err = _one_line_error(capsys, _extract(tmp_path, monkeypatch, "--resize", "32", "--crop", "32"))
    assert "missing.pt" in err and "--crop" not in err


@pytest.mark.parametrize("stage, floats", [(None, 320), ("5", 448)])
def test_views_that_would_not_fit_in_memory_are_refused_saying_what_they_take(tmp_path, monkeypatch, capsys,
                                                                             stage, floats):
    """EfficientNet-Lite0 at 32 px: before the head 320 channels at stride 32 (1 x 1), before stage 5 112 channels
    at stride 16 (2 x 2 = 448 values). The demo's domains have 300 images each; with 1000 views and batches of 64:
    2 x 300 x 1001 x D x 4 bytes held, plus 64 x 1001 x 3 x 32 x 32 x 4 bytes of input."""
    from dmp.models import extract

    pytest.importorskip("timm")
    monkeypatch.setattr(extract, "machine_memory", lambda: 2 ** 30)
    options = ["--backbone", "efficientnet_lite0", "--resize", "32", "--crop", "32", "--views", "1000"]
    options += ["--trunk-stage", stage] if stage else []
    err = _one_line_error(capsys, _extract(tmp_path, monkeypatch, *options))
    need = (2 * 300 * 1001 * floats * 4 + 64 * 1001 * 3 * 32 * 32 * 4) / 2 ** 30
    where = f" before stage {stage}" if stage else ""
    assert err == (f"error: --views 1000: domain solid (300 images) would hold 300 x 1001 views x {floats} floats "
                   f"(efficientnet_lite0 trunk{where} at 32 px), twice while assembled, plus a batch of 64 x 1001 "
                   f"images: {need:.1f} GiB, more than this machine's memory (1.0 GiB); store fewer views or a "
                   f"smaller --crop")
    assert not (tmp_path / "data").exists()


def test_a_million_views_are_refused_on_any_machine(tmp_path, monkeypatch, capsys):
    """300 x 1000001 x 15680 floats (Lite0's 320 x 7 x 7 at 224 px) are 17 PiB: more than any machine holds."""
    pytest.importorskip("timm")
    err = _one_line_error(capsys, _extract(tmp_path, monkeypatch, "--backbone", "efficientnet_lite0",
                                           "--views", "1000000"))
    assert err.startswith("error: --views 1000000: domain solid (300 images) would hold 300 x 1000001 views x 15680 "
                          "floats (efficientnet_lite0 trunk at 224 px)"), err


def test_views_that_fit_are_not_refused(monkeypatch):
    from dmp.data import registry
    from dmp.models import extract

    pytest.importorskip("timm")
    monkeypatch.setattr(extract, "machine_memory", lambda: 2 ** 30)
    assert extract.check_views_memory(registry.get_dataset("demo"), "full", "efficientnet_lite0", None, 32, 4,
                                      64) is None


# ----------------------------------------------------------------------------------------------- run records
RECORD = {"status": "complete", "accuracy": 50.0, "mean_class_accuracy": 50.0, "git_commit": "abc123def456",
          "dataset_version": "v1", "weights_sha256": "f" * 64}


def _record(path: Path, text: str | None = None, **changes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else json.dumps({**RECORD, **changes}))
    return path


def _evidence_record(root: Path, **changes) -> Path:
    config = {"dataset": "demo", "setting": "vanilla", "source": "solid", "target": "outline", "method": "dmp",
              "seed": 0}
    return _record(root / "main/demo/vanilla/S-O/dmp/default/seed0/metrics.json", config=config, **changes)


def _office31_record(root: Path, **changes) -> Path:
    config = {"dataset": "office31_lite0_t128", "method": "dmp", "seed": 0, "source": "amazon", "target": "webcam"}
    return _record(root / "runs/office31_lite0_t128/vanilla/A-W/dmp/G/full-full/seed0/metrics.json", config=config,
                   **changes)


def _script_error(capsys, main, argv) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err and not out.strip(), out
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_the_evidence_report_refuses_an_accuracy_the_tables_refuse(tmp_path, capsys):
    """The same record is refused by `dmp tables` (read_metrics) and by the report, for the same reason."""
    from dmp.metrics import read_metrics

    evidence = load_script("evidence")
    path = _evidence_record(tmp_path / "runs", accuracy=1234.5)
    report = tmp_path / "evidence.md"
    err = _script_error(capsys, evidence.main, ["--report-only", "--out", str(tmp_path / "runs"),
                                                "--report", str(report)])
    assert err == f"error: {path}: accuracy 1234.5 is not an accuracy in [0, 100]"
    assert read_metrics(path, {}, ()) == (None, "accuracy 1234.5 is not an accuracy in [0, 100]")
    assert not report.exists()


def test_the_evidence_report_names_a_cut_off_record_and_an_empty_folder(tmp_path, capsys):
    evidence = load_script("evidence")
    args = ["--report-only", "--out", str(tmp_path / "runs"), "--report", str(tmp_path / "evidence.md")]
    err = _script_error(capsys, evidence.main, args)
    assert err == (f"error: no runs under {tmp_path / 'runs'} (the report reads its */*/*/*/*/*/seed*/metrics.json)")
    path = _evidence_record(tmp_path / "runs")
    _record(path, path.read_text()[:40])
    assert _script_error(capsys, evidence.main, args) == f"error: {path}: unreadable (JSONDecodeError)"
    _record(path, json.dumps({**RECORD, "config": {"dataset": "demo"}}))
    assert _script_error(capsys, evidence.main, args) == (
        f"error: {path}: no key config/setting, config/source, config/target, config/method, config/seed")


def test_the_office31_report_refuses_a_record_the_tables_refuse(tmp_path, capsys):
    report = load_script("office31_report")
    path = _office31_record(tmp_path, accuracy=1234.5)
    err = _script_error(capsys, report.main, ["--root", str(tmp_path)])
    assert err == f"error: {path}: accuracy 1234.5 is not an accuracy in [0, 100]"
    _record(path, json.dumps({**RECORD, "accuracy": 50})[:30])
    assert _script_error(capsys, report.main, ["--root", str(tmp_path)]) == (
        f"error: {path}: unreadable (JSONDecodeError)")
    _office31_record(tmp_path, status="running")
    assert _script_error(capsys, report.main, ["--root", str(tmp_path)]) == (
        f"error: {path}: status 'running', not 'complete'")


def test_the_office31_report_on_an_empty_folder_and_its_help(tmp_path, capsys):
    report = load_script("office31_report")
    err = _script_error(capsys, report.main, ["--root", str(tmp_path)])
    assert err == (f"error: no runs under {tmp_path} (the section reads "
                   f"runs/office31_lite0_t128/vanilla/*/*/G/full-full/seed*/metrics.json there)")
    with pytest.raises(SystemExit) as exc:
        report.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "--root" in out and "## Office-31" not in out


def test_a_valid_record_reads_as_before(tmp_path):
    """A record without the keys only the tables need (status, mean_class_accuracy) is read, as the reports'
    fixtures are; its accuracy is the one written."""
    from dmp.metrics import load_record

    path = _office31_record(tmp_path, accuracy=61.5)
    record = json.loads(path.read_text())
    del record["status"], record["mean_class_accuracy"]
    path.write_text(json.dumps(record))
    assert load_record(path)["accuracy"] == 61.5
    assert load_script("office31_report")._runs("runs/*/vanilla/*/*/G/full-full/seed*/metrics.json",
                                                 tmp_path)["accuracy"].tolist() == [61.5]
