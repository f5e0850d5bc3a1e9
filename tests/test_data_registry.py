"""The registry API the trainer calls, the bring-your-own-features entries and the shared real features."""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest
from data_fixtures import isolated, shared_copies  # noqa: F401 (fixtures)

from dmp.data import registry, splits


def test_known_datasets_and_facts():
    names = registry.dataset_names()
    assert {"office31", "officehome", "imageclef", "visda2017", "demo", "office_caltech10",
            "mnist_usps"} <= set(names)
    counts = {n: [d.count for d in registry.get_dataset(n).domains] for n in names}
    assert counts["office31"] == [2817, 498, 795]
    assert counts["officehome"] == [2427, 4365, 4439, 4357]
    assert counts["imageclef"] == [600] * 4 and registry.get_dataset("imageclef").images_per_class == 50
    assert counts["visda2017"] == [152397, 55388]
    assert [d.short for d in registry.get_dataset("office31").domains] == ["A", "D", "W"]
    assert [d.short for d in registry.get_dataset("officehome").domains] == ["Ar", "Cl", "Pr", "Rw"]
    assert [d.short for d in registry.get_dataset("visda2017").domains] == ["S", "R"]
    for n in names:
        spec = registry.get_dataset(n)
        assert list(spec.classes) == sorted(set(spec.classes)), n
        for a in spec.archives:
            assert a.urls or a.manual_urls, (n, a.filename)
            assert set(a.domains) <= {d.name for d in spec.domains}
    with pytest.raises(dataclasses.FrozenInstanceError):
        registry.get_dataset("demo").name = "x"


def test_every_image_domain_has_an_archive_source():
    for n in ("office31", "officehome", "imageclef", "visda2017"):
        spec = registry.get_dataset(n)
        assert {d.name for d in spec.domains} <= {d for a in spec.archives for d in a.domains}


def test_unknown_dataset_lists_known_names():
    with pytest.raises(KeyError, match="known datasets: office31, officehome"):
        registry.get_dataset("office-31")
    with pytest.raises(KeyError, match=r"domains: amazon \(A\)"):
        registry.get_dataset("office31").domain("caltech")


def test_data_root_default_and_env(monkeypatch, tmp_path):
    monkeypatch.delenv("DMP_DATA_DIR", raising=False)
    assert registry.data_root(registry.get_dataset("office31")) == registry.PROJECT / "datasets" / "office31" / "data"
    # the package knows no copy outside the repository: every built-in's files are in its own data folder
    assert registry.data_root(registry.get_dataset("mnist_usps")) == registry.dataset_dir("mnist_usps") / "data"
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path))
    assert registry.data_root(registry.get_dataset("office31")) == tmp_path / "office31"
    assert registry.download_dir(registry.get_dataset("office31")) == tmp_path / "downloads" / "office31"


def test_dataset_version_tracks_lists_and_content_not_packaging(isolated):
    v0 = registry.dataset_version(registry.get_dataset("office31"))
    splits.write_list(registry.lists_dir("office31") / "amazon_full.txt", [("amazon/images/mug/a.jpg", 17)])
    v1 = registry.dataset_version(registry.get_dataset("office31"))
    lock = {"archives": {"amazon.tgz": {"sha256": "ab"}}, "counts": {"amazon": {"mug": 1}}}
    registry.write_lock("office31", lock)
    v2 = registry.dataset_version(registry.get_dataset("office31"))
    lock["archives"]["OFFICE31.zip"] = {"sha256": "cd"}  # another packaging of the same content
    registry.write_lock("office31", lock)
    assert registry.dataset_version(registry.get_dataset("office31")) == v2
    registry.write_lock("office31", {**lock, "manifest": {"amazon": "f" * 64}})
    v3 = registry.dataset_version(registry.get_dataset("office31"))
    assert len({v0, v1, v2, v3}) == 4 and all(len(v) == 12 for v in (v0, v1, v2, v3))
    assert v3 == registry.dataset_version(registry.get_dataset("office31"))


def test_no_dataset_depends_on_one_host():
    """Every domain of the four paper datasets has automatic mirrors on at least two hosts; the old
    Transfer-Learning-Library links replaced in May 2023 are gone; Google Drive files are gdown URLs."""
    from urllib.parse import urlsplit

    for name in ("office31", "officehome", "imageclef", "visda2017"):
        spec = registry.get_dataset(name)
        for d in spec.domains:
            hosts = {urlsplit(u).netloc for a in spec.archives if d.name in a.domains for u in a.urls}
            assert len(hosts) >= 2, (name, d.name, hosts)
    urls = [u for n in registry.dataset_names() for a in registry.get_dataset(n).archives for u in a.urls]
    assert not [u for u in urls if any(k in u for k in ("05640442cd904c39ad60", "a069d889628d4b468c32",
                                                          "4c4afebf51384cf1aa95"))]
    drive = {u.split("id=")[1] for u in urls if "drive.google.com" in u}
    assert {"0B4IapRTv9pJ1WGZVd1VDMmhwdlE", "0B81rNlvomiwed0V1YUxQdC1uOTg", "1uY0pj7oFsjMxRwaD3Sxy0jgel0fsYXLC",
            "0B9kJH0-rJ2uRS3JILThaQXJhQlk", "0BwcIeDbwQ0XmdENwQ3R4TUVTMHc", "0BwcIeDbwQ0XmUEVJRjl4Tkd4bTA"} <= drive
    assert all(u.startswith("https://drive.google.com/uc?id=") for u in urls if "google" in u)


def test_archive_keys_are_unique_and_sizes_declared():
    for name in registry.dataset_names():
        spec = registry.get_dataset(name)
        keys = [a.key for a in spec.archives]
        assert len(keys) == len(set(keys)), name
        assert all(a.size for a in spec.archives), name


def _write_user_dataset(root: Path, fmt: str):
    """A user features dataset (two domains, 3 classes) in datasets/<name>/ with files in ``fmt``."""
    rng = np.random.default_rng(0)
    data = root / "data"
    data.mkdir(parents=True)
    doms = []
    for d, n in (("src", 12), ("tgt", 9)):
        x = rng.normal(size=(n, 5)).astype(np.float32)
        y = np.arange(n) % 3 + 1  # 1-based, like MATLAB files
        if fmt == "npz":
            np.savez(data / f"{d}.npz", feats=x, labels=y)
            doms.append(f"  - {{name: {d}, file: {d}.npz, x_key: feats, y_key: labels, count: {n}}}")
        elif fmt == "npy":
            np.save(data / f"{d}.npy", x)
            np.save(data / f"{d}_y.npy", y)
            doms.append(f"  - {{name: {d}, file: {d}.npy, y_key: {d}_y.npy}}")
        else:
            from scipy.io import savemat
            savemat(data / f"{d}.mat", {"fts": x, "labels": y[None, :]})
            doms.append(f"  - {{name: {d}, short: {d[0].upper()}, file: {d}.mat, x_key: fts, y_key: labels}}")
    (root / "dataset.yaml").write_text(
        "kind: features\nclasses: [a, b, c]\npartial_classes: [0, 1]\nlabel_offset: -1\n"
        "domains:\n" + "\n".join(doms) + "\n")


@pytest.mark.parametrize("fmt", ["npz", "npy", "mat"])
def test_bring_your_own_features(isolated, monkeypatch, fmt):
    monkeypatch.delenv("DMP_DATA_DIR")
    _write_user_dataset(registry.DATASETS_DIR / "myfeats", fmt)
    assert "myfeats" in registry.dataset_names()
    spec = registry.get_dataset("myfeats")
    assert spec.kind == "features" and spec.classes == ("a", "b", "c")
    x, y = splits.load_arrays(registry.get_dataset("myfeats"), "src")
    assert x.shape == (12, 5) and x.dtype == np.float32 and y.dtype == np.int64
    assert y.tolist() == [0, 1, 2] * 4
    xp, yp = splits.load_arrays(registry.get_dataset("myfeats"), "tgt", "partial")
    assert set(yp.tolist()) == {0, 1} and len(xp) == 6
    assert len(registry.dataset_version(registry.get_dataset("myfeats"))) == 12
    with pytest.raises(ValueError, match="no image lists"):
        registry.list_file(registry.get_dataset("myfeats"), "src")


def test_features_errors_name_the_file(isolated, monkeypatch):
    monkeypatch.delenv("DMP_DATA_DIR")
    root = registry.DATASETS_DIR / "bad"
    _write_user_dataset(root, "npz")
    np.savez(root / "data" / "src.npz", feats=np.full((2, 5), np.nan, np.float32), labels=np.array([1, 2]))
    with pytest.raises(ValueError, match=r"src\.npz.*NaN"):
        splits.load_arrays(registry.get_dataset("bad"), "src")
    np.savez(root / "data" / "src.npz", feats=np.zeros((2, 5), np.float32), labels=np.array([1, 7]))
    with pytest.raises(ValueError, match=r"src\.npz: labels .* span 0..6, expected 0..2"):
        splits.load_arrays(registry.get_dataset("bad"), "src")
    (root / "data" / "tgt.npz").unlink()
    with pytest.raises(registry.DatasetMissingError, match=r"tgt\.npz"):
        splits.load_arrays(registry.get_dataset("bad"), "tgt")
    (root / "dataset.yaml").write_text("kind: features\nclasses: [a]\n")
    with pytest.raises(ValueError, match="dataset.yaml: missing or malformed key 'domains'"):
        registry.get_dataset("bad")


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_shared_office_caltech10_features(shared_copies):
    root = registry.data_root(registry.get_dataset("office_caltech10"))
    assert _sha(root / "dslr.mat") == "5f7c6211581f846b7b5534429fb62bfb7e490e88aacfc8bee97eb0b0224dbd89"
    for d, n in (("amazon", 958), ("dslr", 157), ("webcam", 295)):
        x, y = splits.load_arrays(registry.get_dataset("office_caltech10"), d)
        assert x.shape == (n, 1024) and (x >= 0).all()
        assert sorted(set(y.tolist())) == list(range(10)) and (np.diff(y) >= 0).all()  # sorted by label


def test_shared_mnist_usps_arrays(shared_copies):
    import h5py

    xs, ys = splits.load_arrays(registry.get_dataset("mnist_usps"), "mnist")
    xt, yt = splits.load_arrays(registry.get_dataset("mnist_usps"), "usps", "n10")
    assert xs.shape == (2000, 1, 16, 16) and xt.shape == (100, 1, 16, 16)
    assert np.bincount(yt).tolist() == [10] * 10 and ys.min() == 0 and ys.max() == 9
    with h5py.File(registry.data_root(registry.get_dataset("mnist_usps")) / "MNIST_vs_USPS.mat", "r") as f:
        row = np.asarray(f["Xs"])[0]
        assert np.allclose(xs[0, 0], row.reshape(16, 16).T) and ys[0] == int(np.asarray(f["Ys"])[0, 0]) - 1


def test_a_broken_declaration_breaks_only_its_own_dataset(isolated, monkeypatch, capsys):
    """Declarations load lazily: a broken ``dataset.yaml`` is named, with its one-line reason, when that dataset is
    used and in ``data list``; every other command (the demo's config, another user dataset) works."""
    from dmp.cli import main
    from dmp.config import resolve
    from dmp.data.inputs import build_task

    monkeypatch.delenv("DMP_DATA_DIR")
    _write_user_dataset(registry.DATASETS_DIR / "myfeats", "npz")
    bad_yaml, bad_keys = registry.DATASETS_DIR / "badyaml" / "dataset.yaml", registry.DATASETS_DIR / "badkeys"
    bad_yaml.parent.mkdir(parents=True)
    bad_yaml.write_text("kind: features\nclasses: [a, b\n")  # unclosed flow sequence
    bad_keys.mkdir()
    (bad_keys / "dataset.yaml").write_text("kind: features\nclasses: [a]\n")  # no domains
    builtin = registry.DATASETS_DIR / "demo"
    builtin.mkdir()
    (builtin / "dataset.yaml").write_text("kind: features\nclasses: [a]\ndomains: [{name: x, file: x.npz}]\n")

    for name, where in (("badyaml", bad_yaml), ("badkeys", bad_keys / "dataset.yaml")):
        with pytest.raises(ValueError) as err:
            registry.get_dataset(name)
        assert str(where) in str(err.value) and "\n" not in str(err.value) and len(str(err.value)) <= 300
    with pytest.raises(ValueError, match="'demo' is already built in"):
        registry.get_dataset("demo")
    (builtin / "dataset.yaml").unlink()

    x = build_task(resolve({"dataset": "myfeats", "source": "src", "target": "tgt"}))
    assert len(x.source_train) == 12
    with pytest.raises(SystemExit) as code:
        main(["config", "dataset=demo", "source=solid", "target=outline"])
    assert code.value.code == 0
    with pytest.raises(SystemExit) as code:
        main(["data", "list"])
    out = capsys.readouterr().out
    assert code.value.code == 0 and "myfeats" in out and "office31" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("badkeys"))
    assert "BROKEN" in line and "missing or malformed key 'domains'" in line
    assert "BROKEN" in next(ln for ln in out.splitlines() if ln.startswith("badyaml"))
    with pytest.raises(SystemExit) as code:
        main(["config", "dataset=badyaml", "source=a", "target=b"])
    err = capsys.readouterr().err
    assert code.value.code == 2 and err.startswith(f"error: {bad_yaml}") and err.count("\n") == 1


def _committed(pattern: str):
    return sorted((registry.PROJECT / "datasets").glob(pattern))


def test_committed_locks_lists_and_declarations_agree_with_the_registry():
    """A committed lock file, full list or declaration whose counts differ from the registry's declared per-domain
    and per-class counts would refuse every real copy of the dataset (the stray Office-Home lock, written from a
    test archive of one image per class, did)."""
    import json

    from dmp.data.verify import check_counts, per_class

    for path in _committed("*/lock.json"):
        spec = registry.get_dataset(path.parent.name)
        lock = json.loads(path.read_text())
        counts = lock.get("counts", {})
        assert set(counts) <= {d.name for d in spec.domains}, path
        for d, per in counts.items():
            assert list(per) == list(spec.classes), f"{path}: the classes of domain {d} are not the registry's"
        check_counts(spec, counts)  # raises naming every domain and class that differs
        assert set(lock.get("manifest", {})) <= set(counts), path
    for path in _committed("*/lists/*_full.txt"):
        spec = registry.get_dataset(path.parent.parent.name)
        domain = path.name[: -len("_full.txt")]
        check_counts(spec, {domain: per_class(spec, registry.read_list(path, len(spec.classes)))})
    for path in _committed("*/source.json"):
        spec = registry.get_dataset(path.parent.name)
        doc = json.loads(path.read_text())
        assert doc["classes"] == list(spec.classes), path
        assert [(d["name"], d["count"], d["class_counts"]) for d in doc["domains"]] == [
            (d.name, d.count, list(d.class_counts) if d.class_counts else None) for d in spec.domains], path


def test_the_lock_check_fails_on_a_lock_of_a_test_archive(tmp_path):
    """The check above is able to fail: the counts of the stray lock (one image per Office-Home class)."""
    from dmp.data.verify import check_counts

    spec = registry.get_dataset("officehome")
    with pytest.raises(ValueError, match=r"Art \(domain 'Art'\): 65 images, expected 2,427"):
        check_counts(spec, {"Art": dict.fromkeys(spec.classes, 1)})


def _demo_copy(isolated):
    """The checkout's committed demo declaration and lists, copied into the temporary datasets/."""
    import shutil

    shutil.copytree(registry.PROJECT / "datasets" / "demo", registry.dataset_dir("demo"),
                    ignore=shutil.ignore_patterns("data", "downloads", ".*"))


def test_a_runs_version_covers_only_the_lists_it_reads(isolated):
    """``data prepare demo --splits n20`` changes the dataset's version but no run's: neither the version a run
    records (its two lists) nor the signature Snakemake reruns a job on."""
    import yaml

    from dmp import suite as suite_lib

    _demo_copy(isolated)
    run_lists = [("solid", "full"), ("outline", "n10")]
    suite = suite_lib.Suite(yaml.safe_load((registry.PROJECT / "config" / "demo.yaml").read_text()))
    runs = suite.all_runs()
    suite_lib._data_version.cache_clear()
    before = ({r: suite.signature(r) for r in runs}, registry.dataset_version(registry.get_dataset("demo")),
              registry.dataset_version(registry.get_dataset("demo"), run_lists))
    splits.prepare("demo", ["n20"])
    assert registry.list_file(registry.get_dataset("demo"), "solid", "n20").is_file()
    suite_lib._data_version.cache_clear()
    after = ({r: suite.signature(r) for r in runs}, registry.dataset_version(registry.get_dataset("demo")),
             registry.dataset_version(registry.get_dataset("demo"), run_lists))
    assert runs and after[0] == before[0]  # nothing retrains
    assert after[2] == before[2] and after[1] != before[1]
    # a list the run reads does change its version and its signature
    path = registry.list_file(registry.get_dataset("demo"), "outline", "n10")
    path.write_text(path.read_text().replace(" 3\n", " 4\n", 1))
    suite_lib._data_version.cache_clear()
    assert registry.dataset_version(registry.get_dataset("demo"), run_lists) != before[2]
    changed = [r for r in runs if suite.signature(r) != before[0][r]]
    assert changed and all("outline" in suite.run_config(r).values() for r in changed)


def _black_png(path):
    from PIL import Image

    Image.new("RGB", (32, 32)).save(path)


def test_images_replaced_in_place_change_the_version_and_fail_verify(isolated):
    """All source PNGs of a demo domain replaced by black images (same names, same counts): ``data verify`` says
    which, and the version a run (or a resume) sees changes, so the trainer refuses to resume under the old one."""
    from dmp.config import resolve
    from dmp.data import verify
    from dmp.data.demo import generate
    from dmp.data.inputs import build_task

    _demo_copy(isolated)
    root = generate(registry.data_root(registry.get_dataset("demo")), progress=False)
    verify.verify("demo", progress=False)
    cfg = resolve({"dataset": "demo", "source": "solid", "target": "outline"})
    version = build_task(cfg).dataset_version
    assert version == build_task(cfg).dataset_version  # stable (file hashes cached beside the data root)
    assert (root.parent / f".{root.name}.digests.json").is_file()
    other = build_task(resolve({"dataset": "demo", "source": "noisy", "target": "blurry"})).dataset_version
    for png in sorted((root / "solid").rglob("*.png")):
        _black_png(png)
    with pytest.raises(ValueError, match=r"solid/images/arrow/arrow_0000\.png and 299 other image\(s\) differ from "
                                         r"what the demo generator draws"):
        verify.verify("demo", progress=False)
    assert build_task(cfg).dataset_version != version
    assert build_task(resolve({"dataset": "demo", "source": "noisy", "target": "blurry"})).dataset_version == other


def test_verify_compares_the_locked_manifest_without_decoding(isolated, tmp_path):
    """A fetched dataset: one image rewritten in place with other bytes is found by ``data verify`` (the lock's
    manifest), not only by ``--verify-images``."""
    import shutil

    from data_fixtures import DEAD, build_packaging, small_spec

    from dmp.data import fetch, verify

    isolated.use(small_spec("office31", 2, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "wjdcloud", tmp_path / "build", 2)
    registry.download_dir(registry.get_dataset("office31")).mkdir(parents=True)
    shutil.copy(arc, registry.download_dir(registry.get_dataset("office31")))
    root = fetch.fetch("office31", progress=False)
    verify.verify("office31", progress=False)
    _black_png(next((root / "dslr").rglob("*.jpg")))
    with pytest.raises(ValueError, match=r"dslr/images \(domain 'dslr'\) differ from the version locked"):
        verify.verify("office31", progress=False)
    with pytest.raises(fetch.FetchError, match=r"dslr/images \(domain 'dslr'\) differ from the version locked"):
        fetch.fetch("office31", progress=False)  # a fetch over data in place verifies it the same way


@pytest.mark.slow
def test_resume_on_images_replaced_in_place_is_refused(isolated, tmp_path):
    """The whole path: a demo run stopped at its first checkpoint, the source PNGs then replaced by black images of
    the same names: the resume is refused (dataset version) instead of finishing under the old version."""
    from dmp.config import ConfigError
    from dmp.data.demo import generate
    from dmp.train import train

    _demo_copy(isolated)
    root = generate(registry.data_root(registry.get_dataset("demo")), progress=False)
    cfg = dict(dataset="demo", source="solid", target="outline", backbone="smallcnn", pretrained=False,
               bottleneck_dims=[32, 16], batch_size=8, iterations=4, checkpoint_every=2, log_every=2,
               eval_batch_size=64, threads=1, intra_start=2)
    assert train(cfg, tmp_path / "run", progress=False, stop_after=2) is None
    for png in sorted((root / "solid").rglob("*.png")):
        _black_png(png)
    with pytest.raises(ConfigError, match="dataset version"):
        train(cfg, tmp_path / "run", progress=False)
