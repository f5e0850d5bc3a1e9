"""The generated demo dataset: layout, determinism, committed lists, and domains that really differ."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.data import demo, fetch, registry, splits, verify


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return demo.generate(tmp_path_factory.mktemp("demo") / "data", progress=False)


def _digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.png")):
        h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def test_layout_and_counts(generated):
    from PIL import Image

    spec = registry.get_dataset("demo")
    assert len(spec.domains) >= 3 and len(spec.classes) >= 8
    for d in spec.domains:
        entries = verify.scan_domain(spec, d, generated)  # Office-31 layout: <domain>/images/<class>/<file>
        assert len(entries) == d.count == 300
        verify.check_counts(spec, {d.name: verify.per_class(spec, entries)})
        with Image.open(generated / entries[0][0]) as img:
            assert img.size == (32, 32) and img.mode == "RGB"


def test_generation_is_deterministic(generated, tmp_path):
    again = demo.generate(tmp_path / "again", progress=False)
    assert _digest(again) == _digest(generated)
    assert np.array_equal(np.asarray(demo.render("noisy", "star", 3)), np.asarray(demo.render("noisy", "star", 3)))
    assert not np.array_equal(np.asarray(demo.render("noisy", "star", 3)), np.asarray(demo.render("noisy", "star", 4)))


def test_committed_lists_match_the_generated_data(generated):
    spec = registry.get_dataset("demo")
    for d in spec.domains:
        assert splits.read_list(registry.list_file(spec, d.name)) == verify.scan_domain(spec, d, generated)
        part = splits.read_list(registry.list_file(spec, d.name, "partial"))
        assert sorted({lab for _, lab in part}) == list(range(5)) and len(part) == 150
        n10 = splits.read_list(registry.list_file(registry.get_dataset("demo"), d.name, "n10"))
        assert np.bincount([lab for _, lab in n10]).tolist() == [10] * 10


def test_domains_differ_in_style(generated):
    """Simple image statistics separate the domains: colourfulness, local noise and edge sharpness."""
    from PIL import Image

    spec = registry.get_dataset("demo")
    stats = {}
    for d in spec.domains:
        imgs = np.stack([np.asarray(Image.open(generated / p), np.float32)
                         for p, _ in verify.scan_domain(spec, d, generated)])
        colour = np.median(imgs.std(axis=3).mean(axis=(1, 2)))
        diff = np.abs(np.diff(imgs, axis=2)).reshape(len(imgs), -1)
        noise, edge = np.median(diff.mean(axis=1)), np.median(np.percentile(diff, 99, axis=1))
        stats[d.name] = (colour, noise, edge)
    assert stats["blurry"][0] < 0.35 * min(stats[n][0] for n in ("solid", "outline"))  # grey
    assert stats["noisy"][1] > 1.5 * stats["solid"][1]  # textured
    assert stats["blurry"][2] < 0.75 * min(stats[n][2] for n in ("solid", "outline"))  # soft edges


def test_fetch_demo_generates_and_verifies(isolated):
    root = fetch.fetch("demo", progress=False)
    assert (root / "solid" / "images" / "arrow").is_dir()
    assert sum(verify.verify("demo")["outline"].values()) == 300


# -- nothing the user owns is deleted; folders follow the umask; a killed run's staging is cleaned up -----------------
def test_a_folder_with_user_files_is_refused_and_left_intact(tmp_path, capsys):
    from dmp.cli import main

    root = tmp_path / "data"
    demo.generate(root, per_class=1, progress=False)
    (root / "thesis.tex").write_text("my thesis")
    (root / "solid" / "notes.csv").write_text("a,b\n")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(FileExistsError, match=r"holds files that are not demo images \(solid/notes.csv and 1 more\)"):
        demo.generate(root, per_class=1, progress=False)
    with pytest.raises(SystemExit) as exit_:
        main(["data", "demo", "--root", str(root), "--no-lists"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {root} holds files that are not demo images") and err.count("\n") == 1
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert not list(tmp_path.glob(".data.*"))  # no staging folder left either


def test_a_new_an_empty_or_an_earlier_demo_folder_is_generated_into(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    demo.generate(root, per_class=1, progress=False)
    (root / "solid" / "images" / "star" / "star_0000.png").unlink()  # an earlier, damaged demo: replaced
    demo.generate(root, per_class=2, progress=False)
    assert len(list(root.rglob("*.png"))) == 2 * len(demo.DEMO_CLASSES) * len(demo.DEMO_DOMAINS)
    assert demo.foreign_files(root) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize("mask, mode", [(0o022, 0o755), (0o077, 0o700), (0o002, 0o775)])
def test_generated_folders_follow_the_umask(tmp_path, mask, mode):
    import os
    import stat

    old = os.umask(mask)
    try:
        root = demo.generate(tmp_path / "data", per_class=1, progress=False)
    finally:
        os.umask(old)
    for path in (root, root / "solid", root / "solid" / "images" / "star"):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def test_staging_folders_of_a_killed_run_are_removed_on_the_next(tmp_path):
    import os
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # a process that has ended
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        # staging folders of a killed run (the last as tempfile.mkdtemp named them before)
        left = [f".data.tmp-{dead_pid}-1a2b3c4d", f".data.old-{dead_pid}-5e6f7a8b", ".data.tmp-k3j4_x9"]
        running = f".data.tmp-{live.pid}-0f0f0f0f"  # a generation still running: not touched
        for name in (*left, running):
            (tmp_path / name / "solid").mkdir(parents=True)
        (tmp_path / ".data.tmp-notes").write_text("a file of the user's")  # not a staging folder
        demo.generate(tmp_path / "data", per_class=1, progress=False)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".data.tmp-notes", running, "data"])
    finally:
        live.communicate(b"")
    assert os.path.isdir(tmp_path / "data" / "solid")
