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


# ----------------------------------------------------------------------------------------------- silently wrong
def _task(name, **extra):
    from test_data_user_images import TRAIN

    from dmp.config import resolve
    from dmp.data.inputs import build_task
    return build_task(resolve({"dataset": name, "source": "sketch", "target": "photo", **TRAIN, **extra}))


def test_reordered_classes_after_the_fetch_are_refused_until_the_lists_are_prepared_again(user):
    listed = FOLDERS_YAML.replace("partial_classes: [cat, dog]", "classes: [cat, dog, The_Eiffel_Tower]")
    folder = user.declare("folders", listed, make_folders)
    assert _data("fetch", "folders") == 0
    version = _task("folders").dataset_version
    (folder / "dataset.yaml").write_text(listed.replace("[cat, dog, The_Eiffel_Tower]", "[dog, cat, The_Eiffel_Tower]"))
    with pytest.raises(ValueError, match=r"sketch_full.txt.*classes.*dmp data prepare folders"):
        _task("folders")
    assert _data("prepare", "folders") == 0
    task = _task("folders")
    assert task.classes == ["dog", "cat", "The_Eiffel_Tower"] and task.dataset_version != version
    # dog (5 images in sketch) is label 0 now: the names follow the images
    assert task.source_train.labels.bincount().tolist() == [5, 3, 2]


def test_a_class_folder_added_after_the_fetch_is_refused_naming_the_lock(user):
    user.declare("folders", FOLDERS_YAML, make_folders)
    assert _data("fetch", "folders") == 0
    make_folders(user.path / "data" / "folders", {"sketch": {"bird": 2}, "photo": {"bird": 2}})  # sorts first
    with pytest.raises(ValueError, match=r"lock\.json \(new class\(es\) bird,"):
        _task("folders")
    make_folders(user.path / "data" / "folders", {"sketch": {"zebra": 2}, "photo": {"zebra": 2}})  # and last
    with pytest.raises(ValueError, match=r"lock\.json"):
        _task("folders")


def test_a_table_never_prints_a_run_of_data_replaced_since_and_the_suite_retrains_it(user):
    """Images overwritten in place after training (or a dataset_version edited by hand): the table names the run and
    why instead of printing it, and the train rule's stale mark makes Snakemake retrain it; with the data restored
    the run is printed again and the mark is gone (a later train job would otherwise clear the folder)."""
    from test_data_user_images import TRAIN

    from dmp.cli import main as dmp_main
    from dmp.suite import STALE_MARK, Suite
    from dmp.tables.cli import build

    user.declare("folders", FOLDERS_YAML, make_folders)
    assert _data("fetch", "folders") == 0
    results = user.path / "results"
    cfg = {"results": str(results), "seeds": [0], "train": dict(TRAIN),
           "tables": {"vanilla": {"methods": ["source_only"], "metric": "G", "datasets": {"folders": {"tasks": ["S->P"]}}}}}
    (run,) = Suite(cfg).table_runs("vanilla")
    with pytest.raises(SystemExit) as exc:
        dmp_main(["train", "--quiet", "--out", run.folder(str(results)), *Suite(cfg).train_args(run), "threads=1"])
    assert exc.value.code in (0, None)
    metrics_path = Path(run.metrics_path(str(results)))

    def table():
        build(cfg, "vanilla", results=str(results))
        return (results / "tables" / "vanilla.md").read_text()
    assert "Not used" not in table() and not Suite(cfg).stale_marks(run)
    image = user.path / "data" / "folders" / "photo" / "cat" / "0.png"
    original = image.read_bytes()
    make_folders(user.path / "other", {"photo": {"a": 1, "b": 1}})  # another image, written over this one in place
    image.write_bytes((user.path / "other" / "photo" / "b" / "0.png").read_bytes())
    assert image.read_bytes() != original
    text = table()
    assert "Not used: " in text and "trained on dataset version" in text and "the data in place is version" in text
    (mark,) = Suite(cfg).stale_marks(run)
    assert "the data in place is version" in Path(mark).read_text()
    image.write_bytes(original)  # the data restored (dvc pull): the run is its own result again
    assert "Not used" not in table() and not Suite(cfg).stale_marks(run) and not Path(mark).exists()
    metrics = json.loads(metrics_path.read_text())
    metrics_path.write_text(json.dumps({**metrics, "dataset_version": "0123456789ab"}))  # edited by hand
    assert "trained on dataset version 0123456789ab" in table()
    assert not list(results.rglob(STALE_MARK))


# ----------------------------------------------------------------------------------------------- the input cache
def _cached_demo(isolated):
    from test_input_cache import _cfg, _demo

    from dmp.data import cache
    _demo(isolated, odd_sizes=False)
    for d in ("solid", "outline"):
        cache.build("demo", d, 24, progress=False)
    return _cfg(resize=24, crop=20, input_cache=True), *cache.cache_paths("demo", "solid", 24)


def _zero_pixels(npy):
    import numpy as np
    arr = np.load(npy, mmap_mode="r+")
    arr[1] = 0
    arr.flush()


def _swap_paths(index):
    meta = json.loads(index.read_text())
    meta["paths"][0], meta["paths"][1] = meta["paths"][1], meta["paths"][0]
    index.write_text(json.dumps(meta))


def _truncate(npy):
    data = npy.read_bytes()
    npy.write_bytes(data[: len(data) - 1000])


@pytest.mark.parametrize("damage", [_zero_pixels, _swap_paths, _truncate])
def test_a_damaged_input_cache_is_refused_naming_it_and_rebuilt(isolated, damage):
    import numpy as np

    from dmp.data import cache
    from dmp.data.inputs import build_task

    cfg, npy, index = _cached_demo(isolated)
    before = np.load(npy).copy()
    damage(npy if damage is not _swap_paths else index)
    with pytest.raises(ValueError, match="rebuild it with") as exc:
        build_task(cfg)
    assert str(npy if damage is not _swap_paths else index) in str(exc.value)
    assert cache.build("demo", "solid", 24, progress=False) == index  # rebuilt, not taken as up to date
    assert np.array_equal(np.load(npy), before)
    build_task(cfg)


def test_a_rebuild_removes_the_temporary_file_a_killed_build_left(isolated):
    from dmp.data import cache

    cfg, npy, index = _cached_demo(isolated)
    left = npy.with_name(f".{npy.name}.0123456789abcdef.tmp.npy")  # what atomic_write leaves on a kill -9
    left.write_bytes(b"\0" * 4096)
    npy.unlink()
    cache.build("demo", "solid", 24, progress=False)
    assert npy.is_file() and not left.exists()
