"""Fetch a dataset: for each missing domain, its archives in turn (those already in the downloads folder first,
placed by hand or downloaded before; then the declared ones from their mirrors), each extracted into a staging
folder beside the data root, its domains found by structure (:mod:`dmp.data.archive`) and verified there by
counts and manifest (:mod:`dmp.data.verify`) before anything is moved into :func:`registry.data_root`.

The first verified fetch is recorded in ``datasets/<name>/lock.json``: the archive and mirror used with their
sha256 and size, the per-class counts and the manifest hashes. Later fetches, from any archive or mirror, must
give that content; a pinned sha256 (registry) is checked strictly.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..io import sha256_file
from . import registry
from .archive import extract, locate, locate_extra
from .download import download, size_limit
from .registry import DatasetMissingError, FetchError
from .spec import Archive, DatasetSpec, bare_folder, declared_path, domain_folder, placed_by_hand
from .verify import check_copy, check_domains, verify

__all__ = ["FetchError", "fetch", "verify"]
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


@contextlib.contextmanager
def _exclusive(root: Path):
    """Hold the dataset's fetch lock (a hidden file beside the data root, kept); staging folders left by a killed
    fetch are removed, since none can be in use."""
    root.parent.mkdir(parents=True, exist_ok=True)
    lockfile = root.parent / f".{root.name}.fetch-lock"
    with open(lockfile, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FetchError(f"another fetch into {root} is running (it holds {lockfile})") from None
        for stale in root.parent.glob(f".{root.name}.staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield


class _Origins:
    """Names a path of the staging folder as the archive member it came from (or its final path)."""

    def __init__(self, root: Path):
        self.root, self.map = root, []

    def add(self, rel: str, archive: Path, member: str) -> None:
        self.map.append((rel, archive, member))

    def __call__(self, rel: str) -> str:
        for prefix, archive, member in self.map:
            if rel == prefix or rel.startswith(prefix + "/"):
                inner = "/".join(x for x in (member, rel[len(prefix):].strip("/")) if x)
                return f"{inner or '.'} in {archive}"
        return str(self.root / rel)


def _candidates(spec: DatasetSpec, dl: Path) -> list[tuple[Archive, bool]]:
    """``(archive, already in the downloads folder)``: present files first (declared ones, then any other
    archive file placed there, tried for every domain), then the declared archives that have mirrors."""
    present = [(a, True) for a in spec.archives if (dl / a.filename).is_file()]
    known = {a.filename for a in spec.archives}
    others = sorted(p.name for p in dl.iterdir() if p.is_file() and p.name.lower().endswith(ARCHIVE_SUFFIXES)
                    and p.name not in known) if dl.is_dir() else []
    extras = tuple(dict.fromkeys(e for a in spec.archives for e in a.extras))
    present += [(Archive(f, (), tuple(d.name for d in spec.domains), extras=extras, id=f"placed by hand: {f}"), True)
                for f in others]
    seen = {a.filename for a, _ in present}
    return present + [(a, False) for a in spec.archives if a.urls and a.filename not in seen]


MAX_MEMBERS = 2_000_000  # members of an archive whose domains' counts are neither declared nor locked


def member_limit(spec: DatasetSpec, archive: Archive, lock: dict) -> int:
    """Members an archive may have: twice the images of its domains (declared, else locked at the first fetch)
    plus 10,000 for folders and extras; :data:`MAX_MEMBERS` where a count is unknown."""
    counts = [spec.domain(d).count or sum(lock["counts"].get(d, {}).values()) or None for d in archive.domains]
    return MAX_MEMBERS if None in counts else 2 * sum(counts) + 10_000


def _obtain(spec, archive, placed, lock, opts) -> tuple[Path, str, str, list[str], int | None]:
    """The archive's file: the one in the downloads folder (``placed``) or a download from its mirrors; its pinned
    sha256 checked. Returns ``(path, sha256, mirror, notes, size limit)``."""
    dl = registry.download_dir(spec)
    locked = lock["archives"].get(archive.key, {})
    limit = size_limit(archive, opts["max_size"], locked.get("size"))
    if placed:
        path, mirror, notes = dl / archive.filename, "placed in the downloads folder", []
    else:
        path, mirror, notes = download(archive, dl, max_bytes=limit, retries=opts["retries"],
                                       timeout=opts["timeout"], deadline=opts["deadline"], progress=opts["progress"])
    sha = sha256_file(path)
    if archive.sha256 and sha != archive.sha256:
        raise FetchError(f"{path}: sha256 {sha} does not match the pinned {archive.sha256} (a different or damaged "
                         f"file: remove it and fetch again)")
    if locked.get("sha256") and locked["sha256"] != sha:
        notes.append(f"sha256 {sha[:12]} differs from the locked {locked['sha256'][:12]} (another packaging or a "
                     f"changed file): checked by content")
    return path, sha, mirror, notes, limit


def _install_folder(spec: DatasetSpec, domain) -> str:
    """Where a fetched domain is installed under the data root: its declared folder, or the folder without
    ``images/`` where the committed full list names its images so (lists written from images placed by hand in that
    layout, docs/datasets.md "Images placed by hand"), so that an archive's copy matches the committed lists."""
    bare, full = bare_folder(spec, domain), registry.lists_dir(spec.name) / f"{domain.name}_full.txt"
    first = registry.read_list(full)[:1] if bare and full.is_file() else []
    return bare if first and declared_path(spec, domain, first[0][0]) != first[0][0] else domain.folder


def _try_archive(spec, archive, placed, needed, staging, lock, opts, origins, n):
    """Get, extract, locate and verify one archive's ``needed`` domains in ``staging``. Returns
    ``(counts, manifests, lock entry)``; raises FetchError/ValueError (nothing of it left in staging)."""
    path, sha, mirror, notes, limit = _obtain(spec, archive, placed, lock, opts)
    tree = staging / f".extract-{n}"
    moved = []
    try:
        extract(path, tree, max_bytes=4 * limit if limit else None, max_members=member_limit(spec, archive, lock),
                progress=opts["progress"])
        doms = [spec.domain(d) for d in archive.domains if d in needed]
        found = locate(spec, doms, tree, partial=placed and not archive.urls)  # unknown content: what it has
        for dname, src in found.items():
            folder = _install_folder(spec, spec.domain(dname))
            (staging / folder).parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, staging / folder)
            moved.append(staging / folder)
            origins.add(folder, path, src.relative_to(tree).as_posix())
        for extra in archive.extras:
            hit = locate_extra(tree, extra)
            if hit is not None and not (staging / extra).exists():
                (staging / extra).parent.mkdir(parents=True, exist_ok=True)
                os.replace(hit, staging / extra)
                moved.append(staging / extra)
                origins.add(extra, path, hit.relative_to(tree).as_posix())
        counts, manifests, _ = check_domains(spec, staging, list(found), lock=lock, shown=origins,
                                             manifest=True, verify_images=opts["verify_images"],
                                             progress=opts["progress"])
    except (FetchError, ValueError, DatasetMissingError) as exc:
        for p in moved:
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        kept = (f"\n    ({path} is kept: remove it to download again)" if placed
                else f"\n    (downloaded from {mirror}; kept as {path}: remove it to download again)")
        raise FetchError("; ".join([str(exc)] + notes) + kept) from None
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    for note in notes:
        print(f"{spec.name}: {archive.filename}: {note}", file=sys.stderr)
    entry = {"file": archive.filename, "sha256": sha, "size": path.stat().st_size, "mirror": mirror}
    return counts, manifests, entry


def _install(spec, root, needed, lock, opts):
    """Fetch the ``needed`` domains into ``root``; returns counts, manifests, archive entries and sources."""
    staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.staging-"))
    origins = _Origins(root)
    counts, manifests, used, sources, log = {}, {}, {}, {}, []
    remaining = list(needed)
    try:
        for n, (archive, placed) in enumerate(_candidates(spec, registry.download_dir(spec))):
            if not set(archive.domains) & set(remaining):
                continue
            try:
                c, m, entry = _try_archive(spec, archive, placed, remaining, staging, lock, opts, origins, n)
            except FetchError as exc:
                log.append(f"{archive.key}: " + "\n    ".join(str(exc).splitlines()))
                continue
            counts.update(c)
            manifests.update(m)
            used[archive.key] = entry
            sources.update({d: archive.key for d in c})
            remaining = [d for d in remaining if d not in c]
            if not remaining:
                break
        if remaining:
            raise FetchError(_unavailable(spec, remaining, log))
        for d in needed:
            folder = _install_folder(spec, spec.domain(d))
            (root / folder).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / folder, root / folder)
        for a in spec.archives:
            for extra in a.extras:
                if (staging / extra).exists() and not (root / extra).exists():
                    (root / extra).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(staging / extra, root / extra)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts, manifests, used, sources


def fetch(name: str, *, verify_images: bool = False, retries: int = 3, timeout: float = 60,
          deadline: float | None = None, max_size: int | None = None, progress: bool = True) -> Path:
    """Make dataset ``name`` available under :func:`registry.data_root`, verified; returns the root.

    Domains already in place (fetched before, or placed by hand) are verified, not downloaded. ``timeout``: seconds
    a read may wait; ``deadline``: seconds one download (one mirror, retries included) may take (default: one
    hour plus the size limit at 256 kB/s); ``max_size``: bytes an archive may have (default: twice its declared
    size, or the locked size)."""
    spec = registry.get_dataset(name)
    root = registry.data_root(spec)
    if spec.generated:
        if not all((root / d.folder).is_dir() for d in spec.domains):
            from .demo import generate
            generate(root, progress=progress)
        check_copy(spec, root, verify_images=verify_images, progress=progress)
        return root
    opts = dict(verify_images=verify_images, retries=retries, timeout=timeout, max_size=max_size,
                progress=progress,
                deadline=deadline or 3600 + 2 * max((a.size or 0 for a in spec.archives), default=0) / 256e3)
    if spec.kind != "images":
        missing = [d for d in spec.domains if not (root / d.folder).exists()]
        if missing and spec.archives:
            with _exclusive(root):
                _install_files(spec, root, missing, opts)
        check_copy(spec, registry.require_dataset(spec))
        return root
    with _exclusive(root):
        lock = registry.read_lock(name)
        needed = [d.name for d in spec.domains if not (root / domain_folder(spec, d, root)).exists()]
        present = [d.name for d in spec.domains if d.name not in needed]
        counts, manifests, used, sources = {}, {}, {}, {}
        if present:  # placed by hand (as declared, or without images/) or fetched before: checked before downloading
            try:
                counts, manifests, _ = check_domains(  # bytes too (manifest), as `data verify` checks them
                    spec, root, present, lock=lock, verify_images=verify_images, progress=progress, manifest=True)
            except (ValueError, DatasetMissingError) as exc:
                raise FetchError(str(exc)) from None
            sources = {d: "placed in the data folder" for d in present}
        if needed:
            c, m, used, s = _install(spec, root, needed, lock, opts)
            counts.update(c)
            manifests.update(m)
            sources.update(s)
        _record(name, lock, used, counts, manifests, sources)
    return root


def _install_files(spec: DatasetSpec, root: Path, missing, opts) -> None:
    """Features/arrays datasets: get the files of the ``missing`` domains - each declared file downloaded (or taken
    from the downloads folder) and checked against its pinned sha256, or found inside an archive - into a staging
    folder, then move them into ``root``. Their content is verified afterwards (:func:`verify`)."""
    todo = {d.folder for d in missing}
    staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.staging-"))
    log = []
    try:
        for n, (archive, placed) in enumerate(_candidates(spec, registry.download_dir(spec))):
            files = todo & {spec.domain(d).folder for d in archive.domains}
            if not files:
                continue
            try:
                path, _, _, notes, limit = _obtain(spec, archive, placed, {"archives": {}}, opts)
                if not path.name.lower().endswith(ARCHIVE_SUFFIXES):
                    found = {archive.filename: path} if archive.filename in files else {}
                else:
                    tree = staging / f".extract-{n}"
                    extract(path, tree, max_bytes=4 * limit if limit else None, max_members=MAX_MEMBERS,
                            progress=opts["progress"])
                    found = {f: hit for f in files if (hit := locate_extra(tree, f)) is not None}
                for f, src in found.items():
                    (staging / f).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, staging / f)
            except FetchError as exc:
                log.append(f"{archive.key}: " + "\n    ".join(str(exc).splitlines()))
                continue
            for note in notes:
                print(f"{spec.name}: {archive.filename}: {note}", file=sys.stderr)
            todo -= set(found)
            if not todo:
                break
        if todo:
            raise FetchError(_unavailable(spec, [d.name for d in missing if d.folder in todo], log))
        for f in {d.folder for d in missing}:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / f, root / f)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _record(name: str, lock: dict, used: dict, counts: dict, manifests: dict, sources: dict) -> None:
    """Record what is seen for the first time (archives, and per domain its counts, manifest and source)."""
    changed = False
    for section, new in (("archives", used), ("counts", counts), ("manifest", manifests), ("source", sources)):
        for key, value in new.items():
            if key not in lock[section]:
                lock[section][key] = value
                changed = True
    if changed:
        registry.write_lock(name, lock)


def _unavailable(spec: DatasetSpec, remaining, log) -> str:
    root, dl = registry.data_root(spec), registry.download_dir(spec)
    doms = [spec.domain(d) for d in remaining]
    lines = [f"cannot fetch dataset {spec.name!r}: no source delivered domain(s) {', '.join(remaining)}; put one of "
             f"its archives into {dl}/ or the extracted domain folders under {root}/ "
             f"({placed_by_hand(spec, doms)}), then rerun `python -m dmp data fetch {spec.name}`."]
    lines += ["Tried:"] + [f"  - {entry}" for entry in log] if log else []
    lines.append("Archives that provide them (any file name works in the downloads folder):")
    for a in spec.archives:
        if set(a.domains) & set(remaining):
            where = ", ".join(list(a.urls) + list(a.manual_urls)) or "the publisher"
            lines.append(f"  - {a.filename} (domains {', '.join(a.domains)}) from: {where}")
    lines.append(f"  - or the extracted domain folders ({placed_by_hand(spec, doms)}) "
                 f"under {root}/ (or set DMP_DATA_DIR=<dir> and use <dir>/{spec.name}/)")
    return "\n".join(lines)

