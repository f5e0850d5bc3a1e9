"""Reliability of the user-facing surfaces: user dataset declarations, ``data declare``, the input cache,
checkpoints, ``suite prepare`` and tables of data that changed. Each test is one way a careless or hostile user
could lose data or get a silently wrong number; each checks the refusal (one line naming the file or key) and
that nothing outside the dataset was written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)
from test_data_user_images import FOLDERS_YAML, _data, _error, make_folders, user  # noqa: F401 (fixture)

from dmp.data import registry


# ----------------------------------------------------------------------------------------------- data loss
@pytest.mark.parametrize("name", ["../../../victim", "a/b", "/abs", "..", ".hidden", "x y"])
def test_a_domain_name_that_is_not_a_plain_name_is_refused_before_anything_is_written(user, capsys, name):
    victim = user.path / "victim_full.txt"
    victim.write_text("precious\n")
    user.declare("ub1", FOLDERS_YAML.replace("{name: sketch, short: S}",
                                             f"{{name: {json.dumps(name)}, short: S, folder: sketch}}"), make_folders)
    err = _error(capsys, "prepare", "ub1")
    assert "domains[0].name" in err and "dataset.yaml" in err
    assert victim.read_text() == "precious\n"
    assert [p.name for p in user.path.rglob("*_full.txt")] == ["victim_full.txt"]


def test_declare_refuses_a_dataset_declared_outside_the_checkout_and_writes_nothing_there(user, capsys):
    folder = user.declare("extds", FOLDERS_YAML, make_folders)
    (folder / "source.json").write_text('{"mine": 1}\n')
    err = _error(capsys, "declare", "extds")
    assert "extds" in err and "outside this checkout" in err
    assert (folder / "source.json").read_text() == '{"mine": 1}\n' and not (folder / "splits.json").exists()
    assert not (registry.DATASETS_DIR / "dvc_stages.yaml").exists()  # refused before any write


def _finished_run(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True)
    files = {"checkpoint.pt": "weights", "metrics.json": '{"accuracy": 91.4}', "log.csv": "it,loss\n",
             "features.npz": "feats", "suite_signature.txt": "0123456789abcdef\n"}
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


@pytest.mark.parametrize("signature", ["abc", "fedcba9876543210"])
def test_suite_prepare_never_deletes_a_finished_run(tmp_path, capsys, signature):
    from dmp.cli import main as dmp_main

    run = tmp_path / "run"
    files = _finished_run(run)
    with pytest.raises(SystemExit) as exc:
        dmp_main(["suite", "prepare", str(run), signature])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    assert ("signature" in err) if signature == "abc" else (str(run / "metrics.json") in err)
    assert {p.name: p.read_text() for p in run.iterdir() if p.name in files} == files


def test_suite_prepare_still_drops_the_checkpoint_of_an_unfinished_run_of_another_signature(tmp_path):
    from dmp.suite import prepare

    run = tmp_path / "run"
    _finished_run(run)
    (run / "metrics.json").unlink()  # what Snakemake does before it reruns a job whose signature changed
    assert prepare(run, "fedcba9876543210") is True
    assert sorted(p.name for p in run.iterdir() if not p.name.startswith(".")) == ["suite_signature.txt"]
