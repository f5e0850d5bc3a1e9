"""Fetching through the real code, offline: every packaging of Office-31, Office-Home, ImageCLEF-DA and VisDA-2017
in its real layout, from the registry's real mirror URLs (a loopback proxy stands in for the hosts, Google Drive
included, through gdown) and from hand-placed archives, gives the same lists; dead mirrors, resumed downloads,
deadlines, size limits, checksums, content checks against the lock, errors naming archive members, stale
staging folders. Nothing partial may remain after a failure."""
from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
import urllib.parse

import numpy as np
import pytest
from data_fixtures import (DEAD, PACKAGINGS, build_packaging, internet, isolated, server,  # noqa: F401
                           shared_copies, small_spec, write_archive)

from dmp.data import cli, fetch, registry, splits, verify
from dmp.data.registry import FetchError

PER_CLASS = 2


def _drive_id(url: str) -> str | None:
    p = urllib.parse.urlsplit(url)
    return urllib.parse.parse_qs(p.query)["id"][0] if p.netloc == "drive.google.com" else None


def _publish(net, url: str, path) -> None:
    fid = _drive_id(url)
    if fid:
        net.drive[fid] = (path.read_bytes(), path.name, False)
    else:
        net.files[net.key(url)] = path.read_bytes()


def _kill(net, url: str) -> None:
    fid = _drive_id(url)
    if fid:
        net.drive[fid] = (b"", "", True)  # Drive's "too many users" page
    else:
        net.status[net.key(url)] = 404


def _reset(name: str) -> None:
    """A fresh machine: no data, downloads, lists or lock."""
    spec = registry.get_dataset(name)
    for p in (registry.data_root(spec), registry.download_dir(spec), registry.lists_dir(name)):
        shutil.rmtree(p, ignore_errors=True)
    registry.lock_path(name).unlink(missing_ok=True)


def _result(name: str):
    splits.prepare(name, ["full", "partial"])
    lock = registry.read_lock(name)
    return ({p.name: p.read_text() for p in sorted(registry.lists_dir(name).glob("*.txt"))},
            lock["counts"], lock["manifest"])


def _nothing_partial(name):
    """No staging folder, no data root (the fetch failed)."""
    root = registry.data_root(registry.get_dataset(name))
    leftovers = [p for p in root.parent.glob(f".{root.name}.staging-*")] if root.parent.exists() else []
    assert leftovers == []
    assert not root.exists()


@pytest.mark.parametrize("name", list(PACKAGINGS))
def test_every_packaging_from_mirrors_and_by_hand_gives_the_same_lists(internet, isolated, tmp_path, name):
    spec = isolated.use(small_spec(name, PER_CLASS))  # the registry's real archives and mirror URLs, scaled
    results = {}
    for packaging in PACKAGINGS[name]:
        arcs = build_packaging(name, packaging, tmp_path / packaging, PER_CLASS)
        # from the mirrors: each archive only at its last mirror, the earlier ones dead (404 or Drive's quota page)
        _reset(name)
        internet.files.clear(), internet.drive.clear(), internet.status.clear()
        for arc in arcs:
            archive = next(a for a in spec.archives if a.filename == arc.name)
            *dead, alive = archive.urls
            _publish(internet, alive, arc)
            for url in dead:
                _kill(internet, url)
        root = fetch.fetch(name, progress=False, verify_images=True)
        lock = registry.read_lock(name)
        for arc in arcs:
            archive = next(a for a in spec.archives if a.filename == arc.name)
            assert lock["archives"][archive.key]["mirror"] == archive.urls[-1]
            assert lock["archives"][archive.key]["sha256"] == fetch.sha256_file(arc)
        assert set(lock["source"]) == {d.name for d in spec.domains}
        assert not list(root.parent.glob(f".{root.name}.staging-*"))
        results[packaging, "mirrors"] = _result(name)
        # by hand, offline: the archives in the downloads folder (any proxy leads nowhere)
        _reset(name)
        internet.files.clear(), internet.drive.clear()
        for arc in arcs:
            shutil.copy(arc, registry.download_dir(registry.get_dataset(name)).mkdir(parents=True, exist_ok=True)
                        or registry.download_dir(registry.get_dataset(name)) / arc.name)
        fetch.fetch(name, progress=False)
        results[packaging, "by hand"] = _result(name)
    first = next(iter(results.values()))
    assert all(r == first for r in results.values()), sorted(results)
    lists, counts, manifest = first
    assert set(manifest) == set(counts) == {d.name for d in spec.domains}
    full = splits.read_list(registry.list_file(registry.get_dataset(name), spec.domains[0].name))
    assert len(full) == PER_CLASS * len(spec.classes)
    if name == "officehome":  # "Real World" / "RealWorld" are installed under the registry's name
        assert (registry.data_root(registry.get_dataset(name)) / "Real_World").is_dir()
    if name == "imageclef":  # the published lists: CRLF, class sub-folders that do not exist, p duplicates kept
        assert (registry.data_root(registry.get_dataset(name)) / "list" / "cList.txt").read_bytes().count(b"\r\n") == 24
        p = splits.read_list(registry.list_file(registry.get_dataset(name), "p"))
        assert len(p) == 24 and len({path for path, _ in p}) == 22
        c = splits.read_list(registry.list_file(registry.get_dataset(name), "c"))
        assert all(path.count("/") == 1 for path, _ in c)


def test_google_drive_through_gdown_confirmation_and_quota(internet, isolated, tmp_path):
    """ImageCLEF's thuml Drive file: redirect, virus-scan form, then the file; a quota page is a failed mirror."""
    spec = isolated.use(small_spec("imageclef", PER_CLASS))
    (arc,) = build_packaging("imageclef", "original", tmp_path, PER_CLASS)
    wjd, drive = spec.archives[0].urls
    _kill(internet, drive)
    _kill(internet, wjd)
    with pytest.raises(FetchError) as err:
        fetch.fetch("imageclef", progress=False, retries=1)
    assert "Too many users" in str(err.value) and "404" in str(err.value)
    _nothing_partial("imageclef")
    _publish(internet, drive, arc)
    fetch.fetch("imageclef", progress=False)
    hosts = [urllib.parse.urlsplit(u).netloc for u, _ in internet.requests[-3:]]
    assert hosts == ["drive.google.com", "drive.usercontent.google.com", "drive.usercontent.google.com"]
    assert "confirm=t" in internet.requests[-1][0] and "uuid=" in internet.requests[-1][0]
    assert registry.read_lock("imageclef")["archives"]["image_CLEF.zip"]["mirror"] == drive


def _serve(server, isolated, tmp_path, name, packaging="original", **kw):
    """Build ``packaging`` of ``name``, serve it at /ok/<file> with a dead first mirror /dead/<file>."""
    arcs = build_packaging(name, packaging, tmp_path / "build", PER_CLASS, **kw)
    for arc in arcs:
        server.files[server.url(f"/ok/{arc.name}")] = arc.read_bytes()
    spec = isolated.use(small_spec(name, PER_CLASS, lambda a: [server.url(f"/dead/{a.filename}"),
                                                               server.url(f"/ok/{a.filename}")]))
    return spec, arcs


def test_second_fetch_from_another_packaging_is_verified_by_content(server, isolated, tmp_path):
    _serve(server, isolated, tmp_path, "office31", "original")
    fetch.fetch("office31", progress=False)
    splits.prepare("office31")
    lock = registry.read_lock("office31")
    assert lock["source"] == dict.fromkeys(("amazon", "dslr", "webcam"), "domain_adaptation_images.tar.gz")
    version = registry.dataset_version(registry.get_dataset("office31"))
    # a fresh clone (lists and lock committed) gets OFFICE31.zip instead: other bytes, the same content
    shutil.rmtree(registry.data_root(registry.get_dataset("office31")))
    shutil.rmtree(registry.download_dir(registry.get_dataset("office31")))
    server.files.clear()
    (zipped,) = build_packaging("office31", "wjdcloud", tmp_path / "zip", PER_CLASS)
    server.files[server.url("/ok/OFFICE31.zip")] = zipped.read_bytes()
    fetch.fetch("office31", progress=False)
    again = registry.read_lock("office31")
    assert again["source"] == lock["source"] and again["manifest"] == lock["manifest"]
    assert set(again["archives"]) == {"domain_adaptation_images.tar.gz", "OFFICE31.zip"}
    assert registry.dataset_version(registry.get_dataset("office31")) == version
    # same names and counts, one image with other bytes: refused, naming the domain and the lock
    shutil.rmtree(registry.data_root(registry.get_dataset("office31")))
    shutil.rmtree(registry.download_dir(registry.get_dataset("office31")))
    (changed,) = build_packaging("office31", "wjdcloud", tmp_path / "changed", PER_CLASS, changed="webcam")
    server.files[server.url("/ok/OFFICE31.zip")] = changed.read_bytes()
    with pytest.raises(FetchError, match=r"(?s)OFFICE31/webcam in .*OFFICE31\.zip \(domain 'webcam'\) differ from "
                                         r"the version locked"):
        fetch.fetch("office31", progress=False)
    _nothing_partial("office31")


def test_locked_archive_with_other_bytes_is_checked_by_content(server, isolated, tmp_path):
    _serve(server, isolated, tmp_path, "imageclef")
    fetch.fetch("imageclef", progress=False)
    shutil.rmtree(registry.data_root(registry.get_dataset("imageclef")))
    shutil.rmtree(registry.download_dir(registry.get_dataset("imageclef")))
    (other,) = build_packaging("imageclef", "original", tmp_path / "other", PER_CLASS, extra_class=1)
    server.files[server.url("/ok/image_CLEF.zip")] = other.read_bytes()
    with pytest.raises(FetchError, match=r"(?s)36 images, expected 24.*differs from the locked"):
        fetch.fetch("imageclef", progress=False)
    _nothing_partial("imageclef")


def test_interrupted_download_is_resumed_with_range(server, isolated, tmp_path):
    spec, (arc,) = _serve(server, isolated, tmp_path, "office31", padding=1_500_000)
    url, data = server.url(f"/ok/{arc.name}"), arc.read_bytes()
    server.truncate[url] = 1_200_000  # the connection drops; within the same fetch the transfer resumes
    fetch.fetch("office31", progress=False)
    ranges = [r for u, r in server.requests if u == url]
    assert ranges[0] is None and ranges[1].startswith("bytes=") and int(ranges[1][6:-1]) > 0
    assert (registry.download_dir(registry.get_dataset("office31")) / arc.name).read_bytes() == data
    # a fetch that gives up keeps the partial file; the next fetch resumes it from the same mirror
    _reset("office31")
    server.requests.clear()
    server.truncate[url] = 1_200_000
    with pytest.raises(FetchError, match="incomplete"):
        fetch.fetch("office31", progress=False, retries=1)
    assert [p for p in registry.download_dir(registry.get_dataset("office31")).rglob("*.part") if p.stat().st_size > 0]
    fetch.fetch("office31", progress=False)
    ranges = [r for u, r in server.requests if u == url]
    assert ranges[-1].startswith("bytes=") and int(ranges[-1][6:-1]) > 0
    assert (registry.download_dir(registry.get_dataset("office31")) / arc.name).read_bytes() == data
    assert not (registry.download_dir(registry.get_dataset("office31")) / ".partial").exists()


def test_trickling_server_is_cut_by_the_deadline(server, isolated, tmp_path):
    spec, (arc,) = _serve(server, isolated, tmp_path, "office31")
    server.trickle[server.url(f"/ok/{arc.name}")] = 2.0  # one byte every 2 s
    t0 = time.monotonic()
    with pytest.raises(FetchError, match="deadline of 3 s"):
        fetch.fetch("office31", progress=False, timeout=5, deadline=3, retries=1)
    assert time.monotonic() - t0 < 29  # cut by the deadline, before the server ends its 30 s trickle (data_fixtures)
    _nothing_partial("office31")


@pytest.mark.parametrize("announced", [True, False])
def test_size_limit(server, isolated, tmp_path, announced):
    spec, (arc,) = _serve(server, isolated, tmp_path, "office31")
    if not announced:
        server.no_length[server.url(f"/ok/{arc.name}")] = True
    limit = len(arc.read_bytes()) // 2
    with pytest.raises(FetchError, match=f"larger than the size limit of {limit:,} bytes"):
        fetch.fetch("office31", progress=False, max_size=limit)
    assert not [p for p in registry.download_dir(registry.get_dataset("office31")).rglob("*") if p.is_file()]
    fetch.fetch("office31", progress=False)  # the declared size (2 x 80 MB) lets it through


def test_html_page_is_not_taken_for_the_archive(server, isolated, tmp_path):
    spec, (arc,) = _serve(server, isolated, tmp_path, "office31")
    server.files[server.url(f"/dead/{arc.name}")] = b"<!DOCTYPE html><html>Sign in</html>"
    fetch.fetch("office31", progress=False)
    assert "HTML page" not in registry.read_lock("office31")["archives"][arc.name]["mirror"]
    assert registry.read_lock("office31")["archives"][arc.name]["mirror"].endswith(f"/ok/{arc.name}")


def test_pinned_checksum_is_strict(server, isolated, tmp_path):
    _serve(server, isolated, tmp_path, "visda2017")
    isolated.use(small_spec("visda2017", PER_CLASS, lambda a: [server.url(f"/ok/{a.filename}")], sha256="0" * 64))
    with pytest.raises(FetchError, match=r"(?s)checksum mismatch for train\.tar.*expected sha256 0{64}"):
        fetch.fetch("visda2017", progress=False)
    _nothing_partial("visda2017")
    assert not (registry.download_dir(registry.get_dataset("visda2017")) / "train.tar").exists()


def test_corrupt_image_is_named_by_its_archive_member(server, isolated, tmp_path):
    _serve(server, isolated, tmp_path, "office31", "wjdcloud", corrupt="dslr")
    with pytest.raises(FetchError, match=r"unreadable image OFFICE31/dslr/back_pack/frame_0001\.jpg in "
                                         r".*downloads/office31/OFFICE31\.zip") as err:
        fetch.fetch("office31", progress=False, verify_images=True)
    assert ".staging" not in str(err.value)
    _nothing_partial("office31")
    assert not registry.lock_path("office31").exists()  # a bad archive is never locked


def test_missing_class_folder_is_named_by_its_archive_member(server, isolated, tmp_path):
    _serve(server, isolated, tmp_path, "officehome", skip_class="Fork")
    with pytest.raises(FetchError, match=r"OfficeHomeDataset_10072016/Art in .*OfficeHomeDataset_10072016\.zip: "
                                         r"missing class folder\(s\) Fork") as err:
        fetch.fetch("officehome", progress=False)
    assert ".staging" not in str(err.value)
    _nothing_partial("officehome")


def test_truncated_hand_placed_archive(isolated, tmp_path):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "original", tmp_path / "build", PER_CLASS)
    dl = registry.download_dir(registry.get_dataset("office31"))
    dl.mkdir(parents=True)
    (dl / arc.name).write_bytes(arc.read_bytes()[: len(arc.read_bytes()) // 2])
    with pytest.raises(FetchError, match=r"domain_adaptation_images\.tar\.gz is truncated or corrupt"):
        fetch.fetch("office31", progress=False, retries=1)
    _nothing_partial("office31")


def test_hand_placed_archive_of_any_name_needs_no_network(isolated, tmp_path):
    spec = isolated.use(small_spec("imageclef", PER_CLASS, lambda a: [f"{DEAD}/never-contacted"]))
    (arc,) = build_packaging("imageclef", "original", tmp_path, PER_CLASS)
    registry.download_dir(registry.get_dataset("imageclef")).mkdir(parents=True)
    shutil.copy(arc, registry.download_dir(registry.get_dataset("imageclef")) / "from-a-colleague.zip")
    root = fetch.fetch("imageclef", progress=False)
    assert len(verify.scan_domain(spec, spec.domain("p"), root)) == 12 * PER_CLASS
    assert registry.read_lock("imageclef")["source"]["c"] == "placed by hand: from-a-colleague.zip"


def test_hand_placed_folder_is_verified(isolated, tmp_path):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "original", tmp_path / "build", PER_CLASS, skip_class="mug")
    shutil.unpack_archive(arc, registry.data_root(registry.get_dataset("office31")))
    with pytest.raises(FetchError, match=r"office31/amazon/images: missing class folder\(s\) mug"):
        fetch.fetch("office31", progress=False)


def test_no_network_error_is_one_clear_line_first(isolated):
    spec = isolated.use(small_spec("visda2017", PER_CLASS, lambda a: [f"{DEAD}/a/{a.filename}",
                                                                      f"{DEAD}/b/{a.filename}"]))
    with pytest.raises(FetchError) as err:
        fetch.fetch("visda2017", retries=1, timeout=5, progress=False)
    first, *rest = str(err.value).splitlines()
    assert first.startswith("cannot fetch dataset 'visda2017': no source delivered domain(s) synthetic, real;")
    visda = registry.get_dataset("visda2017")
    assert str(registry.download_dir(visda)) in first and str(registry.data_root(visda)) in first
    for text in (f"{DEAD}/a/train.tar", f"{DEAD}/b/train.tar", spec.archives[0].filename):
        assert text in "\n".join(rest)
    _nothing_partial("visda2017")


def test_cli_fetch_error_exit_status_and_flags(isolated, capsys):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["data", "fetch", "office31", "--retries", "1", "--timeout", "5", "--deadline", "9",
                              "--max-size", "1.5G"])
    assert (args.deadline, args.max_size) == (9.0, 1_500_000_000)
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    assert exit_.value.code == 2  # as every other command line error
    err = capsys.readouterr().err
    assert err.startswith("error: cannot fetch dataset 'office31'") and "Traceback" not in err
    assert cli.main(parser.parse_args(["data", "list"])) == 0
    out = capsys.readouterr().out
    assert "office31" in out and "officehome_15913" in out and "15,913" in out


def test_hand_placed_domain_plus_download_of_the_rest(server, isolated, tmp_path):
    spec, (arc,) = _serve(server, isolated, tmp_path, "office31")
    shutil.unpack_archive(arc, tmp_path / "x")
    root = registry.data_root(registry.get_dataset("office31"))
    root.mkdir(parents=True)
    shutil.move(tmp_path / "x" / "amazon", root / "amazon")
    (root / "amazon" / "images" / "mug" / "extra.jpg").write_bytes(b"")  # one image too many
    with pytest.raises(FetchError, match=r"domain 'amazon'\): 63 images, expected 62"):
        fetch.fetch("office31", progress=False)
    assert not (root / "dslr").exists() and server.requests == []  # failed before downloading
    (root / "amazon" / "images" / "mug" / "extra.jpg").unlink()
    fetch.fetch("office31", progress=False)
    assert (root / "webcam" / "images" / "mug").is_dir()
    assert sum(verify.verify("office31")["dslr"].values()) == 62
    assert registry.read_lock("office31")["source"]["amazon"] == "placed in the data folder"


def test_stale_staging_of_a_killed_fetch_is_removed(server, isolated, tmp_path):
    _serve(server, isolated, tmp_path, "office31")
    root = registry.data_root(registry.get_dataset("office31"))
    stale = root.parent / f".{root.name}.staging-killed"
    (stale / ".extract-0" / "amazon").mkdir(parents=True)
    fetch.fetch("office31", progress=False)
    assert not stale.exists() and not list(root.parent.glob(f".{root.name}.staging-*"))


def test_one_fetch_at_a_time(server, isolated, tmp_path):
    import fcntl

    _serve(server, isolated, tmp_path, "office31")
    root = registry.data_root(registry.get_dataset("office31"))
    root.parent.mkdir(parents=True)
    with open(root.parent / f".{root.name}.fetch-lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(FetchError, match="another fetch into .* is running"):
            fetch.fetch("office31", progress=False)
    fetch.fetch("office31", progress=False)


def test_per_domain_archives_and_structure_discovery(server, isolated, tmp_path):
    """TLlib's one-domain archives: ``<domain>/images/<class>`` or only ``images/<class>`` (no domain folder)."""
    spec, arcs = _serve(server, isolated, tmp_path, "office31", "tllib")
    bare = {f"images/{p.split('/images/', 1)[1]}": data for p, data in _members(arcs[1]).items()}
    server.files[server.url("/ok/dslr.tgz")] = write_archive(tmp_path / "dslr.tgz", bare).read_bytes()
    root = fetch.fetch("office31", progress=False)
    assert [u.rsplit("/", 2)[-2:] for u, _ in server.requests] == [
        [m, f] for f in ("amazon.tgz", "dslr.tgz", "webcam.tgz") for m in ("dead", "ok")]
    assert (root / "dslr" / "images" / "back_pack" / "frame_0001.jpg").is_file()
    assert sorted(json.loads(registry.lock_path("office31").read_text())["archives"]) == [
        "amazon.tgz", "dslr.tgz", "webcam.tgz"]


def _members(path):
    import tarfile
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_require_dataset_message(isolated):
    with pytest.raises(registry.DatasetMissingError) as err:
        registry.require_dataset(registry.get_dataset("officehome"))
    msg = str(err.value)
    assert "python -m dmp data fetch officehome" in msg and "Real_World" in msg
    assert str(registry.download_dir(registry.get_dataset("officehome"))) in msg
    with pytest.raises(registry.DatasetMissingError, match="prepare officehome"):
        registry.list_file(registry.get_dataset("officehome"), "Art", "partial")


OFFICEHOME_TOTALS = {"Art": 2427, "Clipart": 4365, "Product": 4439, "Real_World": 4357}


@pytest.mark.slow
def test_officehome_real_packagings_at_the_real_counts(isolated, tmp_path):
    """The registry's own Office-Home entry (not scaled): OfficeHomeDataset_10072016.zip (``Real World``, with a
    space) and OfficeHome.zip (``RealWorld``) built at the published per-domain counts, 15,588 images, fetched on
    a temporary copy of what the checkout commits for Office-Home (as a fresh clone would). The first fetch writes
    the lock (into that copy); the other packaging then verifies against it and gives the same lists."""
    shutil.copytree(registry.PROJECT / "datasets" / "officehome", registry.dataset_dir("officehome"),
                    ignore=shutil.ignore_patterns("data", "downloads"))
    spec = registry.get_dataset("officehome")
    assert {d.name: d.count for d in spec.domains} == OFFICEHOME_TOTALS
    lists = {}
    for packaging in ("original", "wjdcloud"):
        shutil.rmtree(registry.data_root(registry.get_dataset("officehome")), ignore_errors=True)
        shutil.rmtree(registry.download_dir(registry.get_dataset("officehome")), ignore_errors=True)
        (arc,) = build_packaging("officehome", packaging, registry.download_dir(registry.get_dataset("officehome")),
                                 totals=OFFICEHOME_TOTALS)
        with __import__("zipfile").ZipFile(arc) as zf:
            top = {n.split("/")[1] for n in zf.namelist() if n.count("/") > 1}
        assert ("Real World" if packaging == "original" else "RealWorld") in top
        root = fetch.fetch("officehome", progress=False)
        splits.prepare("officehome", ["full", "partial"])
        lists[packaging] = {p.name: p.read_text() for p in sorted(registry.lists_dir("officehome").glob("*.txt"))}
        spec = registry.get_dataset("officehome")
        assert {d: len(splits.read_list(registry.list_file(spec, d))) for d in OFFICEHOME_TOTALS} == OFFICEHOME_TOTALS
        assert (root / "Real_World").is_dir()
    lock = registry.read_lock("officehome")
    assert set(lock["archives"]) == {"OfficeHomeDataset_10072016.zip", "OfficeHome.zip"}
    assert {d: sum(c.values()) for d, c in lock["counts"].items()} == OFFICEHOME_TOTALS
    assert lists["original"] == lists["wjdcloud"]
    assert sum(verify.verify("officehome", progress=False)["Real_World"].values()) == 4357


def _features_mat(path, n, seed):
    """A features file as the Office-Caltech10 ones: MATLAB v5, ``fts`` [n, 1024] float32 >= 0, ``labels``
    [1, n] int64 1..10, sorted by label."""
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    savemat(path, {"fts": rng.random((n, 1024), dtype=np.float32), "labels": (np.arange(n) * 10 // n + 1)[None]})


def _digits_mat(path, ns, nt):
    """MNIST_vs_USPS.mat as published: MATLAB v7.3 (HDF5 with MATLAB's 512-byte header), Xs [ns, 256] and
    Xt [nt, 256] doubles in [0, 1] as h5py sees them, Ys [1, ns] / Yt [1, nt] labels 1..10 as doubles."""
    import h5py

    rng = np.random.default_rng(7)
    with h5py.File(path, "w", userblock_size=512) as f:
        for key, n in (("s", ns), ("t", nt)):
            f.create_dataset(f"X{key}", data=rng.random((n, 256))).attrs["MATLAB_class"] = np.bytes_(b"double")
            f.create_dataset(f"Y{key}", data=(np.arange(n) % 10 + 1.0)[None]).attrs["MATLAB_class"] = \
                np.bytes_(b"double")
    with open(path, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, HDF5 schema 1.00 .".ljust(116))


def _pinned(spec, files: dict, counts: dict):
    """``spec`` with each archive's sha256 and size those of the generated ``files`` {file name: path}, and the
    domains' counts ``counts``; the real URLs kept."""
    return dataclasses.replace(
        spec, archives=tuple(dataclasses.replace(a, sha256=fetch.sha256_file(files[a.filename]),
                                                 size=files[a.filename].stat().st_size) for a in spec.archives),
        domains=tuple(dataclasses.replace(d, count=counts[d.name]) for d in spec.domains))


def test_evidence_data_is_fetched_from_the_pinned_github_commits(internet, isolated, tmp_path, monkeypatch):
    """``data fetch office_caltech10`` / ``mnist_usps``: the registry's raw.githubusercontent.com URLs at the pinned
    commits (jsDelivr serving the same commit when GitHub fails), checked against the pinned sha256, into the
    normal data root; a file with other bytes is refused and nothing is installed."""
    oc10, digits = registry.get_dataset("office_caltech10"), registry.get_dataset("mnist_usps")
    commits = {"office_caltech10": "redhat12345/OfficeCaltechDomainAdaptation/74f70487e1b975d1af05bb9a2ecfbf14a7000080/"
                                   "features/GoogleNet1024/",
               "mnist_usps": "chamwen/JPDA/b056e5eca625fc480aa605242348809f9199d5f8/data/"}
    for spec in (oc10, digits):
        for a in spec.archives:
            assert a.urls[0] == f"https://raw.githubusercontent.com/{commits[spec.name]}{a.filename}"
            assert a.sha256 and a.size and len(a.urls) == 2
    assert [a.sha256[:12] for a in oc10.archives] == ["bae9ee6e8f7c", "5f7c6211581f", "57774bbdf974"]
    assert digits.archives[0].sha256[:12] == "7fbb67f14af7"
    monkeypatch.delenv("DMP_DATA_DIR")  # the normal data root: datasets/<name>/data (here a temporary datasets/)
    files = {}
    for i, (d, n) in enumerate((("amazon", 30), ("dslr", 20), ("webcam", 25))):
        _features_mat(files.setdefault(f"{d}.mat", tmp_path / f"{d}.mat"), n, i)
    _digits_mat(files.setdefault("MNIST_vs_USPS.mat", tmp_path / "MNIST_vs_USPS.mat"), 40, 30)
    oc10 = isolated.use(_pinned(oc10, files, {"amazon": 30, "dslr": 20, "webcam": 25}))
    digits = isolated.use(_pinned(digits, files, {"mnist": 40, "usps": 30}))
    for spec in (oc10, digits):
        for a in spec.archives:
            internet.files[a.urls[1]] = files[a.filename].read_bytes()
            internet.files[a.urls[0]] = files[a.filename].read_bytes()
    internet.status[oc10.archives[1].urls[0]] = 404  # dslr.mat: GitHub fails, jsDelivr serves it

    bad = bytearray(files["webcam.mat"].read_bytes())
    bad[-1] ^= 1
    internet.files[oc10.archives[2].urls[0]] = internet.files[oc10.archives[2].urls[1]] = bytes(bad)
    with pytest.raises(FetchError, match=r"(?s)cannot fetch dataset 'office_caltech10'.*webcam.*checksum mismatch"):
        fetch.fetch("office_caltech10", progress=False, retries=1)
    root = registry.data_root(registry.get_dataset("office_caltech10"))
    assert root == registry.DATASETS_DIR / "office_caltech10" / "data" and not (root / "amazon.mat").exists()
    assert not list(root.parent.glob(".data.staging-*"))
    internet.files[oc10.archives[2].urls[0]] = files["webcam.mat"].read_bytes()

    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    for name in ("office_caltech10", "mnist_usps"):
        assert cli.main(parser.parse_args(["data", "fetch", name, "--retries", "1"])) == 0
        assert cli.main(parser.parse_args(["data", "verify", name])) == 0
    assert sorted(p.name for p in root.iterdir()) == ["amazon.mat", "dslr.mat", "webcam.mat"]
    x, y = splits.load_arrays(registry.get_dataset("office_caltech10"), "dslr")
    assert x.shape == (20, 1024) and y.tolist() == sorted(y.tolist()) and y.max() == 9
    xs, ys = splits.load_arrays(registry.get_dataset("mnist_usps"), "mnist")
    assert xs.shape == (40, 1, 16, 16) and ys.tolist()[:11] == list(range(10)) + [0]
    got = {u.split("/")[2] for u, _ in internet.requests}
    assert got == {"raw.githubusercontent.com", "cdn.jsdelivr.net"}
    assert not registry.lock_path("office_caltech10").exists()  # pinned files need no lock
    (root / "webcam.mat").write_bytes(bytes(bad))  # a damaged copy in place: verify names it and the pin
    with pytest.raises(ValueError, match=rf"webcam\.mat: sha256 .* is not the pinned {oc10.archives[2].sha256[:16]}"):
        verify.verify("office_caltech10")


def test_a_copy_placed_in_the_data_folder_is_used_and_matches_the_pins(shared_copies):
    for name, folder in shared_copies.COPIES.items():
        spec, root = registry.get_dataset(name), registry.data_root(registry.get_dataset(name))
        assert root.resolve() == (shared_copies.SHARED / folder).resolve()
        for a in spec.archives:
            assert fetch.sha256_file(root / a.filename) == a.sha256 and (root / a.filename).stat().st_size == a.size
        assert fetch.fetch(name, progress=False) == root  # nothing to download


def test_a_killed_fetch_leaves_nothing_the_next_fetch_keeps(isolated, tmp_path):
    """A fetch process killed (SIGKILL) in the middle of extraction leaves its staging folder; the next fetch
    removes it and installs the dataset."""
    import os
    import signal
    import subprocess
    import sys

    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "original", registry.download_dir(registry.get_dataset("office31")), PER_CLASS)
    ready = tmp_path / "extracting"
    child = subprocess.Popen([sys.executable, "-c", f"""
import pathlib, time
from dmp.data import archive, fetch, registry
registry.DATASETS_DIR = pathlib.Path({str(registry.DATASETS_DIR)!r})
def stuck(path, into, **kw):  # extraction under way: some files written, then the process is killed
    (into / "amazon").mkdir(parents=True)
    (into / "amazon" / "part.jpg").write_bytes(b"x")
    pathlib.Path({str(ready)!r}).touch()
    while True:  # until killed
        time.sleep(1)
fetch.extract = stuck
fetch.fetch("office31", progress=False)
"""], env={**os.environ, "PYTHONPATH": str(registry.PROJECT)})
    try:
        deadline = time.monotonic() + 300  # only against a hang: the assertion below names it
        while not ready.exists() and time.monotonic() < deadline:
            assert child.poll() is None, "the child fetch ended before it started extracting"
            time.sleep(0.05)
        assert ready.exists(), "the child fetch did not start extracting"
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
    root = registry.data_root(registry.get_dataset("office31"))
    left = list(root.parent.glob(f".{root.name}.staging-*"))
    assert left and (left[0] / ".extract-0" / "amazon" / "part.jpg").is_file() and not root.exists()
    fetch.fetch("office31", progress=False)
    assert not list(root.parent.glob(f".{root.name}.staging-*")) and (root / "amazon" / "images").is_dir()
    assert arc.is_file()  # the archive is kept
