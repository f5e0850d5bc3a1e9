"""config/examples/own_images.yaml, the worked suite config for an image dataset of one's own, works as its comments
say: the dataset.yaml written in its comments declares a dataset that `dmp data fetch` accepts, and the suite plans
(and `snakemake -n` lists) the runs its tables ask for, with the backbone it names."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from dmp.data import cli, registry
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config" / "examples" / "own_images.yaml"
CLASSES = ("bird", "cat", "dog")


def _declaration() -> dict:
    """The dataset.yaml the example's comments show (the commented block under its '# ~/lab/...' line)."""
    lines = EXAMPLE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("# ~/lab/datasets/mine/dataset.yaml"))
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("#      ") or not line[7:].strip():
            break
        block.append(line[7:])
    return yaml.safe_load("\n".join(block))


@pytest.fixture
def mine(tmp_path, monkeypatch):
    """The example's dataset declared outside the checkout with a few generated images per class, fetched."""
    decl = _declaration()
    decl["root"] = str(tmp_path / "images")  # the comment's /data/mine
    for d in decl["domains"]:
        for c, cls in enumerate(CLASSES):
            for i in range(3):
                pixels = np.random.default_rng([c, i]).integers(0, 255, (12, 12, 3), dtype=np.uint8)
                path = tmp_path / "images" / d["name"] / cls / f"{i}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(pixels).save(path)
    (tmp_path / "lab" / "mine").mkdir(parents=True)
    (tmp_path / "lab" / "mine" / "dataset.yaml").write_text(yaml.safe_dump(decl))
    monkeypatch.setenv("DMP_DATASETS_DIR", str(tmp_path / "lab"))
    monkeypatch.delenv("DMP_DATA_DIR", raising=False)
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    assert cli.main(parser.parse_args(["data", "fetch", "mine"])) == 0
    return tmp_path


def _expected_train_jobs(cfg: dict) -> int:
    """Counted by hand from the example's tables: vanilla 7 methods x 2 tasks, partial 4 methods x 1 task, the
    ablation's AG and LE runs of its two methods on its task (its G runs are the tables'), x the seeds."""
    tables = cfg["tables"]
    vanilla = len(tables["vanilla"]["methods"]) * len(tables["vanilla"]["datasets"]["mine"]["tasks"])
    partial = len(tables["partial"]["methods"]) * len(tables["partial"]["datasets"]["mine"]["tasks"])
    ablation = tables["manifold_ablation"]
    extra = len(ablation["methods"]) * len(ablation["tasks"]) * (len(ablation["metrics"]) - 1)
    return (vanilla + partial + extra) * len(cfg["seeds"])


def test_the_declaration_in_the_comments_is_the_one_the_config_names():
    decl, cfg = _declaration(), yaml.safe_load(EXAMPLE.read_text())
    assert decl["kind"] == "images" and set(decl["partial_classes"]) <= {"cat", "dog"}
    shorts = {d["short"] for d in decl["domains"]}
    for table in ("vanilla", "partial"):
        for task in cfg["tables"][table]["datasets"]["mine"]["tasks"]:
            assert set(task.split("->")) <= shorts
    assert cfg["train"]["backbone"] == "efficientnet_lite0"
    assert _expected_train_jobs(cfg) == (14 + 4 + 4) * 3  # the arithmetic of the docstring, by hand


def test_the_planner_lists_the_example_runs_with_its_backbone(mine):
    from dmp.suite import Suite

    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["results"] = str(mine / "results")
    suite = Suite(cfg)
    runs = suite.all_runs()
    assert len(runs) == _expected_train_jobs(cfg)
    assert {r.dataset for r in runs} == {"mine"}
    assert all("backbone=efficientnet_lite0" in suite.train_args(r) for r in runs)
    assert registry.get_dataset("mine").classes == CLASSES


@pytest.mark.slow
def test_snakemake_dry_run_of_the_example(mine):
    pytest.importorskip("snakemake")
    cfg = yaml.safe_load(EXAMPLE.read_text())
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "-n", "-p", "all_tables", "--configfile", EXAMPLE,
                           "--config", f"results={mine / 'results'}"], cwd=ROOT, quiet=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = proc.stdout.split("Job stats:")[1]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}
    assert counts["train"] == _expected_train_jobs(cfg) and counts["table"] == 3
    assert proc.stdout.count("backbone=efficientnet_lite0") >= counts["train"]
    assert not (mine / "results").exists()  # a dry run writes nothing
