"""Fetching through the real code from a loopback HTTP server: archives in the real layouts of the four
datasets (generated images, scaled-down counts), dead mirrors, resumed truncated downloads, checksums,
corrupt images, missing class folders, hand-placed archives and folders. Nothing partial may remain."""
from __future__ import annotations

import json
import shutil

import pytest
from data_fixtures import build_archive, isolated, server, small_spec  # noqa: F401 (fixtures)

from dmp.data import fetch, registry, splits
from dmp.data.fetch import FetchError

PER_CLASS = 2


def _serve(server, isolated, name, **kw):
    """Build the archive(s) of ``name``, serve them under /ok/<file>, register a scaled spec whose first
    mirror (/dead/<file>) is dead. Returns the spec and the archive paths."""
    arcs = build_archive(name, isolated.path / "build" / name, PER_CLASS, **kw)
    for arc in arcs:
        server.files[f"/ok/{arc.name}"] = arc.read_bytes()
    urls = lambda f: [server.url(f"/dead/{f}"), server.url(f"/ok/{f}")]  # noqa: E731
    return isolated.use(small_spec(name, PER_CLASS, urls, domains=kw.get("domains"))), arcs


def _nothing_partial(name):
    """No staging folder, no .part file, no data root (when the fetch failed)."""
    root = registry.data_root(name)
    leftovers = [p for p in root.parent.iterdir() if p.name.startswith(f".{root.name}.")] \
        if root.parent.exists() else []
    assert leftovers == []
    assert not root.exists()
    dl = registry.download_dir(name)
    assert not list(dl.glob("*.part")) if dl.exists() else True


@pytest.mark.parametrize("name", ["office31", "officehome", "imageclef", "visda2017"])
def test_fetch_real_layouts_with_dead_first_mirror(server, isolated, name):
    spec, arcs = _serve(server, isolated, name)
    root = fetch.fetch(name, progress=False, verify_images=True)
    assert [p for p, _ in server.requests] == [f"/{m}/{a.name}" for a in arcs for m in ("dead", "ok")]
    for d in spec.domains:
        entries = splits.scan_domain(spec, d, root)
        assert len(entries) == PER_CLASS * len(spec.classes)
        assert sorted({lab for _, lab in entries}) == list(range(len(spec.classes)))
    lock = json.loads(registry.lock_path(name).read_text())
    assert sorted(lock["archives"]) == sorted(a.name for a in arcs)
    assert all(len(v["sha256"]) == 64 for v in lock["archives"].values())
    assert set(lock["counts"]) == {d.name for d in spec.domains}
    if name == "officehome":  # the archive's "Real World" folder is installed under the registry's name
        assert (root / "Real_World").is_dir() and not (root / "Real World").exists()
    if name == "imageclef":
        assert (root / "list" / "cList.txt").is_file()
    # the lists are written from the fetched copy and verify against it
    splits.prepare(name, ["full", "partial"])
    assert registry.list_file(name, spec.domains[0].name, "partial").is_file()
    fetch.verify(name)
    assert not list(root.parent.glob(f".{root.name}.*"))


def test_truncated_download_is_resumed_with_range(server, isolated):
    spec, (arc,) = _serve(server, isolated, "office31")
    path = f"/ok/{arc.name}"
    server.truncate[path] = len(arc.read_bytes()) // 3
    fetch.fetch("office31", progress=False)
    ranges = [r for p, r in server.requests if p == path]
    assert ranges == [None, f"bytes={len(arc.read_bytes()) // 3}-"]
    assert (registry.download_dir("office31") / arc.name).read_bytes() == arc.read_bytes()


def test_wrong_checksum_fails_and_leaves_nothing(server, isolated):
    _serve(server, isolated, "visda2017", domains=["synthetic"])
    isolated.use(small_spec("visda2017", PER_CLASS, lambda f: [server.url(f"/ok/{f}")], sha256="0" * 64,
                            domains=["synthetic"]))
    with pytest.raises(FetchError, match=r"(?s)checksum mismatch for train\.tar.*expected sha256 0{64}"):
        fetch.fetch("visda2017", progress=False)
    _nothing_partial("visda2017")
    assert not (registry.download_dir("visda2017") / "train.tar").exists()


def test_locked_checksum_is_enforced_on_later_fetches(server, isolated):
    _serve(server, isolated, "imageclef")
    fetch.fetch("imageclef", progress=False)
    # a later fetch elsewhere (data and download gone) gets different bytes from the mirror
    shutil.rmtree(registry.data_root("imageclef"))
    shutil.rmtree(registry.download_dir("imageclef"))
    (other,) = build_archive("imageclef", isolated.path / "other", PER_CLASS + 1)
    server.files["/ok/image_CLEF.zip"] = other.read_bytes()
    with pytest.raises(FetchError, match="checksum mismatch for image_CLEF.zip"):
        fetch.fetch("imageclef", progress=False)
    _nothing_partial("imageclef")


def test_corrupt_image_is_named(server, isolated):
    _serve(server, isolated, "office31", corrupt="dslr")
    with pytest.raises(FetchError, match=r"unreadable image .*dslr/images/back_pack/frame_0001\.jpg"):
        fetch.fetch("office31", progress=False, verify_images=True)
    _nothing_partial("office31")
    assert not registry.lock_path("office31").exists()  # a bad archive is never locked


def test_missing_class_folder_is_named(server, isolated):
    _serve(server, isolated, "officehome", skip_class="Fork")
    with pytest.raises(FetchError, match="missing class folder.* Fork"):
        fetch.fetch("officehome", progress=False)
    _nothing_partial("officehome")


def test_truncated_hand_placed_archive(isolated):
    isolated.use(small_spec("office31", PER_CLASS))
    (arc,) = build_archive("office31", isolated.path / "build", PER_CLASS)
    dl = registry.download_dir("office31")
    dl.mkdir(parents=True)
    (dl / arc.name).write_bytes(arc.read_bytes()[: len(arc.read_bytes()) // 2])
    with pytest.raises(FetchError, match=r"domain_adaptation_images\.tar\.gz is truncated or corrupt"):
        fetch.fetch("office31", progress=False)
    _nothing_partial("office31")


def test_hand_placed_archive_needs_no_network(isolated):
    spec = isolated.use(small_spec("imageclef", PER_CLASS, lambda f: ["http://127.0.0.1:9/never-contacted"]))
    build_archive("imageclef", registry.download_dir("imageclef"), PER_CLASS)
    root = fetch.fetch("imageclef", progress=False)
    assert len(splits.scan_domain(spec, spec.domain("p"), root)) == 12 * PER_CLASS


def test_hand_placed_folder_is_verified(isolated, tmp_path):
    isolated.use(small_spec("office31", PER_CLASS))
    (arc,) = build_archive("office31", tmp_path / "build", PER_CLASS, skip_class="mug")
    shutil.unpack_archive(arc, registry.data_root("office31"))
    with pytest.raises(FetchError, match="missing class folder.* mug"):
        fetch.fetch("office31", progress=False)


def test_no_network_error_lists_mirrors_and_manual_steps(isolated):
    spec = isolated.use(small_spec("visda2017", PER_CLASS, lambda f: [f"http://127.0.0.1:9/a/{f}",
                                                                      f"http://127.0.0.1:9/b/{f}"]))
    with pytest.raises(FetchError) as err:
        fetch.fetch("visda2017", retries=1, timeout=5, progress=False)
    msg = str(err.value)
    for text in ("http://127.0.0.1:9/a/train.tar", "http://127.0.0.1:9/b/train.tar",
                 str(registry.download_dir("visda2017")), str(registry.data_root("visda2017")),
                 spec.archives[0].filename):
        assert text in msg
    _nothing_partial("visda2017")


def test_html_page_is_not_taken_for_the_archive(server, isolated):
    spec, (arc,) = _serve(server, isolated, "office31")
    server.files[f"/dead/{arc.name}"] = b"<!DOCTYPE html><html>Sign in</html>"
    server.content_type[f"/dead/{arc.name}"] = "text/html; charset=utf-8"
    fetch.fetch("office31", progress=False)
    assert (registry.data_root("office31") / "amazon" / "images").is_dir()


def test_require_dataset_message(isolated):
    with pytest.raises(registry.DatasetMissingError) as err:
        registry.require_dataset("officehome")
    msg = str(err.value)
    assert "python -m dmp data fetch officehome" in msg and "Real_World" in msg
    assert str(registry.download_dir("officehome")) in msg
    with pytest.raises(registry.DatasetMissingError, match="prepare officehome"):
        registry.list_file("officehome", "Art", "partial")


def test_cli_fetch_error_exit_status(isolated, capsys):
    import argparse

    from dmp.data import cli

    isolated.use(small_spec("office31", PER_CLASS, lambda f: [f"http://127.0.0.1:9/{f}"]))
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit) as exit_:
        cli.main(parser.parse_args(["data", "fetch", "office31", "--retries", "1", "--timeout", "5"]))
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot fetch dataset 'office31'") and "Traceback" not in err
    assert cli.main(parser.parse_args(["data", "list"])) == 0
    assert "office31" in capsys.readouterr().out


def test_hand_placed_domain_plus_download_of_the_rest(server, isolated, tmp_path):
    spec, (arc,) = _serve(server, isolated, "office31")
    shutil.unpack_archive(arc, tmp_path / "x")
    root = registry.data_root("office31")
    root.mkdir(parents=True)
    shutil.move(tmp_path / "x" / "amazon", root / "amazon")
    (root / "amazon" / "images" / "mug" / "extra.jpg").write_bytes(b"")  # one image too many
    with pytest.raises(FetchError, match=r"domain 'amazon'\): 63 images, expected 62"):
        fetch.fetch("office31", progress=False)
    assert not (root / "dslr").exists() and server.requests == []  # failed before downloading
    (root / "amazon" / "images" / "mug" / "extra.jpg").unlink()
    fetch.fetch("office31", progress=False)
    assert (root / "webcam" / "images" / "mug").is_dir()
    assert sum(fetch.verify("office31")["dslr"].values()) == 62


def test_registered_per_domain_archives_are_tried_in_order(server, isolated, tmp_path):
    """The registry's own archive list for Office-31 (per-domain .tgz first): a one-domain archive may hold
    ``<domain>/images/<class>`` or just ``images/<class>``; the manual-only archive is skipped."""
    import dataclasses
    import io
    import tarfile

    from data_fixtures import tiny_image

    real = registry.get_dataset("office31")
    spec = small_spec("office31", PER_CLASS)
    archives = []
    for a in real.archives:
        if len(a.domains) == 1:
            d = a.domains[0]
            prefix = f"{d}/images" if d != "dslr" else "images"  # dslr.tgz without its top folder
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                for label, cls in enumerate(real.classes):
                    for i in range(PER_CLASS):
                        data = tiny_image(label * 10 + i)
                        info = tarfile.TarInfo(f"{prefix}/{cls}/frame_{i:04d}.jpg")
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
            server.files[f"/tllib/{a.filename}"] = buf.getvalue()
        archives.append(dataclasses.replace(a, urls=tuple(server.url(f"/tllib/{a.filename}") for _ in a.urls[:1])))
    isolated.use(dataclasses.replace(spec, archives=tuple(archives)))
    root = fetch.fetch("office31", progress=False)
    assert [p for p, _ in server.requests] == ["/tllib/amazon.tgz", "/tllib/dslr.tgz", "/tllib/webcam.tgz"]
    assert (root / "dslr" / "images" / "back_pack" / "frame_0000.jpg").is_file()
    assert sorted(json.loads(registry.lock_path("office31").read_text())["archives"]) == [
        "amazon.tgz", "dslr.tgz", "webcam.tgz"]
