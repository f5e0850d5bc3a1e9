"""Archives: safe extraction of tar (any compression) and zip files, and discovery of the dataset's layout in
what was extracted.

Extraction writes regular files only. A member with an absolute path, a ``..`` component, a device or other
special file, or a link leading outside the archive is refused as an attack ("refusing member X: ..."); a link
to a file inside the archive is installed as a copy of that file, so nothing installed can point elsewhere once
wrapper folders are stripped. Packaging junk (``__MACOSX/``, ``._*``) is skipped.

Discovery is by structure, not fixed names: a domain is the shallowest folder whose name matches the domain
(:func:`~dmp.data.spec.folder_key`: ``Real World`` = ``RealWorld`` = ``Real_World``) and that holds class
folders directly or under ``images/`` (class-folder datasets) or image files (list-labelled datasets); a
one-domain archive may also hold the class folders without the domain's folder. The counts decide afterwards.
"""
from __future__ import annotations

import os
import posixpath
import re
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from .registry import FetchError
from .spec import IMAGE_EXTENSIONS, DatasetSpec, Domain, folder_key

MAX_DEPTH = 6


@dataclass
class _Member:
    name: str
    kind: str  # file, dir, symlink, hardlink, special
    size: int = 0
    link: str = ""
    ref: object = None


def _refuse(name: str, why: str) -> FetchError:
    return FetchError(f"refusing member {name!r}: {why} (an unsafe or malicious archive)")


def _parts(name: str) -> tuple[str, ...]:
    n = name.replace("\\", "/")
    if n.startswith("/") or re.match(r"^[A-Za-z]:", n):
        raise _refuse(name, "absolute path")
    parts = tuple(p for p in n.split("/") if p not in ("", "."))
    if ".." in parts:
        raise _refuse(name, "path traversal ('..')")
    return parts


def _junk(parts) -> bool:
    return any(p == "__MACOSX" for p in parts) or (parts and parts[-1].startswith("._"))


def _too_many(path: Path, limit: int) -> FetchError:
    return FetchError(f"{path} has more than {limit:,} members, more than the dataset's images allow: not the "
                      f"expected archive (refused before extraction)")


def _members(path: Path, handle, max_members: int | None = None) -> list[_Member]:
    """The archive's members; more than ``max_members`` is refused as soon as it is seen (a tar is read member by
    member, so an archive of millions of empty members is not listed in full)."""
    out = []
    if isinstance(handle, tarfile.TarFile):
        for m in handle:
            if max_members and len(out) >= max_members:
                raise _too_many(path, max_members)
            kind = ("file" if m.isfile() else "dir" if m.isdir() else "symlink" if m.issym()
                    else "hardlink" if m.islnk() else "special")
            out.append(_Member(m.name, kind, m.size if m.isfile() else 0, m.linkname, m))
    else:
        if max_members and len(handle.infolist()) > max_members:
            raise _too_many(path, max_members)
        for info in handle.infolist():
            mode = info.external_attr >> 16
            if info.is_dir():
                kind = "dir"
            elif stat.S_ISLNK(mode):
                kind = "symlink"
            elif mode and not stat.S_ISREG(mode) and stat.S_IFMT(mode):
                kind = "special"
            else:
                kind = "file"
            link = handle.read(info).decode("utf-8", "replace") if kind == "symlink" else ""
            out.append(_Member(info.filename, kind, info.file_size if kind == "file" else 0, link, info))
    return out


def _link_target(m: _Member, parts) -> tuple[str, ...]:
    target = m.link.replace("\\", "/")
    if target.startswith("/") or re.match(r"^[A-Za-z]:", target):
        raise _refuse(m.name, f"link to the absolute path {m.link!r}")
    base = posixpath.dirname("/".join(parts)) if m.kind == "symlink" else ""
    norm = posixpath.normpath(posixpath.join(base, target))
    if norm == ".." or norm.startswith("../"):
        raise _refuse(m.name, f"link to {m.link!r}, outside the archive")
    return tuple(p for p in norm.split("/") if p not in ("", "."))


def extract(path: Path, into: Path, *, max_bytes: int | None = None, max_members: int | None = None,
            progress: bool = True) -> None:
    """Extract the tar or zip archive ``path`` into ``into`` (see the module docstring for what is refused).
    ``max_bytes`` bounds the total size of the extracted files, ``max_members`` the number of members (files,
    folders and links), both checked before anything is written. A damaged archive raises FetchError naming the
    archive and the member."""
    path, into = Path(path), Path(into)
    current = "(header)"
    try:
        if tarfile.is_tarfile(path):
            handle = tarfile.open(path)
        elif zipfile.is_zipfile(path):
            handle = zipfile.ZipFile(path)
        else:
            raise FetchError(f"{path} is not a tar or zip archive (truncated or corrupt?)")
        with handle:
            members = _members(path, handle, max_members)
            plan, links, total = [], [], 0
            for m in members:
                parts = _parts(m.name)
                if not parts or _junk(parts):
                    continue
                if m.kind == "special":
                    raise _refuse(m.name, "device, pipe or other special file")
                if m.kind in ("symlink", "hardlink"):
                    links.append((parts, _link_target(m, parts), m))
                    continue
                total += m.size
                plan.append((parts, m))
            if max_bytes and total > max_bytes:
                raise FetchError(f"{path} would extract {total:,} bytes, more than the limit of {max_bytes:,} "
                                 f"(not the expected archive, or raise the limit with --max-size)")
            for parts, m in tqdm(plan, desc=f"extract {path.name}", unit="file", disable=not progress):
                current = m.name
                target = into.joinpath(*parts)
                if m.kind == "dir":
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                src = handle.extractfile(m.ref) if isinstance(handle, tarfile.TarFile) else handle.open(m.ref)
                with src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            for parts, target_parts, m in links:  # copies of files inside the archive, never links
                current = m.name
                src = into.joinpath(*target_parts)
                if not target_parts or not src.is_file():
                    raise _refuse(m.name, f"link to {m.link!r}, which is no file of the archive")
                into.joinpath(*parts).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, into.joinpath(*parts))
    except FetchError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError, RuntimeError) as exc:
        raise FetchError(f"{path} is truncated or corrupt (member {current!r}: {exc.__class__.__name__}: "
                         f"{exc})") from None


# ----------------------------------------------------------------------------------------------- discovery
def _dirs(tree: Path) -> list[Path]:
    """Folders of ``tree`` up to MAX_DEPTH levels, shallowest first."""
    found = []
    for dirpath, dirnames, _ in os.walk(tree):
        depth = len(Path(dirpath).relative_to(tree).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__MACOSX")
        if depth >= MAX_DEPTH:
            dirnames[:] = []
        found += [Path(dirpath) / d for d in dirnames]
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


def _class_dir(spec: DatasetSpec, folder: Path) -> Path | None:
    """``folder`` (or its ``images/``) if it holds at least half of the dataset's class folders (classes not known
    yet, read from the folders: if one of its folders holds images)."""
    for cand in (folder, folder / "images"):
        if cand.is_dir():
            names = {p.name for p in cand.iterdir() if p.is_dir()}
            if not spec.classes and spec.classes_from and any(_has_images(cand / n) for n in names):
                return cand
            if len(names & set(spec.classes)) >= max(1, len(spec.classes) // 2):
                return cand
    return None


def _has_images(folder: Path) -> bool:
    return any(f.lower().endswith(IMAGE_EXTENSIONS) for f in os.listdir(folder))


def _keys(domain: Domain) -> set[str]:
    return {folder_key(n) for n in (domain.name, domain.folder.split("/")[0], *domain.aliases)}


def locate(spec: DatasetSpec, domains: list[Domain], tree: Path, partial: bool = False) -> dict[str, Path]:
    """Find each of ``domains`` in the extracted ``tree``: ``{domain name: folder to install as
    <data root>/<domain.folder>}``. Raises FetchError naming what was looked for and the archive's top level when
    one is missing (``partial``: only when none is found, for an archive of unknown content)."""
    dirs = _dirs(tree)
    found = {}
    for d in domains:
        for p in dirs:
            if folder_key(p.name) not in _keys(d):
                continue
            hit = _class_dir(spec, p) if spec.layout == "class_folders" else (
                p if _has_images(p) or spec.list_paths == "root" else None)  # root-relative lists: any layout
            if hit is not None:
                found[d.name] = hit
                break
    if len(domains) == 1 and not found and spec.layout == "class_folders":
        hit = next((h for h in map(lambda p: _class_dir(spec, p), [tree] + dirs) if h is not None), None)
        if hit is not None:
            found[domains[0].name] = hit
    missing = [d for d in domains if d.name not in found]
    if missing and not (partial and found):
        what = "class folders, directly or under images/" if spec.layout == "class_folders" else "image files"
        top = sorted(p.name + ("/" if p.is_dir() else "") for p in tree.iterdir())[:12]
        raise FetchError(f"cannot find the folder of domain(s) {', '.join(d.name for d in missing)} (a folder named "
                         + " or ".join(sorted({n for d in missing for n in (d.folder.split('/')[0], *d.aliases)}))
                         + f" holding {what}); the archive's top level: {', '.join(top) or 'nothing'}")
    return found


def locate_extra(tree: Path, extra: str) -> Path | None:
    """The shallowest path of ``tree`` ending in ``extra`` (e.g. ``list`` or ``train/image_list.txt``)."""
    want = tuple(extra.split("/"))
    hits = [p for p in [*_dirs(tree), *tree.rglob(want[-1])] if p.parts[-len(want):] == want]
    return min(hits, key=lambda p: (len(p.parts), str(p)), default=None)
