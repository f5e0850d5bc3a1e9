"""Fetch and verify datasets: download archives (progress bar, resume, mirrors in turn), check their sha256
(pinned in the registry, or locked in ``datasets/<name>/lock.json`` at the first successful fetch), extract
into a temporary folder, verify per-domain and per-class image counts there, and only then move the domain
folders into :func:`registry.data_root`. Nothing half-downloaded or half-extracted is ever left where the
pipeline reads.
"""
from __future__ import annotations

import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from tqdm import tqdm

from ..io import sha256_file, write_json
from . import registry, splits

CHUNK = 1 << 20


class FetchError(RuntimeError):
    """A dataset could not be fetched or failed verification."""


class _Incomplete(OSError):
    """The server closed the connection before the whole file arrived (resumable)."""


def _http_get(url: str, part: Path, label: str, timeout: float, progress: bool) -> None:
    """Download ``url`` into ``part``, resuming from its current size with an HTTP Range request."""
    start = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "dmp-data/1"}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:  # our partial file is not a prefix of what the server has
            part.unlink()
            raise _Incomplete(f"server refused to resume at byte {start}; restarting") from None
        raise
    with resp:
        length = resp.headers.get("Content-Length")
        if start and resp.status == 206 and (resp.headers.get("Content-Range") or "").startswith(f"bytes {start}-"):
            mode, total = "ab", start + int(length) if length else None
        else:
            mode, start, total = "wb", 0, int(length) if length else None
        if "text/html" in (resp.headers.get("Content-Type") or ""):
            raise ValueError("the server sent an HTML page instead of the archive (a login, quota or "
                             "confirmation page: download it in a browser instead)")
        with open(part, mode) as fh, tqdm(total=total, initial=start, unit="B", unit_scale=True,
                                          unit_divisor=1024, desc=label, disable=not progress) as bar:
            try:
                for block in iter(lambda: resp.read(CHUNK), b""):
                    fh.write(block)
                    bar.update(len(block))
            except (http.client.IncompleteRead, ConnectionError, TimeoutError) as exc:
                raise _Incomplete(f"connection lost after {fh.tell()} bytes: {exc}") from None
    size = part.stat().st_size
    if total is not None and size < total:
        raise _Incomplete(f"got {size} of {total} bytes")


def download(archive: registry.Archive, dest: Path, expected_sha: str | None, *, retries: int = 3,
             timeout: float = 60, progress: bool = True) -> tuple[Path, list[str]]:
    """Get ``archive`` into ``dest`` (a hand-placed file there is used as is), trying each mirror in turn and
    resuming interrupted transfers up to ``retries`` times per mirror. Returns the path and the log of
    failures; raises FetchError (with that log) when no mirror delivered a file with the expected sha256."""
    final = dest / archive.filename
    if final.is_file():
        return final, []
    dest.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + ".part")
    log = []
    for url in archive.urls:
        for attempt in range(1, retries + 1):
            try:
                _http_get(url, part, archive.filename, timeout, progress)
            except _Incomplete as exc:
                log.append(f"{url}: attempt {attempt}: incomplete download ({exc}); will resume")
                continue
            except ValueError as exc:  # an HTML page: not the file
                part.unlink(missing_ok=True)
                log.append(f"{url}: {exc}")
                break
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                log.append(f"{url}: {exc}")
                break
            got = sha256_file(part)
            if expected_sha and got != expected_sha:
                part.unlink()
                log.append(f"{url}: checksum mismatch for {archive.filename}: expected sha256 {expected_sha}, "
                           f"got {got}")
                break
            os.replace(part, final)
            return final, log
        else:
            log.append(f"{url}: gave up after {retries} attempts (partial file kept for resuming: {part})")
    raise FetchError("\n".join(log) or "no direct download URL")


def _extract(path: Path, into: Path, progress: bool) -> None:
    """Extract a tar (any compression) or zip archive safely into ``into``."""
    try:
        if tarfile.is_tarfile(path):
            with tarfile.open(path) as tar:
                members = tar.getmembers()
                for m in tqdm(members, desc=f"extract {path.name}", unit="file", disable=not progress):
                    tar.extract(m, into, filter="data")
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                for info in tqdm(zf.infolist(), desc=f"extract {path.name}", unit="file", disable=not progress):
                    target = (into / info.filename).resolve()
                    if not target.is_relative_to(into.resolve()):
                        raise FetchError(f"{path}: member {info.filename!r} escapes the extraction folder")
                    zf.extract(info, into)
        else:
            raise FetchError(f"{path} is not a tar or zip archive (truncated or corrupt?)")
    except FetchError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise FetchError(f"{path} is truncated or corrupt ({exc.__class__.__name__}: {exc})") from None


def _candidates(spec, archive, domain) -> list[str]:
    top, _, rest = domain.folder.partition("/")
    names = [top] + [a for a, b in archive.aliases if b == top]
    return [f"{n}/{rest}" if rest else n for n in names]


def _locate(spec: registry.DatasetSpec, archive: registry.Archive, tree: Path) -> dict[str, tuple[Path, str]]:
    """Find each domain the archive provides inside the extracted ``tree``: the archive may wrap the domains
    in a top folder, use an alias name, or - for a one-domain archive - hold the class folders directly.
    Returns ``{domain name: (extracted folder, its path relative to the data root)}``."""
    domains = [spec.domain(d) for d in archive.domains]
    dirs = sorted((p for p in tree.rglob("*") if p.is_dir() and len(p.relative_to(tree).parts) <= 4),
                  key=lambda p: (len(p.parts), str(p)))
    for base in [tree] + dirs:
        found = {}
        for d in domains:
            hit = next((c for c in _candidates(spec, archive, d) if (base / c).is_dir()), None)
            if hit is None:
                break
            found[d.name] = (base / hit.split("/")[0], d.folder.split("/")[0])
        else:
            return found
    if len(domains) == 1 and spec.layout == "class_folders":
        for base in [tree] + dirs:
            if sum((base / c).is_dir() for c in spec.classes) > len(spec.classes) // 2:
                return {domains[0].name: (base, domains[0].folder)}
    want = ", ".join(" or ".join(_candidates(spec, archive, d)) for d in domains)
    raise FetchError(f"archive {archive.filename}: cannot find the domain folder(s) {want} inside it")


def check_images(root: Path, rel_paths, progress: bool = True) -> None:
    """Decode every image ``root/rel``; raise FetchError naming the first unreadable one."""
    from PIL import Image

    for rel in tqdm(rel_paths, desc="verify images", unit="img", disable=not progress):
        try:
            with Image.open(root / rel) as img:
                img.load()
        except Exception as exc:  # PIL raises many types for broken files
            raise FetchError(f"unreadable image {rel} (under {root}): {exc.__class__.__name__}: {exc}") from None


def verify(name: str, root: Path | None = None, *, verify_images: bool = False, progress: bool = True,
           lock: dict | None = None, domains=None) -> dict[str, dict[str, int]]:
    """Verify the extracted dataset under ``root`` (default :func:`registry.data_root`): every domain and
    class folder present, image counts as registered and as locked, committed full lists matching the files,
    and (``verify_images``) every image decodable. ``domains``: names to check (default all).
    Returns the per-class counts ``{domain: {class: n}}``."""
    spec = registry.get_dataset(name)
    if spec.kind != "images":
        for d in spec.domains:
            registry.load_arrays(name, d.name)
        return {}
    root = Path(root) if root else registry.require_dataset(name)
    lock = registry.read_lock(name) if lock is None else lock
    counts, files = {}, []
    for d in spec.domains:
        if domains is not None and d.name not in domains:
            continue
        try:
            entries = splits.scan_domain(spec, d, root)
            counts[d.name] = splits.check_counts(spec, d, entries, str(root / d.folder),
                                                 lock["counts"].get(d.name))
        except (ValueError, registry.DatasetMissingError) as exc:
            raise FetchError(str(exc)) from None
        committed = registry.lists_dir(name) / f"{d.name}_full.txt"
        if committed.is_file() and splits.read_list(committed) != entries:
            raise FetchError(f"the images under {root / d.folder} differ from the committed list {committed}: "
                             f"a different version of the dataset (or run `python -m dmp data prepare {name}`)")
        files += [p for p, _ in entries]
    if verify_images:
        check_images(root, files, progress)
    return counts


def fetch(name: str, *, verify_images: bool = False, retries: int = 3, timeout: float = 60,
          progress: bool = True) -> Path:
    """Make dataset ``name`` available under :func:`registry.data_root` and verified; returns the root.

    Domains already in place (fetched before, or placed by hand) are verified, not downloaded. Archives
    found in :func:`registry.download_dir` (placed by hand) are used without downloading."""
    spec = registry.get_dataset(name)
    root = registry.data_root(name)
    if spec.generated:
        if not all((root / d.folder).is_dir() for d in spec.domains):
            from .demo import generate
            generate(root, progress=progress)
        verify(name, root, verify_images=verify_images, progress=progress)
        return root
    if spec.kind != "images":
        registry.require_dataset(name)
        verify(name)
        return root
    lock = registry.read_lock(name)
    needed = [d.name for d in spec.domains if not (root / d.folder).exists()]
    if not needed:
        counts = verify(name, root, verify_images=verify_images, progress=progress, lock=lock)
        _record(name, lock, {}, counts)
        return root
    present = [d.name for d in spec.domains if d.name not in needed]
    if present:  # placed by hand or fetched before: check them before downloading the rest
        verify(name, root, verify_images=verify_images, progress=progress, lock=lock, domains=present)
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.staging-"))
    log, used = [], {}
    try:
        remaining = list(needed)
        for archive in spec.archives:
            if not set(archive.domains) & set(remaining):
                continue
            expected = archive.sha256 or lock["archives"].get(archive.filename, {}).get("sha256")
            try:
                path, tries = download(archive, registry.download_dir(name), expected, retries=retries,
                                       timeout=timeout, progress=progress)
                log += tries
                sha = sha256_file(path)
                if expected and sha != expected:
                    raise FetchError(f"{path}: sha256 {sha} does not match the expected {expected} "
                                     f"(a different or damaged file: remove it and fetch again)")
                tree = Path(tempfile.mkdtemp(dir=staging, prefix=".extract-"))
                _extract(path, tree, progress)
                found = _locate(spec, archive, tree)
                for dname in [d for d in archive.domains if d in remaining]:
                    src, rel = found[dname]
                    (staging / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(src, staging / rel)
                for extra in archive.extras:
                    hits = sorted(tree.rglob(extra), key=lambda p: len(p.parts))
                    if hits and not (staging / extra).exists():
                        (staging / extra).parent.mkdir(parents=True, exist_ok=True)
                        os.replace(hits[0], staging / extra)
                shutil.rmtree(tree)
            except FetchError as exc:
                log.append(f"{archive.filename}: {exc}")
                continue
            used[archive.filename] = {"sha256": sha, "size": path.stat().st_size}
            remaining = [d for d in remaining if d not in archive.domains]
        if remaining:
            raise FetchError(_unavailable(spec, remaining, log))
        try:
            counts = verify(name, staging, verify_images=verify_images, progress=progress, lock=lock,
                            domains=needed)
        except FetchError as exc:
            raise FetchError(f"{exc}\nNothing was installed. If the archive(s) {', '.join(used)} in "
                             f"{registry.download_dir(name)} are damaged or another version, remove them and "
                             f"fetch again.") from None
        for item in sorted(staging.iterdir()):
            if item.name.startswith(".extract-"):
                continue
            if not (root / item.name).exists():
                root.mkdir(parents=True, exist_ok=True)
                os.replace(item, root / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _record(name, lock, used, counts)
    verify(name, root, progress=progress)
    return root


def _record(name: str, lock: dict, used: dict, counts: dict) -> None:
    """Record archive checksums and per-class counts seen for the first time in the lock file."""
    new = {k: v for k, v in used.items() if k not in lock["archives"]}
    new_counts = {k: v for k, v in counts.items() if k not in lock["counts"]}
    if new or new_counts:
        lock["archives"].update(new)
        lock["counts"].update(new_counts)
        write_json(registry.lock_path(name), lock)


def _unavailable(spec: registry.DatasetSpec, remaining, log) -> str:
    root, dl = registry.data_root(spec.name), registry.download_dir(spec.name)
    lines = [f"cannot fetch dataset {spec.name!r}: no source delivered domain(s) {', '.join(remaining)}."]
    lines += ["Tried:"] + [f"  - {entry}" for entry in log] if log else []
    lines.append("Get it by hand, then rerun `python -m dmp data fetch " + spec.name + "`:")
    for a in spec.archives:
        if set(a.domains) & set(remaining):
            where = list(a.urls) + list(a.manual_urls)
            lines.append(f"  - save {a.filename} (domains {', '.join(a.domains)}) into {dl}/ ; from: "
                         + (", ".join(where) or "the publisher"))
    lines.append(f"  - or place the extracted domain folders ({', '.join(spec.domain(d).folder for d in remaining)}) "
                 f"under {root}/ (or set DMP_DATA_DIR=<dir> and use <dir>/{spec.name}/)")
    return "\n".join(lines)
