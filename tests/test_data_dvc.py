"""DVC on a copy of the project in a temporary git repository (never touching this checkout's DVC state): stages
are keyed by the datasets' declaration files, not by code, and the committed dvc.lock is current (once the data is
in place, ``dvc status`` is clean for it, before and after editing the data code; a fresh clone without the data is
not clean); ``dvc repro`` builds the demo data and
its lists, ``dvc push`` stores it in a local-folder remote, ``dvc pull`` restores identical content."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from dmp.data import declare, registry

BIN = Path(sys.executable).parent
DVC = shutil.which("dvc", path=str(BIN)) or shutil.which("dvc")


def _tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_stages_depend_on_data_declarations_not_code():
    stages = yaml.safe_load((registry.PROJECT / "dvc.yaml").read_text())["stages"]
    deps = [d for s in stages.values() for d in (s.get("do", s)).get("deps", [])]
    assert deps and not [d for d in deps if d.startswith("dmp/")]
    assert "datasets/${item}/source.json" in stages["fetch"]["do"]["deps"]
    assert "datasets/${item}/splits.json" in stages["prepare"]["do"]["deps"]
    for name in stages["fetch"]["foreach"] + stages["prepare"]["foreach"]:
        assert (registry.dataset_dir(name) / "source.json").is_file(), name


def test_committed_declarations_are_current():
    """``python -m dmp data declare`` was run after the last change of a declaration (or of the split protocol)."""
    for name in declare.declared():
        for path, text in declare.render(name).items():
            assert path.is_file() and path.read_text() == text, f"{path} is stale: run python -m dmp data declare"


@pytest.fixture
def repo(tmp_path):
    """A fresh clone: the committed files DVC needs, in a new git repository (``repo.path``); ``repo.run(*cmd)``."""
    src, repo = registry.PROJECT, tmp_path / "repo"
    shutil.copytree(src / "dmp", repo / "dmp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for f in ("dvc.yaml", "dvc.lock", ".dvcignore", "datasets/.gitignore", ".dvc/config", ".dvc/.gitignore"):
        if (src / f).exists():
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / f, repo / f)
    for name in declare.declared():
        for f in ("source.json", "splits.json"):
            (repo / "datasets" / name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / "datasets" / name / f, repo / "datasets" / name / f)
    shutil.copytree(src / "datasets" / "demo" / "lists", repo / "datasets" / "demo" / "lists")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMP_", "DVC_", "GIT_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(repo), DVC_NO_ANALYTICS="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def run(*cmd):
        res = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stdout}\n{res.stderr}"
        return res.stdout

    run("git", "init", "-q")  # the shipped .dvc/ (no remote) is used as is: no `dvc init`
    return SimpleNamespace(path=repo, run=run)


@pytest.mark.slow
@pytest.mark.skipif(DVC is None or shutil.which("git") is None, reason="dvc or git not installed")
def test_status_is_clean_for_the_committed_lock_once_the_data_is_in_place(repo):
    lock = (repo.path / "dvc.lock").read_text()
    locked = list(yaml.safe_load(lock)["stages"])
    assert set(locked) == {"demo", "prepare@demo"}
    assert "demo" in json.loads(repo.run(DVC, "status", "--json", *locked))  # a fresh clone: no data yet
    # what `dvc pull` restores: the demo data, regenerated here and put in the cache; the lock must not change
    repo.run(sys.executable, "-m", "dmp", "data", "demo", "--no-lists")
    repo.run(DVC, "commit", "--force", *locked)
    assert (repo.path / "dvc.lock").read_text() == lock
    assert json.loads(repo.run(DVC, "status", "--json", *locked)) == {}
    for module in ("fetch", "splits", "registry", "verify", "demo"):  # code edits rerun nothing
        with open(repo.path / "dmp" / "data" / f"{module}.py", "a") as fh:
            fh.write("\n# an edit\n")
    assert json.loads(repo.run(DVC, "status", "--json", *locked)) == {}
    rules = repo.path / "datasets" / "demo" / "splits.json"  # a declaration change reruns what depends on it
    rules.write_text(rules.read_text().replace('"seed": 0', '"seed": 1'))
    status = json.loads(repo.run(DVC, "status", "--json", *locked))
    assert list(status) == ["prepare@demo"]
    assert status["prepare@demo"][0]["changed deps"] == {"datasets/demo/splits.json": "modified"}


@pytest.mark.slow
@pytest.mark.skipif(DVC is None or shutil.which("git") is None, reason="dvc or git not installed")
def test_dvc_repro_push_pull_round_trip(repo, tmp_path):
    root = repo.path
    (root / "dvc.lock").unlink()
    committed = _tree_hashes(root / "datasets" / "demo" / "lists")
    # what `dvc remote add --local -d lab DIR` writes (one dvc start-up less)
    (root / ".dvc" / "config.local").write_text(f"[core]\n    remote = lab\n['remote \"lab\"']\n"
                                                f"    url = {tmp_path / 'remote'}\n")
    out = repo.run(DVC, "repro", "prepare@demo")
    assert "Running stage 'demo'" in out and "Running stage 'prepare@demo'" in out
    data = root / "datasets" / "demo" / "data"
    before = _tree_hashes(data)
    assert len(before) == 4 * 10 * 30
    assert _tree_hashes(root / "datasets" / "demo" / "lists") == committed  # lists reproduce exactly
    assert (root / "dvc.lock").read_text() == (registry.PROJECT / "dvc.lock").read_text()  # the committed lock
    repo.run(DVC, "push")
    shutil.rmtree(data)
    shutil.rmtree(root / ".dvc" / "cache")
    repo.run(DVC, "pull", "demo")
    assert _tree_hashes(data) == before
