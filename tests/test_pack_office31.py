"""scripts/pack_office31.py on a generated Office-31 (tiny JPEGs of every domain and class, in both accepted layouts):
the pack holds the same files and labels, every image at 256 x 256, and a dataset.yaml that the registry accepts,
fetches, verifies and resolves to Office-31's preset. Everything is written under tmp_path."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from data_fixtures import isolated, tiny_image  # noqa: F401
from scripts_module import load_script

from dmp.config import resolve
from dmp.data import registry, verify
from dmp.data.load import open_rgb
from dmp.data.spec import spec_from_yaml

DOMAINS = ("amazon", "dslr", "webcam")
ROOT = Path(__file__).resolve().parents[1]
PER_CLASS = 2


def _office31(root: Path) -> None:
    """Tiny JPEGs of every domain and class; amazon with the images/ level (the official archive), the others
    without it (how other tools extract Office-31)."""
    spec = registry.get_dataset("office31")
    for n, d in enumerate(DOMAINS):
        for label, cls in enumerate(spec.classes):
            folder = root / d / ("images" if d == "amazon" else "") / cls
            folder.mkdir(parents=True)
            for i in range(PER_CLASS):
                (folder / f"frame_{i + 1:04d}.jpg").write_bytes(tiny_image(1000 * n + 10 * label + i))


@pytest.fixture
def packed(isolated, tmp_path, monkeypatch):  # noqa: F811
    src, out = tmp_path / "src", tmp_path / "decl" / "office31_256"
    _office31(src)
    script = load_script("pack_office31")
    assert script.main(["--src", str(src), "--out", str(out), "--max-mib", "5"]) == 0
    monkeypatch.setenv("DMP_DATASETS_DIR", str(out.parent))
    monkeypatch.delenv("DMP_DATA_DIR")  # the pack's images under its own root: out/data
    return src, out


def test_pack_keeps_files_and_labels_at_256_px(packed):
    src, out = packed
    office31 = registry.get_dataset("office31")
    spec = registry.get_dataset("office31_256")
    assert spec.classes == office31.classes and spec.partial_classes == office31.partial_classes
    assert [(d.name, d.short, d.count) for d in spec.domains] == [
        (d.name, d.short, len(office31.classes) * PER_CLASS) for d in office31.domains]
    for d in office31.domains:
        original = sorted((rel.replace("/images/", "/"), label) for rel, label in verify.scan_domain(office31, d, src))
        listed = registry.read_list(registry.list_file(registry.get_dataset("office31_256"), d.name, "full"))
        assert sorted(listed) == original
        partial = registry.read_list(registry.list_file(registry.get_dataset("office31_256"), d.name, "partial"))
        assert sorted(partial) == [e for e in original if e[1] in office31.partial_classes]
        for rel, _ in listed:
            img = open_rgb(out / "data" / rel)
            assert img.size == (256, 256)
    # the pixels: the original after the pipeline's resize, up to the JPEG rounding
    rel = listed[0][0]
    first = np.asarray(open_rgb(src / rel).resize((256, 256), 2), dtype=float)  # 2 = PIL bilinear
    assert np.abs(np.asarray(open_rgb(out / "data" / rel), dtype=float) - first).mean() < 8


def test_pack_declaration_is_accepted_verified_and_gets_office31_preset(packed):
    _, out = packed
    text = (out / "dataset.yaml").read_text()
    assert text.startswith("# packed by scripts/pack_office31.py")
    spec = spec_from_yaml(out / "dataset.yaml")
    assert spec.kind == "images" and spec.name == "office31_256"
    meta = dict(spec.meta)
    assert meta["packed_from"] == '"office31"' and meta["size"] == "256" and float(meta["pixel_mad"]) >= 0
    counts = verify.verify("office31_256")  # the lock written by the pack's fetch holds
    assert {d: sum(c.values()) for d, c in counts.items()} == {d: 31 * PER_CLASS for d in DOMAINS}
    assert (out / "lock.json").is_file() and registry.dataset_version(registry.get_dataset("office31_256"))
    base = dict(source="amazon", target="webcam", backbone="efficientnet_lite0")
    a, b = resolve(dict(base, dataset="office31")), resolve(dict(base, dataset="office31_256"))
    assert {k for k in a if a[k] != b[k]} == {"dataset"}  # workflow/gpu/gpu_office31.sh then passes no preset key


def test_pack_refuses_a_folder_it_did_not_write(isolated, tmp_path):  # noqa: F811
    src, out = tmp_path / "src", tmp_path / "decl" / "office31_256"
    out.mkdir(parents=True)
    (out / "mine.txt").write_text("keep")
    with pytest.raises(SystemExit, match="not a pack"):
        load_script("pack_office31").main(["--src", str(src), "--out", str(out), "--no-fetch"])
    assert (out / "mine.txt").read_text() == "keep"


def _gpu_script(out: Path, tmp_path: Path, cells: str) -> subprocess.CompletedProcess:
    """workflow/gpu/gpu_office31.sh in its dry mode (the checks and the commands, no training) on the pack ``out``."""
    env = dict(os.environ, DRY="1", PYTHON=sys.executable, PACK=str(out), CELL_LIST=cells, PARALLEL="2",
               OUT=str(tmp_path / "out"), WORK=str(tmp_path / "work"), RESULTS=str(tmp_path / "results"))
    return subprocess.run(["bash", str(ROOT / "workflow" / "gpu" / "gpu_office31.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_gpu_script_runs_the_listed_cells_in_their_order_but_a_committed_one(packed, tmp_path):
    _, out = packed
    committed = tmp_path / "results" / "runs" / "office31_256" / "vanilla" / "A-W" / "dmp" / "G" / "full-full" / "seed1"
    committed.mkdir(parents=True)
    (committed / "metrics.json").write_text("{}")
    run = _gpu_script(out, tmp_path, "W-A/dmp_no_ds/0 A-W/dmp/1 D-A/source_only/2")
    assert run.returncode == 0, run.stdout + run.stderr
    planned = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("DRY ")]
    assert planned == ["W-A/dmp_no_ds/0", "D-A/source_only/2"]   # the listed order; A-W/dmp/1 is committed
    assert "skip A-W/dmp/1" in run.stdout
    dry = next(line for line in run.stdout.splitlines() if line.startswith("DRY W-A"))
    assert "source=webcam target=amazon method=dmp_no_ds seed=0" in dry


@pytest.mark.parametrize("cells, says", [
    ("A-A/dmp/0", "CELL_LIST: 'A-A/dmp/0' is not <S>-<T>/<method>/<seed>"),
    ("W-A/dmp 0", "CELL_LIST: 'W-A/dmp' is not <S>-<T>/<method>/<seed>"),
    ("D-A/dmp/0 W-A/dmp_no_dss/0", "CELL_LIST: method 'dmp_no_dss' is not a registered method (did you mean "
                                   "'dmp_no_ds'"),
])
def test_gpu_script_refuses_a_bad_cell_list_in_one_line_before_any_cell(packed, tmp_path, cells, says):
    _, out = packed
    run = _gpu_script(out, tmp_path, cells)
    text = run.stdout + run.stderr
    assert run.returncode == 2 and says in text and "DRY " not in text and "Traceback" not in text
