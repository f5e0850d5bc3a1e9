"""DVC on a copy of the project in a temporary git repository (never touching this checkout's DVC state): stages
are keyed by the datasets' declaration files, not by code, and the committed dvc.lock is current (once the data is
in place, ``dvc status`` is clean for it, before and after editing the data code; a fresh clone without the data is
not clean); ``dvc repro`` builds the demo data and
its lists, ``dvc push`` stores it in a local-folder remote, ``dvc pull`` restores identical content."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from data_fixtures import isolated  # noqa: F401 (fixture)
from test_data_user_images import FOLDER_COUNTS, FOLDERS_YAML, _zip, make_folders

from dmp.data import cli, declare, registry
from tests import hang_guard

BIN = Path(sys.executable).parent
DVC = shutil.which("dvc", path=str(BIN)) or shutil.which("dvc")


def _tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_stages_depend_on_data_declarations_not_code():
    dvc_yaml = yaml.safe_load((registry.PROJECT / "dvc.yaml").read_text())
    stages = dvc_yaml["stages"]
    deps = [d for s in stages.values() for d in (s.get("do", s)).get("deps", [])]
    assert deps and not [d for d in deps if d.startswith("dmp/")]
    assert "datasets/${item}/source.json" in stages["fetch"]["do"]["deps"]
    assert "datasets/${item}/splits.json" in stages["prepare"]["do"]["deps"]
    # which datasets have stages is the registry's answer (datasets/dvc_stages.yaml), not a list in dvc.yaml
    assert dvc_yaml["vars"] == [f"datasets/{declare.STAGES_FILE}"]
    assert stages["fetch"]["foreach"] == "${fetch}" and stages["prepare"]["foreach"] == "${prepare}"
    assert stages["fetch_own"]["foreach"] == "${fetch_own}"
    lists = yaml.safe_load((registry.DATASETS_DIR / declare.STAGES_FILE).read_text())
    assert lists == {"fetch": ["office31", "officehome", "imageclef", "visda2017"], "fetch_own": [],
                     "prepare": ["office31", "officehome", "imageclef", "visda2017", "demo"]}
    for name in lists["fetch"] + lists["prepare"]:
        assert (registry.dataset_dir(name) / "source.json").is_file(), name
    # the benchmarks' data: pinned, never copied into DVC's cache nor deleted before the fetch reruns (a link to a
    # read-only shared copy stays as it is); a lab's own: cached, so that dvc push / pull store and restore it
    assert stages["fetch"]["do"]["outs"] == [{"datasets/${item}/data": {"cache": False, "persist": True}}]
    assert stages["fetch_own"]["do"]["outs"] == ["datasets/${item}/data"]
    assert stages["fetch_own"]["do"]["cmd"] == stages["fetch"]["do"]["cmd"]


def _dir_md5(root: Path) -> tuple[str, int]:
    """DVC's hash of a folder (``hash: md5``: the md5 of its sorted ``{md5, relpath}`` entries) and its file count."""
    entries = sorted(({"md5": hashlib.md5(p.read_bytes()).hexdigest(), "relpath": p.relative_to(root).as_posix()}
                      for p in root.rglob("*") if p.is_file()), key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + ".dir", len(entries)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


OFFICE31 = registry.PROJECT / "datasets" / "office31"


def test_the_committed_dvc_lock_pins_the_real_office31():
    """dvc.lock holds the Office-31 version the committed lock file, declarations and lists describe: its
    fetch@office31 output is the folder prepare@office31 reads, with as many files as datasets/office31/lock.json
    counts; the declarations and lists it hashed are the committed ones. With the images in place, the folder's
    hash and its per-domain counts are checked as well."""
    stages = yaml.safe_load((registry.PROJECT / "dvc.lock").read_text())["stages"]
    fetch, prepare = stages["fetch@office31"], stages["prepare@office31"]
    assert fetch["cmd"] == "python -m dmp data fetch office31" and prepare["cmd"] == "python -m dmp data prepare office31"
    deps = {d["path"]: d for d in fetch["deps"] + prepare["deps"]}
    assert deps["datasets/office31/source.json"]["md5"] == _md5(OFFICE31 / "source.json")
    assert deps["datasets/office31/splits.json"]["md5"] == _md5(OFFICE31 / "splits.json")
    (data,), (lists,) = fetch["outs"], prepare["outs"]
    assert data["path"] == "datasets/office31/data" and lists["path"] == "datasets/office31/lists"
    assert {k: deps["datasets/office31/data"][k] for k in ("md5", "size", "nfiles")} == \
        {k: data[k] for k in ("md5", "size", "nfiles")}
    lock = json.loads((OFFICE31 / "lock.json").read_text())
    counts = {d: sum(per.values()) for d, per in lock["counts"].items()}
    assert counts == {"amazon": 2817, "dslr": 498, "webcam": 795} and data["nfiles"] == sum(counts.values())
    assert (lists["md5"], lists["nfiles"]) == _dir_md5(OFFICE31 / "lists")
    root = OFFICE31 / "data"
    if not root.is_dir():
        pytest.skip("the Office-31 images are not in datasets/office31/data")
    assert _dir_md5(root) == (data["md5"], data["nfiles"])
    found = {d: sum(1 for p in (root / d).rglob("*") if p.is_file()) for d in counts}
    assert found == counts


def test_committed_declarations_are_current():
    """``python -m dmp data declare`` was run after the last change of a declaration (or of the split protocol)."""
    for name in declare.declared():
        for path, text in declare.render(name).items():
            assert path.is_file() and path.read_text() == text, f"{path} is stale: run python -m dmp data declare"
    stages = registry.DATASETS_DIR / declare.STAGES_FILE
    assert stages.read_text() == declare.render_stages(), f"{stages} is stale: run python -m dmp data declare"


def _declare(capsys) -> str:
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    assert cli.main(parser.parse_args(["data", "declare"])) == 0
    return capsys.readouterr().out


def test_a_dataset_declared_in_the_checkout_gets_its_stages(isolated, monkeypatch, capsys):
    """In a temporary copy of the declarations (``isolated``): a lab's image datasets declared in the checkout's
    datasets/ get fetch@/prepare@ stages (fetch only with archives to download); one declared outside the checkout,
    one whose images live elsewhere and a broken one get none, each with a one-line reason; the declaration of
    classes read from the data does not change when the data arrives."""
    committed = yaml.safe_load((registry.PROJECT / "datasets" / declare.STAGES_FILE).read_text())
    datasets, lab = registry.DATASETS_DIR, isolated.path / "lab"
    archive = "archives:\n  - {file: mine.zip, urls: [http://127.0.0.1:9/mine.zip]}\n"
    for folder, name, text in ((datasets, "mine", FOLDERS_YAML + archive), (datasets, "placed", FOLDERS_YAML),
                               (datasets, "elsewhere", FOLDERS_YAML + f"root: {isolated.path / 'imgs'}\n"),
                               (datasets, "broken", "kind: images\n"), (lab, "labs", FOLDERS_YAML + archive),
                               (datasets, "feats", "kind: features\nclasses: [a]\ndomains: [{name: x, file: x}]\n")):
        (folder / name).mkdir(parents=True)
        (folder / name / "dataset.yaml").write_text(text)
    monkeypatch.setenv("DMP_DATASETS_DIR", str(lab))
    monkeypatch.delenv("DMP_DATA_DIR")  # the data root the stages' outputs name: datasets/<name>/data
    out = _declare(capsys)
    lists = yaml.safe_load((datasets / declare.STAGES_FILE).read_text())
    assert lists == {"fetch": committed["fetch"], "fetch_own": committed["fetch_own"] + ["mine"],
                     "prepare": committed["prepare"] + ["mine", "placed"]}
    reasons = dict(line.split(": no DVC stage in this repository: ") for line in out.splitlines()
                   if ": no DVC stage" in line)
    assert sorted(reasons) == ["broken", "elsewhere", "labs"]
    assert reasons["labs"].startswith(f"declared in {lab / 'labs'}, outside this checkout")
    assert str(isolated.path / "imgs") in reasons["elsewhere"] and "cannot be read" in reasons["broken"]
    source = json.loads((datasets / "mine" / "source.json").read_text())
    assert source["classes"] == [] and source["classes_from"] == "folders"
    assert json.loads((datasets / "mine" / "splits.json").read_text())["partial_classes"] == ["cat", "dog"]
    assert (datasets / "placed" / "source.json").is_file() and not (datasets / "labs" / "source.json").exists()
    make_folders(datasets / "mine" / "data")  # the data arrives: the declarations DVC depends on stay as they are
    assert registry.get_dataset("mine").classes == ("The_Eiffel_Tower", "cat", "dog")
    assert declare.write() == []


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
    shutil.copy2(src / "datasets" / declare.STAGES_FILE, repo / "datasets" / declare.STAGES_FILE)
    shutil.copytree(src / "datasets" / "demo" / "lists", repo / "datasets" / "demo" / "lists")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMP_", "DVC_", "GIT_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(repo), DVC_NO_ANALYTICS="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def run(*cmd):
        res = hang_guard.run(cmd, cwd=repo, env=env, quiet=1200)
        assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stdout}\n{res.stderr}"
        return res.stdout

    run("git", "init", "-q")  # the shipped .dvc/ (no remote) is used as is: no `dvc init`
    return SimpleNamespace(path=repo, run=run)


@pytest.mark.slow
@pytest.mark.skipif(DVC is None or shutil.which("git") is None, reason="dvc or git not installed")
def test_status_is_clean_for_the_committed_lock_once_the_data_is_in_place(repo):
    lock = (repo.path / "dvc.lock").read_text()
    assert set(yaml.safe_load(lock)["stages"]) == {"demo", "prepare@demo", "fetch@office31", "prepare@office31"}
    locked = ["demo", "prepare@demo"]
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
    committed = yaml.safe_load((registry.PROJECT / "dvc.lock").read_text())["stages"]  # the committed lock's entries
    assert yaml.safe_load((root / "dvc.lock").read_text())["stages"] == {k: committed[k] for k in ("demo", "prepare@demo")}
    repo.run(DVC, "push")
    shutil.rmtree(data)
    shutil.rmtree(root / ".dvc" / "cache")
    repo.run(DVC, "pull", "demo")
    assert _tree_hashes(data) == before


@pytest.mark.slow
@pytest.mark.skipif(DVC is None or shutil.which("git") is None, reason="dvc or git not installed")
def test_a_dataset_declared_in_the_checkout_is_reproduced_pushed_and_pulled_by_dvc(repo, tmp_path):
    """A lab's own image dataset in a fresh clone, as a built-in: ``datasets/mine/dataset.yaml`` (its archive
    placed by hand in its downloads folder), ``data declare`` gives it stages, ``dvc repro prepare@mine`` fetches,
    locks and lists it, ``dvc push`` stores it and ``dvc pull`` restores the same bytes."""
    root = repo.path
    make_folders(tmp_path / "staging")
    (root / "datasets" / "mine" / "downloads").mkdir(parents=True)
    (root / "datasets" / "mine" / "downloads" / "mine.zip").write_bytes(_zip(
        {f"mine/{p.relative_to(tmp_path / 'staging').as_posix()}": p.read_bytes()
         for p in sorted((tmp_path / "staging").rglob("*.png"))}))
    (root / "datasets" / "mine" / "dataset.yaml").write_text(FOLDERS_YAML + "archives:\n  - {file: mine.zip}\n")
    out = repo.run(sys.executable, "-m", "dmp", "data", "declare")
    assert "datasets/mine/source.json" in out and f"datasets/{declare.STAGES_FILE}" in out
    assert {"fetch_own@mine", "prepare@mine"} <= set(repo.run(DVC, "stage", "list", "--name-only").split())
    (root / ".dvc" / "config.local").write_text(f"[core]\n    remote = lab\n['remote \"lab\"']\n"
                                                f"    url = {tmp_path / 'remote'}\n")
    out = repo.run(DVC, "repro", "prepare@mine")
    assert "Running stage 'fetch_own@mine'" in out and "Running stage 'prepare@mine'" in out
    data = root / "datasets" / "mine" / "data"
    before = _tree_hashes(data)
    assert len(before) == sum(n for per in FOLDER_COUNTS.values() for n in per.values())
    lock = json.loads((root / "datasets" / "mine" / "lock.json").read_text())
    assert lock["counts"] == {d: dict(sorted(c.items())) for d, c in FOLDER_COUNTS.items()}
    photo = (root / "datasets" / "mine" / "lists" / "photo_partial.txt").read_text().splitlines()
    assert len(photo) == FOLDER_COUNTS["photo"]["cat"] + FOLDER_COUNTS["photo"]["dog"]
    assert {"fetch_own@mine", "prepare@mine"} <= set(yaml.safe_load((root / "dvc.lock").read_text())["stages"])
    repo.run(DVC, "push", "fetch_own@mine")
    shutil.rmtree(data)
    shutil.rmtree(root / ".dvc" / "cache")
    repo.run(DVC, "pull", "fetch_own@mine")
    assert _tree_hashes(data) == before
    assert json.loads(repo.run(DVC, "status", "--json", "prepare@mine")) == {}


def _tree_state(root: Path) -> list[tuple]:
    """(path, mode, mtime, size) of every entry under ``root``, the root itself included."""
    return [(p.relative_to(root).as_posix(), p.stat().st_mode, p.stat().st_mtime_ns, p.stat().st_size)
            for p in [root, *sorted(root.rglob("*"))]]


@pytest.mark.slow
@pytest.mark.skipif(DVC is None or shutil.which("git") is None, reason="dvc or git not installed")
@pytest.mark.skipif(not (OFFICE31 / "data").is_dir(), reason="the Office-31 images are not in datasets/office31/data")
def test_a_fresh_clone_with_the_real_office31_linked_is_up_to_date(repo):
    """A fresh clone with the real Office-31 linked into place (as a read-only shared copy is) and fetched: ``dvc
    status`` of its stages is clean for the committed dvc.lock, DVC's cache holds no copy of the images, and the
    linked folder is as it was."""
    shutil.copytree(OFFICE31 / "lists", repo.path / "datasets" / "office31" / "lists")
    shutil.copy2(OFFICE31 / "lock.json", repo.path / "datasets" / "office31" / "lock.json")
    shared = (OFFICE31 / "data").resolve()
    before = _tree_state(shared)
    (repo.path / "datasets" / "office31" / "data").symlink_to(shared, target_is_directory=True)
    assert "office31: ready" in repo.run(sys.executable, "-m", "dmp", "data", "fetch", "office31")
    assert json.loads(repo.run(DVC, "status", "--json", "fetch@office31", "prepare@office31")) == {}
    assert not (repo.path / ".dvc" / "cache").exists()
    assert _tree_state(shared) == before
