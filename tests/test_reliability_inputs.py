"""Every bad input is one line naming the option, file, key or line, before any work.

``extract-features`` options checked before the weights load (the memory of ``--views`` computed by hand), run
records read by the research reports with the checks ``dmp tables`` applies, a dataset.yaml whose title is not
text, a convergence log.csv with a non-number, and an explicit ``root:`` against ``DMP_DATA_DIR``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_reliability_more import _one_line_error

from dmp.cli import main as dmp_main
from studies import evidence
from studies.office31 import report as office31_report
from studies.records import office31_runs


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

    path = _evidence_record(tmp_path / "runs", accuracy=1234.5)
    report = tmp_path / "evidence.md"
    err = _script_error(capsys, evidence.main, ["--out", str(tmp_path / "runs"), "--report", str(report)])
    assert err == f"error: {path}: accuracy 1234.5 is not an accuracy in [0, 100]"
    assert read_metrics(path, {}, ()) == (None, "accuracy 1234.5 is not an accuracy in [0, 100]")
    assert not report.exists()


def test_the_evidence_report_names_a_cut_off_record_and_an_empty_folder(tmp_path, capsys):
    args = ["--out", str(tmp_path / "runs"), "--report", str(tmp_path / "evidence.md")]
    err = _script_error(capsys, evidence.main, args)
    assert err == (f"error: no runs under {tmp_path / 'runs'} (the report reads its */*/*/*/*/*/seed*/metrics.json)")
    path = _evidence_record(tmp_path / "runs")
    _record(path, path.read_text()[:40])
    assert _script_error(capsys, evidence.main, args) == f"error: {path}: unreadable (JSONDecodeError)"
    _record(path, json.dumps({**RECORD, "config": {"dataset": "demo"}}))
    assert _script_error(capsys, evidence.main, args) == (
        f"error: {path}: no key config/setting, config/source, config/target, config/method, config/seed")


def test_the_office31_report_refuses_a_record_the_tables_refuse(tmp_path, capsys):
    path = _office31_record(tmp_path, accuracy=1234.5)
    err = _script_error(capsys, office31_report.main, ["--root", str(tmp_path)])
    assert err == f"error: {path}: accuracy 1234.5 is not an accuracy in [0, 100]"
    _record(path, json.dumps({**RECORD, "accuracy": 50})[:30])
    assert _script_error(capsys, office31_report.main, ["--root", str(tmp_path)]) == (
        f"error: {path}: unreadable (JSONDecodeError)")
    _office31_record(tmp_path, status="running")
    assert _script_error(capsys, office31_report.main, ["--root", str(tmp_path)]) == (
        f"error: {path}: status 'running', not 'complete'")


def test_the_office31_report_on_an_empty_folder_and_its_help(tmp_path, capsys):
    err = _script_error(capsys, office31_report.main, ["--root", str(tmp_path)])
    assert err == (f"error: no runs under {tmp_path} (the section reads "
                   f"runs/office31_lite0_t128/vanilla/*/*/G/full-full/seed*/metrics.json there)")
    with pytest.raises(SystemExit) as exc:
        office31_report.main(["--help"])
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
    assert office31_runs("runs/*/vanilla/*/*/G/full-full/seed*/metrics.json", tmp_path)["accuracy"].tolist() == [61.5]


# ----------------------------------------------------------------------------------------------- dataset.yaml
FEATURES_YAML = """kind: features
classes: [a, b]
domains:
  - {name: one, short: O, file: one.npz}
  - {name: two, short: T, file: two.npz}
"""


def _declare(folder: Path, name: str, text: str) -> Path:
    path = folder / name / "dataset.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("key, value", [("title", "[1, 2]"), ("title", "{a: 1}"), ("root", "[data]")])
def test_a_title_or_root_that_is_not_text_names_the_file_and_the_key(tmp_path, monkeypatch, capsys, key, value):
    """The bad declaration is named (file and key) in `data list`, which lists the other user dataset after it."""
    labs = tmp_path / "lab"
    bad = _declare(labs, "aaa_bad", FEATURES_YAML + f"{key}: {value}\n")
    _declare(labs, "zzz_good", FEATURES_YAML + "title: fine\n")
    monkeypatch.setenv("DMP_DATASETS_DIR", str(labs))
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "data"))
    from dmp.data import registry

    with pytest.raises(ValueError) as exc:
        registry.get_dataset("aaa_bad")
    import yaml
    assert str(exc.value) == f"{bad}: key {key!r} must be text, got {yaml.safe_load(value)!r}"
    with pytest.raises(SystemExit) as done:
        dmp_main(["data", "list"])
    assert done.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("aaa_bad") and "BROKEN" in line and f"{bad}: key {key!r} must be text" in line
               for line in out), out
    assert any(line.startswith("zzz_good") and "[fine]" in line for line in out), out


def test_an_explicit_root_wins_over_dmp_data_dir(tmp_path, monkeypatch):
    """`root:` in the dataset.yaml (relative to it) is where the files are read, DMP_DATA_DIR set or not; a
    declaration without one is placed by DMP_DATA_DIR as before."""
    from dmp.data import registry

    labs = tmp_path / "lab"
    _declare(labs, "rooted", FEATURES_YAML + "root: ../../features\n")
    _declare(labs, "unrooted", FEATURES_YAML)
    monkeypatch.setenv("DMP_DATASETS_DIR", str(labs))
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "env"))
    assert registry.data_root(registry.get_dataset("rooted")) == (tmp_path / "features").resolve()
    assert registry.data_root(registry.get_dataset("unrooted")) == (tmp_path / "env" / "unrooted").resolve()
    with pytest.raises(registry.DatasetMissingError) as missing:  # the advice: the root, not DMP_DATA_DIR
        registry.require_dataset(registry.get_dataset("rooted"))
    assert str(missing.value) == (
        f"dataset 'rooted' is not in place: missing {(tmp_path / 'features' / 'one.npz').resolve()} (domain one), "
        f"{(tmp_path / 'features' / 'two.npz').resolve()} (domain two). Place the files there, or change the root: "
        f"of {labs / 'rooted' / 'dataset.yaml'} (it wins over DMP_DATA_DIR) (each domain's file: one.npz, two.npz).")
    monkeypatch.delenv("DMP_DATA_DIR")
    assert registry.data_root(registry.get_dataset("rooted")) == (tmp_path / "features").resolve()
    assert registry.data_root(registry.get_dataset("unrooted")) == (labs / "unrooted" / "data").resolve()


def test_an_explicit_root_s_data_is_read_with_dmp_data_dir_set(tmp_path, monkeypatch):
    """The features under the declared root load (the values written), where DMP_DATA_DIR/<name> holds nothing."""
    import numpy as np

    from dmp.data import registry, splits

    labs = tmp_path / "lab"
    _declare(labs, "rooted", FEATURES_YAML + "root: /" + str((tmp_path / "features").resolve()).lstrip("/") + "\n")
    for i, dom in enumerate(("one", "two")):
        (tmp_path / "features").mkdir(exist_ok=True)
        np.savez(tmp_path / "features" / f"{dom}.npz", X=np.full((2, 3), i + 0.5, np.float32), y=np.array([0, 1]))
    monkeypatch.setenv("DMP_DATASETS_DIR", str(labs))
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "env"))
    x, y = splits.load_arrays(registry.get_dataset("rooted"), "two")
    assert x.tolist() == [[1.5] * 3] * 2 and y.tolist() == [0, 1]


# ----------------------------------------------------------------------------------------------- figures
def test_a_non_number_in_a_convergence_log_names_the_file_and_line(tmp_path, capsys):
    """The fixture runs of tests/data/figures with one value of seed 0's log.csv (data line 2, file line 3)
    replaced by 'x': `dmp figures build convergence` stops with one line naming that file and line."""
    import shutil

    from dmp.figures.cli import figure_config_json

    pytest.importorskip("matplotlib")
    import yaml
    fixture = Path(__file__).resolve().parent / "data" / "figures"
    shutil.copytree(fixture / "runs" / "office31", tmp_path / "runs" / "office31")
    log = tmp_path / "runs/office31/vanilla/A-W/dmp/G/full-full/log_accuracy_every=20/seed0/log.csv"
    lines = log.read_text().splitlines()
    head, row = lines[0].split(","), lines[2].split(",")
    row[head.index("loss")] = "x"
    log.write_text("\n".join([*lines[:2], ",".join(row), *lines[3:]]) + "\n")
    config = yaml.safe_load((fixture / "figures_config.yaml").read_text())
    err = _one_line_error(capsys, ["figures", "build", "convergence", "--config-json",
                                   figure_config_json(config, "convergence"), "--results", str(tmp_path),
                                   "--out", str(tmp_path / "out")])
    assert err == f"error: {log} line 3: loss 'x' is not a number"
    log.write_text("\n".join([*lines[:2], ",".join(lines[2].split(",")[:-1]), *lines[3:]]) + "\n")
    err = _one_line_error(capsys, ["figures", "build", "convergence", "--config-json",
                                   figure_config_json(config, "convergence"), "--results", str(tmp_path),
                                   "--out", str(tmp_path / "out")])
    assert err == f"error: {log} line 3: another number of values than the header's columns"


def test_a_run_that_read_target_labels_says_so_and_no_table_takes_it(tmp_path):
    """A trainer that feeds target labels to a loss (the pseudo-label diagnosis) sets ``target_labels_read``: its
    metrics.json records what it read and drops "no target labels used"; ``read_metrics`` (every table's and row's
    reader) refuses that record while it takes the same run's record without the flag."""
    import json

    from synthetic import shift_task, small_cfg

    from dmp.config import resolve
    from dmp.metrics import read_metrics
    from dmp.train import Trainer

    cfg = resolve(small_cfg(iterations=4, intra_start=2))

    class Reads(Trainer):
        target_labels_read = "the labels of 3 of the 40 target images, read by the intra-class term"

    Reads(cfg, shift_task(), tmp_path, progress=False).run()
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["target_labels_read"].startswith("the labels of 3 of the 40")
    assert "no target labels" not in record["model_selection"]
    metrics, why = read_metrics(tmp_path / "metrics.json", cfg, ())
    assert metrics is None and "read target labels" in why and "never a result of a table" in why
    record["target_labels_read"] = None
    (tmp_path / "metrics.json").write_text(json.dumps(record))
    assert read_metrics(tmp_path / "metrics.json", cfg, ())[1] is None


def test_an_error_in_a_dataloader_worker_is_the_single_process_line(tmp_path):
    """A truncated JPEG read by a DataLoader worker (num_workers > 0) stops the run with the same one line the
    single-process path prints (the file and why), not the worker's re-raised traceback."""
    from PIL import Image
    from torch.utils.data import DataLoader

    from dmp.commands import error_message
    from dmp.data.inputs import ImageListDataset, image_transforms

    good = tmp_path / "good.jpg"
    Image.new("RGB", (32, 32), (200, 10, 10)).save(good)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(good.read_bytes()[:100])
    (tmp_path / "list.txt").write_text("bad.jpg 0\n")
    images = ImageListDataset(tmp_path, tmp_path / "list.txt", image_transforms(False, 32, 28), num_classes=1)
    with pytest.raises(Exception) as alone:
        images[0]
    with pytest.raises(Exception) as caught:
        next(iter(DataLoader(images, num_workers=1)))
    assert "DataLoader worker" in str(caught.value)                     # what torch re-raises
    line = error_message(alone.value)
    assert error_message(caught.value) == line and "\n" not in line and "bad.jpg" in line
