"""DVC round trip on a copy of the project in a temporary git repository (never touching this checkout's DVC
state): ``dvc repro`` builds the demo data and its lists, ``dvc push`` stores it in a local-folder remote,
the data and the cache are deleted, ``dvc pull`` restores identical content."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dmp.data import registry

BIN = Path(sys.executable).parent
DVC = shutil.which("dvc", path=str(BIN)) or shutil.which("dvc")
pytestmark = pytest.mark.skipif(DVC is None or shutil.which("git") is None, reason="dvc or git not installed")


def _tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_dvc_repro_push_pull_round_trip(tmp_path):
    src = registry.PROJECT
    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(src / "dmp", repo / "dmp", ignore=ignore)
    for f in ("dvc.yaml", ".dvcignore", "datasets/.gitignore", ".dvc/config", ".dvc/.gitignore"):
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, repo / f)
    shutil.copytree(src / "datasets" / "demo" / "lists", repo / "datasets" / "demo" / "lists")
    committed = _tree_hashes(repo / "datasets" / "demo" / "lists")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMP_", "DVC_", "GIT_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(repo), DVC_NO_ANALYTICS="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def run(*cmd):
        res = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stdout}\n{res.stderr}"
        return res.stdout

    run("git", "init", "-q")  # the shipped .dvc/ (no remote) is used as is: no `dvc init`
    # what `dvc remote add --local -d lab DIR` writes (one dvc start-up less)
    (repo / ".dvc" / "config.local").write_text(f"[core]\n    remote = lab\n['remote \"lab\"']\n"
                                                 f"    url = {tmp_path / 'remote'}\n")
    out = run(DVC, "repro", "prepare@demo")
    assert "Running stage 'demo'" in out and "Running stage 'prepare@demo'" in out
    data = repo / "datasets" / "demo" / "data"
    before = _tree_hashes(data)
    assert len(before) == 4 * 10 * 30
    assert _tree_hashes(repo / "datasets" / "demo" / "lists") == committed  # lists reproduce exactly
    assert "datasets/demo/data" in (repo / "dvc.lock").read_text()
    run(DVC, "push")
    shutil.rmtree(data)
    shutil.rmtree(repo / ".dvc" / "cache")
    run(DVC, "pull", "demo")
    assert _tree_hashes(data) == before
