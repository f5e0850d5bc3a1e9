"""Extraction safety: members with traversal, absolute paths, links leading out, devices and pipes are
refused as an attack, naming the member; a link inside the archive is installed as a copy, so nothing installed
points outside the dataset folder once wrapper folders are stripped; an archive cannot extract more than the size
limit allows. Layout discovery by structure."""
from __future__ import annotations

import io
import tarfile
import zipfile

import pytest
from data_fixtures import DEAD, build_packaging, isolated, small_spec, tiny_image  # noqa: F401

from dmp.data import archive, fetch, registry, verify
from dmp.data.registry import FetchError

PER_CLASS = 2


def _office31(isolated, tmp_path):
    spec = isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "original", tmp_path / "build", PER_CLASS)
    with tarfile.open(arc) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    return spec, members


def _place_tar(members, extra, dest):
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tar:
        for m, data in members:
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return dest


def _info(name, kind=tarfile.REGTYPE, link="", data=b""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, len(data) if kind == tarfile.REGTYPE else 0
    return info, (data if kind == tarfile.REGTYPE else None)


@pytest.mark.parametrize("member,why", [
    (("../evil.txt", tarfile.REGTYPE, "", b"x"), "path traversal"),
    (("/tmp/dmp-evil.txt", tarfile.REGTYPE, "", b"x"), "absolute path"),
    (("amazon/images/mug/evil.jpg", tarfile.SYMTYPE, "/etc/passwd"), "link to the absolute path '/etc/passwd'"),
    (("amazon/images/mug/evil.jpg", tarfile.SYMTYPE, "../../../../outside.jpg"), "outside the archive"),
    (("amazon/images/mug/evil.jpg", tarfile.LNKTYPE, "../outside.jpg"), "outside the archive"),
    (("amazon/images/mug/dev", tarfile.CHRTYPE), "device, pipe or other special file"),
    (("amazon/images/mug/fifo", tarfile.FIFOTYPE), "device, pipe or other special file"),
])
def test_unsafe_tar_members_are_refused_as_an_attack(isolated, tmp_path, member, why):
    spec, members = _office31(isolated, tmp_path)
    _place_tar(members, [_info(*member)],
               registry.download_dir(registry.get_dataset("office31")) / "domain_adaptation_images.tar.gz")
    with pytest.raises(FetchError, match=f"refusing member '{member[0]}': .*{why}") as err:
        fetch.fetch("office31", progress=False, retries=1)
    assert "truncated or corrupt" not in str(err.value)  # an attack, not a damaged file
    assert not (tmp_path / "evil.txt").exists() and not registry.data_root(registry.get_dataset("office31")).exists()


@pytest.mark.parametrize("name,link", [("../evil.txt", None), ("/tmp/dmp-evil.txt", None),
                                       ("amazon/images/mug/evil.jpg", "../../../../../outside")])
def test_unsafe_zip_members_are_refused_as_an_attack(isolated, tmp_path, name, link):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "wjdcloud", tmp_path / "build", PER_CLASS)
    dest = registry.download_dir(registry.get_dataset("office31")) / "OFFICE31.zip"
    dest.parent.mkdir(parents=True)
    with zipfile.ZipFile(arc) as src, zipfile.ZipFile(dest, "w") as zf:
        for info in src.infolist():
            zf.writestr(info, src.read(info))
        info = zipfile.ZipInfo(name)
        if link:
            info.external_attr = (0o120777 << 16)
        zf.writestr(info, link or "evil")
    with pytest.raises(FetchError, match=f"refusing member '{name}'"):
        fetch.fetch("office31", progress=False, retries=1)
    assert not (tmp_path / "evil.txt").exists()


def test_link_inside_the_archive_is_installed_as_a_copy(isolated, tmp_path):
    """``<wrapper>/Art/Alarm_Clock/<f>`` linked to ``../../../shared.jpg``: inside the archive, but above the data
    root once the wrapper is stripped. The installed file is a copy; no link is installed."""
    isolated.use(small_spec("officehome", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("officehome", "original", tmp_path / "build", PER_CLASS)
    target = "OfficeHomeDataset_10072016/Art/Alarm_Clock/00001.jpg"
    with zipfile.ZipFile(arc) as zf:
        members = [_info(n, data=zf.read(n)) for n in zf.namelist() if n != target]
    shared = tiny_image(99)
    members += [_info("shared.jpg", data=shared), _info(target, tarfile.SYMTYPE, "../../../shared.jpg")]
    _place_tar([], members,
               registry.download_dir(registry.get_dataset("officehome")) / "officehome-by-a-colleague.tar.gz")
    root = fetch.fetch("officehome", progress=False, verify_images=True)
    installed = root / "Art" / "Alarm_Clock" / "00001.jpg"
    assert installed.is_file() and not installed.is_symlink() and installed.read_bytes() == shared
    assert not [p for p in root.rglob("*") if p.is_symlink()]


def test_extraction_size_limit(isolated, tmp_path):
    spec, members = _office31(isolated, tmp_path)
    _place_tar(members, [_info("readme.bin", data=b"\0" * 400_000)],
               registry.download_dir(registry.get_dataset("office31")) / "domain_adaptation_images.tar.gz")
    with pytest.raises(FetchError, match=r"would extract [\d,]+ bytes, more than the limit of 400,000"):
        fetch.fetch("office31", progress=False, max_size=100_000, retries=1)


def test_discovery_by_structure(tmp_path):
    """A domain is found under any wrapper, by any spelling of its name, with class folders directly or under
    images/; a one-domain archive may omit the domain folder."""
    oh = registry.get_dataset("officehome")
    for spelled in ("Real World", "RealWorld", "real_world", "Real-World"):
        tree = tmp_path / spelled.replace(" ", "_") / "release" / "v1"
        for cls in oh.classes:
            (tree / spelled / cls).mkdir(parents=True)
        found = archive.locate(oh, [oh.domain("Real_World")], tmp_path / spelled.replace(" ", "_"))
        assert found["Real_World"] == tree / spelled
    o31 = registry.get_dataset("office31")
    for cls in o31.classes:
        (tmp_path / "bare" / "images" / cls).mkdir(parents=True)
        (tmp_path / "wrapped" / "OFFICE31" / "webcam" / cls).mkdir(parents=True)
    assert archive.locate(o31, [o31.domain("dslr")], tmp_path / "bare") == {"dslr": tmp_path / "bare" / "images"}
    assert archive.locate(o31, [o31.domain("webcam")], tmp_path / "wrapped") == {
        "webcam": tmp_path / "wrapped" / "OFFICE31" / "webcam"}
    with pytest.raises(FetchError, match=r"cannot find the folder of domain\(s\) amazon, dslr .*top level: .*bare/"):
        archive.locate(o31, [o31.domain("amazon"), o31.domain("dslr")], tmp_path)


def test_scan_ignores_packaging_junk(isolated, tmp_path):
    spec = isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "original", tmp_path / "build", PER_CLASS, padding=10)
    with tarfile.open(arc) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    junk = [_info("amazon/images/mug/._frame_0001.jpg", data=b"AppleDouble"),
            _info("amazon/images/.DS_Store", data=b"x")]
    _place_tar(members, junk,
               registry.download_dir(registry.get_dataset("office31")) / "domain_adaptation_images.tar.gz")
    root = fetch.fetch("office31", progress=False, verify_images=True)
    assert not (root / "amazon" / "images" / "mug" / "._frame_0001.jpg").exists()
    assert len(verify.scan_domain(spec, spec.domain("amazon"), root)) == 62


def _empty_members_tar_gz(path, n, prefix="amazon/images/mug/"):
    """A .tar.gz of ``n`` empty files (headers written directly: tarfile takes a minute for 200,000)."""
    import gzip

    base = bytearray(tarfile.TarInfo(prefix + "0" * 6 + ".jpg").tobuf(tarfile.USTAR_FORMAT))
    base[148:156] = b" " * 8  # the checksum field counts as spaces
    plain = sum(base) - sum(base[:100])
    blocks = []
    for i in range(n):
        name = f"{prefix}{i:06d}.jpg".encode()
        header = bytearray(base)
        header[:len(name)] = name
        header[148:156] = b"%06o\0 " % (plain + sum(name))
        blocks.append(bytes(header))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(b"".join(blocks) + b"\0" * 1024, compresslevel=1))
    return path


def test_archive_member_count_is_bounded_before_extraction(isolated, tmp_path):
    """A ~1 MB archive of 200,000 empty members is refused, in one line, before anything is extracted: the bound is
    twice the images of the archive's domains (declared or locked) plus 10,000."""
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    bomb = _empty_members_tar_gz(registry.download_dir(registry.get_dataset("office31")) / "domain_adaptation_images.tar.gz",
                                 200_000)
    assert bomb.stat().st_size < 4_000_000
    with pytest.raises(FetchError, match=r"domain_adaptation_images\.tar\.gz has more than 10,372 members") as err:
        fetch.fetch("office31", progress=False, retries=1)
    line = next(ln for ln in str(err.value).splitlines() if "members" in ln)
    assert "refused before extraction" in line
    assert not registry.data_root(registry.get_dataset("office31")).exists()
    with pytest.raises(FetchError, match="more than 1,000 members"):
        archive.extract(bomb, tmp_path / "x", max_members=1000, progress=False)
    assert not (tmp_path / "x").exists()
    (arc,) = build_packaging("office31", "original", tmp_path / "ok", PER_CLASS)
    archive.extract(arc, tmp_path / "y", max_members=3 * 62, progress=False)  # exactly its 186 files: accepted
