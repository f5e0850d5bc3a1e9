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
    return _cfg(resize=24, crop=20, input_cache=True), *cache.cache_paths(registry.get_dataset("demo"), "solid", 24)


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


# ----------------------------------------------------------------------------------------------- what lists name
def _lists_dataset(user):
    from test_data_user_images import LISTS_YAML, make_lists
    user.declare("dn", LISTS_YAML, make_lists)
    return user.path / "data" / "dn"


def _append(path: Path, text: str) -> None:
    path.write_bytes(path.read_bytes() + text.encode("latin-1"))


@pytest.mark.parametrize("line, message", [
    ("clipart/./aircraft_carrier/clipart_0_0.jpg 0\n", r"clipart_train\.txt:\d+: .*listed again"),
    ("clipart/../../dn/clipart/zebra/clipart_2_0.jpg 2\n", r"clipart_train\.txt:\d+: .*outside the data root"),
    ("{tmp}/elsewhere/aircraft_carrier/clipart_0_0.jpg 0\n", r"clipart_train\.txt:\d+: .*outside the data root"),
    ("clipart/zebra/caf\xe9.jpg 2\n", r"clipart_train\.txt:\d+: not UTF-8"),
])
def test_a_list_entry_that_names_an_image_twice_or_outside_the_data_root_is_refused_naming_the_line(
        user, capsys, line, message):
    import re
    root = _lists_dataset(user)
    _append(root / "clipart_train.txt", line.replace("{tmp}", str(user.path)))
    err = _error(capsys, "fetch", "dn")
    assert re.search(message, err), err
    assert not (user.declarations / "dn" / "lock.json").exists()


def test_an_image_in_both_a_train_and_a_test_list_is_refused_at_the_fetch(user, capsys):
    root = _lists_dataset(user)
    first = (root / "clipart_test.txt").read_text().splitlines()[0]
    _append(root / "clipart_train.txt", first + "\n")
    err = _error(capsys, "fetch", "dn")
    assert "clipart_train.txt" in err and "clipart_test.txt" in err and first.split()[0] in err
    assert not (user.declarations / "dn" / "lock.json").exists()


def test_a_symlinked_sub_folder_of_a_class_folder_is_read(user):
    user.declare("folders", FOLDERS_YAML, make_folders)
    root = user.path / "data" / "folders"
    make_folders(user.path / "elsewhere", {"more": {"x": 4}})
    (root / "sketch" / "cat" / "linked").symlink_to(user.path / "elsewhere" / "more" / "x", target_is_directory=True)
    assert _data("fetch", "folders") == 0
    listed = registry.read_list(registry.list_file(registry.get_dataset("folders"), "sketch"))
    assert sum(rel.startswith("sketch/cat/") for rel, _ in listed) == 3 + 4


def test_a_file_name_a_list_line_cannot_hold_is_refused_naming_it(user, capsys):
    user.declare("folders", FOLDERS_YAML, make_folders)
    root = user.path / "data" / "folders"
    (root / "sketch" / "cat" / "0.png").rename(root / "sketch" / "cat" / "a\nb.png")
    err = _error(capsys, "fetch", "folders")
    assert "sketch/cat" in err and "'a\\nb.png'" in err
    assert not (user.declarations / "folders" / "lock.json").exists()


def test_a_huge_label_in_a_list_without_classes_is_refused_before_any_allocation(user, capsys):
    root = _lists_dataset(user)
    _append(root / "clipart_train.txt", "clipart/zebra/clipart_2_0.jpg 3000000000\n")
    err = _error(capsys, "fetch", "dn")
    assert "label 3 has no image in the lists" in err and "3000000000" in err
    assert _data("list") == 0 and "dn                 BROKEN" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("field, value", [
    ("iteration", -5), ("iteration", 21), ("iteration", 3.5), ("threads", 0), ("threads", "2"), ("config", [1, 2]),
    ("provenance", "abc"), ("train_seconds", float("nan")), ("dataset_version", 7), ("accuracy_log", [[1]]),
])
def test_a_tampered_checkpoint_field_is_refused_naming_the_file_and_the_field(tmp_path, field, value):
    import torch
    from synthetic import shift_task, small_cfg

    from dmp.train import train
    from dmp.train.checkpoint import CheckpointError

    cfg = small_cfg(iterations=20, intra_start=5)
    assert train(cfg, tmp_path, task=shift_task(), progress=False, stop_after=10) is None
    path = tmp_path / "checkpoint.pt"
    state = torch.load(path, weights_only=True)
    torch.save({**state, field: value}, path)
    with pytest.raises(CheckpointError) as exc:
        train(cfg, tmp_path, task=shift_task(), progress=False)
    assert str(path) in str(exc.value) and f"'{field}'" in str(exc.value)
    assert not (tmp_path / "metrics.json").exists()


# ----------------------------------------------------------------------------------------------- declaration values
@pytest.mark.parametrize("extra, message", [
    ('cache: "false"\n', r"key 'cache' must be true or false, got 'false'"),
    ("cache: 'no'\n", r"key 'cache' must be true or false, got 'no'"),
    ("meta: [1, 2]\n", r"key 'meta' must be a mapping"),
    ("splits: [full, bogus]\n", r"key 'splits': 'bogus' is no split"),
])
def test_a_declaration_value_of_the_wrong_kind_is_refused_before_the_fetch_writes_anything(user, capsys, extra,
                                                                                         message):
    import re
    folder = user.declare("folders", FOLDERS_YAML + extra, make_folders)
    err = _error(capsys, "fetch", "folders")
    assert re.search(message, err) and "dataset.yaml" in err, err
    assert not (folder / "lock.json").exists() and not (folder / "lists").exists()


def test_cache_false_and_true_are_read_as_booleans(user):
    user.declare("off", FOLDERS_YAML + "cache: false\n")
    user.declare("on", FOLDERS_YAML + "cache: yes\n")
    assert registry.get_dataset("off", classes_from_data=False).cache_images is False
    assert registry.get_dataset("on", classes_from_data=False).cache_images is True


# ----------------------------------------------------------------------------------------------- GPU slots
@pytest.mark.parametrize("slots, message", [
    ("99999999999999999999", "at most 1024 GPUs"), ("1025", "at most 1024 GPUs"), ("\u00b2", "an integer >= 0"),
])
def test_a_gpu_slot_count_that_is_no_small_integer_is_refused_before_any_list_is_built(slots, message):
    from dmp.train.devices import GpuSlotError, slot_devices

    with pytest.raises(GpuSlotError, match=message):
        slot_devices({"DMP_GPU_SLOTS": slots})


def test_mig_device_names_get_lock_files_and_a_lock_folder_that_is_a_file_is_named(tmp_path):
    from dmp.train.devices import GpuSlotError, gpu_slot

    env = {"DMP_GPU_SLOTS": "2", "CUDA_VISIBLE_DEVICES": "MIG-GPU-ab/1/0,MIG-GPU-ab/2/0",
           "DMP_GPU_LOCK_DIR": str(tmp_path / "locks")}
    with gpu_slot(env, poll=0.01) as got:
        assert got == {"slot": 0, "device": "MIG-GPU-ab/1/0"} and env["CUDA_VISIBLE_DEVICES"] == "MIG-GPU-ab/1/0"
    assert [p.name for p in (tmp_path / "locks").iterdir()] == ["gpuMIG-GPU-ab_1_0.lock"]
    (tmp_path / "file").write_text("")
    with pytest.raises(GpuSlotError, match=f"DMP_GPU_LOCK_DIR: cannot use {tmp_path / 'file'}"):
        with gpu_slot({**env, "DMP_GPU_LOCK_DIR": str(tmp_path / "file")}):
            pass


# ----------------------------------------------------------------------------------------------- sizes and images
def test_an_input_cache_size_beyond_the_bound_is_refused_before_any_decoding(isolated, capsys):
    from test_input_cache import _demo

    from dmp.cli import main as dmp_main
    _demo(isolated, odd_sizes=False)
    with pytest.raises(SystemExit):
        dmp_main(["data", "cache", "demo", "--resize", "100000", "--domains", "solid"])
    assert "--resize 100000: a size is a number of pixels in 1..4096" in capsys.readouterr().err
    assert not (isolated.path / "data" / ".demo.cache").exists()


def test_an_image_too_large_to_decode_is_an_error_naming_it(user, monkeypatch):
    from PIL import Image
    user.declare("folders", FOLDERS_YAML, make_folders)
    assert _data("fetch", "folders") == 0
    task = _task("folders")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 20)  # the 14 x 14 images are now beyond twice PIL's bound
    with pytest.raises(ValueError, match=r"unreadable image .*sketch/The_Eiffel_Tower/0\.png: too large to decode"):
        task.source_train[(0, 1)]
