"""Verification of an extracted copy of an image dataset: the full list of every domain read from the files
(:func:`scan_domain`), per-domain and per-class counts against the declaration and the lock file
(:func:`check_counts`, which also recognises another registered release of the dataset), every image decoded,
and a per-file manifest hash (:func:`read_files`).

Functions take ``shown``, which turns a path relative to the checked root into what errors print: the final
path under the data root, or the archive member a file came from (a fetch checks a staging folder that is gone
by the time the user reads the error).
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from collections import Counter
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from ..io import sha256_file
from . import registry
from .catalog import PUBLISHED_DUPLICATES, PUBLISHED_ORDER
from .load import open_rgb, read_arrays
from .spec import (IMAGE_EXTENSIONS, DatasetSpec, Domain, bare_folder, declared_path, domain_folder, placed_twice,
                   visible_name)

Shown = Callable[[str], str]


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith("._")



def scan_domain(spec: DatasetSpec, domain: Domain, root: Path, shown: Shown | None = None) -> list[tuple[str, int]]:
    """The full list of one domain from an extracted copy under ``root``: sorted by path, or where the dataset's
    published lists give the classes in another order (:data:`~dmp.data.catalog.PUBLISHED_ORDER`, Office-31),
    class after class in that order, each class's images sorted by path (the published lists, line for line).

    class_folders: every image under ``<folder>/<class>/``, the folder as placed (:func:`~dmp.data.spec.domain_folder`:
    the declared one, or ``<d>/`` for a domain declared as ``<d>/images``; paths name the files that exist); a
    missing or unknown class folder is an error.
    list_files: the domain's label list(s) (CRLF accepted), each entry resolved by file name inside the flat
    ``<folder>`` (the published ImageCLEF lists name class sub-folders that the archive does not have) or, for
    ``list_paths: root``, relative to the root; an entry listed twice is kept twice, as in the published lists."""
    shown = shown or (lambda rel: str(Path(root) / rel))
    if placed_twice(spec, domain, root):
        bare = bare_folder(spec, domain)
        committed = registry.lists_dir(spec.name) / f"{domain.name}_full.txt"
        try:  # the first path the committed list names, as it is written (no other check of the list here)
            first = committed.read_text().split("\n", 1)[0].strip().rsplit(" ", 1)[0]
        except OSError:
            first = ""
        named = (f" (the committed list {committed} names {first}: keep the folders it names)" if first else "")
        raise ValueError(f"domain {domain.name!r} is placed in both accepted layouts, {shown(domain.folder)}/<class>/ "
                         f"and {shown(bare)}/<class>/: keep only one of them{named}")
    folder = domain_folder(spec, domain, root)
    base = root / folder
    if not base.is_dir():
        hint = (f" (nor {shown(bare_folder(spec, domain))}/<class>/, the layout without images/)"
                if bare_folder(spec, domain) else "")
        raise registry.DatasetMissingError(f"domain folder {shown(domain.folder)} (domain {domain.name!r}) "
                                           f"does not exist{hint}")
    entries = []
    if spec.layout == "class_folders":
        present = sorted(p.name for p in base.iterdir() if p.is_dir() and visible_name(p.name))
        missing = [c for c in spec.classes if c not in present]
        unknown = [c for c in present if c not in spec.classes]
        if missing or unknown:
            raise ValueError(f"{shown(folder)}: " + "; ".join(
                s for s in (f"missing class folder(s) {', '.join(missing)}" if missing else "",
                            f"unknown class folder(s) {', '.join(unknown)}" if unknown else "") if s))
        for label, cls in enumerate(spec.classes):
            entries += [(rel, label) for rel in _images_under(root, base / cls, shown)]
    elif spec.layout == "list_files":
        first: dict[str, str] = {}
        for lst in (lst for d, lst in spec.label_lists if d == domain.name):
            if not (root / lst).is_file():
                raise registry.DatasetMissingError(f"label list {shown(lst)} (domain {domain.name!r}) does not "
                                                   f"exist")
            listed = _listed(spec, domain, root, lst, shown)
            twice = next((rel for rel, _ in listed if first.get(rel, lst) != lst), None)
            if twice is not None and spec.name not in PUBLISHED_DUPLICATES:  # e.g. in a train and a test list
                raise ValueError(f"{twice!r} is listed in {shown(first[twice])} and in {shown(lst)}: an image is in "
                                 f"one list of its domain (trained on or scored)")
            first.update((rel, lst) for rel, _ in listed if rel not in first)
            entries += listed
    else:
        raise ValueError(f"dataset {spec.name!r}: unknown layout {spec.layout!r}")
    entries.sort()
    order = PUBLISHED_ORDER.get(spec.name) if spec.layout == "class_folders" else None
    if order and sorted(order) == sorted(spec.classes):
        rank = {spec.classes.index(c): i for i, c in enumerate(order)}
        entries.sort(key=lambda e: rank[e[1]])  # stable: by path within each class
    if not entries:
        raise ValueError(f"{shown(folder)}: no images found for domain {domain.name!r}")
    return entries


def _images_under(root: Path, folder: Path, shown: Shown) -> list[str]:
    """The image files under ``folder`` (relative to ``root``, sorted by folder then name), symlinked sub-folders
    followed (a link back to a folder above is an error, as is a name a list line cannot hold)."""
    out, seen = [], set()
    for dirpath, dirnames, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(dirpath)
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        if real in seen:
            raise ValueError(f"{shown(rel_dir)}: reached a second time through a symbolic link (a loop, or two links to one folder)")
        seen.add(real)
        dirnames[:] = sorted(d for d in dirnames if visible_name(d))
        for name in [*dirnames, *files]:
            if "\n" in name or "\r" in name:
                raise ValueError(f"{shown(rel_dir)}: the name {name!r} holds a line break, which a list line cannot "
                                 f"hold; rename it")
        out += [f"{rel_dir}/{f}" for f in sorted(files) if _is_image(f)]
    return out


def _listed(spec: DatasetSpec, domain: Domain, root: Path, lst: str, shown: Shown) -> list[tuple[str, int]]:
    """The entries of one label list, each file checked; ``spec.list_paths``: "root" = paths relative to the root,
    "in_folder" = the file name inside the domain folder."""
    entries = []
    for rel, label in registry.read_list(root / lst, len(spec.classes), shown(lst),
                                         duplicates=spec.name in PUBLISHED_DUPLICATES,
                                         relative=spec.list_paths == "root"):
        rel = rel.replace(chr(92), "/")
        path = rel if spec.list_paths == "root" else f"{domain.folder}/{rel.rsplit('/', 1)[-1]}"
        if not (root / path).is_file():
            raise registry.DatasetMissingError(f"{shown(path)} (listed in {shown(lst)} as {rel!r}) does not exist")
        entries.append((path, label))
    return entries


def per_class(spec: DatasetSpec, entries) -> dict[str, int]:
    counts = Counter(label for _, label in entries)
    return {c: counts.get(i, 0) for i, c in enumerate(spec.classes)}


def _fmt(n) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


def _release_hint(spec: DatasetSpec, totals: dict[str, int]) -> str:
    """If the domain totals found are those of another registered release of the dataset, say so."""
    for other in registry.releases(spec):
        want = {d.name: d.count for d in other.domains if d.name in totals}
        if want and want == totals:
            def describe(s):
                return (f"{s.release or s.title} ({_fmt(s.total)} images: "
                        + ", ".join(f"{d.name} {_fmt(d.count)}" for d in s.domains) + ")")
            if spec.variant_of is None:
                return (f" These are the counts of {other.title}, {describe(other)}; the paper used "
                        f"{describe(spec)}. The paper suite refuses it. To use that release anyway, select it "
                        f"as the named variant: `python -m dmp data fetch {other.name}` and `dataset={other.name}` "
                        f"(its own counts, lists and version).")
            return (f" These are the counts of {describe(other)}: that is dataset {other.name!r} "
                    f"(`python -m dmp data fetch {other.name}`).")
    return ""


def check_counts(spec: DatasetSpec, found: dict[str, dict[str, int]], lock: dict | None = None,
                 where: Shown | None = None, folders: dict[str, str] | None = None) -> None:
    """Check per-class counts ``{domain: {class: n}}`` against the declaration (domain total, per-class counts
    where published, images per class, every class present) and the counts locked at the first fetch. Raises
    ValueError listing every problem, naming each domain as ``where(domain folder)`` (``folders``: {domain: its
    folder as placed}, default the declared one)."""
    where = where or (lambda rel: rel)
    folders = folders or {}
    problems, totals = [], {}
    for dname, counts in found.items():
        d = spec.domain(dname)
        total = totals[dname] = sum(counts.values())
        issues = []
        empty = [c for c, n in counts.items() if n == 0]
        if empty:
            issues.append(f"no images for class(es) {', '.join(empty)}")
        if d.count is not None and total != d.count:
            issues.append(f"{_fmt(total)} images, expected {_fmt(d.count)}")
        expected = dict(zip(spec.classes, d.class_counts or ())) or (
            {c: spec.images_per_class for c in spec.classes} if spec.images_per_class else {})
        bad = [f"{c}: {counts[c]} (expected {n})" for c, n in expected.items() if counts.get(c) != n]
        if bad:
            issues.append("per-class counts differ from the published ones: " + ", ".join(bad))
        locked = (lock or {}).get("counts", {}).get(dname)
        if locked:
            diff = [f"{c}: locked {locked.get(c)}, found {n}" for c, n in counts.items() if locked.get(c) != n]
            if diff:
                issues.append("per-class counts differ from the lock file "
                              f"{registry.lock_path(spec.name)}: " + ", ".join(diff))
        if issues:
            problems.append(f"{where(folders.get(dname, d.folder))} (domain {dname!r}): " + "; ".join(issues))
    if problems:
        raise ValueError(f"dataset {spec.name!r}: " + "\n".join(problems) + _release_hint(spec, totals))


def read_files(root: Path, rels, *, decode: bool, digest: bool, shown: Shown | None = None,
               progress: bool = True, named: Callable[[str], str] | None = None) -> str | None:
    """Read every file ``root/rel`` once: decode it to RGB (``decode``: an unreadable image is an error naming
    ``shown(rel)``) and/or hash it. Returns the manifest hash (``digest``): sha256 over the sorted unique paths
    (``named(rel)``: as the declared layout names them, :func:`~dmp.data.spec.declared_path`) and each file's sha256, the
    same whichever packaging or accepted layout the files came in."""
    shown = shown or (lambda rel: str(Path(root) / rel))
    named = named or (lambda rel: rel)
    manifest = hashlib.sha256()
    for rel in tqdm(sorted(set(rels), key=named), desc="read images", unit="img", disable=not progress):
        try:
            data = (Path(root) / rel).read_bytes()
            if decode:
                open_rgb(io.BytesIO(data))
        except Exception as exc:  # PIL raises many types for broken files
            raise ValueError(f"unreadable image {shown(rel)}: {exc.__class__.__name__}: {exc}") from None
        if digest:
            manifest.update(f"{named(rel)}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return manifest.hexdigest() if digest else None


def check_domains(spec: DatasetSpec, root: Path, domains, *, lock: dict | None = None, shown: Shown | None = None,
                  verify_images: bool = False, manifest: bool = False, progress: bool = True):
    """Verify ``domains`` of ``spec`` under ``root``: full lists scanned, counts checked (:func:`check_counts`),
    committed full lists matching, images decoded (``verify_images``), manifest hashes computed and compared
    with the lock (``manifest`` or ``verify_images``). Returns ``(counts, manifests, entries)`` per domain."""
    shown = shown or (lambda rel: str(Path(root) / rel))
    lock = lock or {}
    if spec.classes_from and not spec.classes:  # a user dataset's classes, read from this copy (a first fetch)
        spec = dataclasses.replace(spec, classes=registry.data_classes(spec, root))
    entries = {d: scan_domain(spec, spec.domain(d), root, shown) for d in domains}
    folders = {d: domain_folder(spec, spec.domain(d), root) for d in domains}
    counts = {d: per_class(spec, e) for d, e in entries.items()}
    check_counts(spec, counts, lock, shown, folders)
    manifests = {}
    for d, ents in entries.items():
        dom = spec.domain(d)
        committed = registry.lists_dir(spec.name) / f"{d}_full.txt"
        listed = registry.read_list(committed) if committed.is_file() else ents
        if listed != ents:
            def declared(es, dom=dom):
                return [(declared_path(spec, dom, p), lab) for p, lab in es]
            if declared(listed) == declared(ents):
                raise ValueError(f"the committed list {committed} names the images of domain {d!r} in the other "
                                 f"accepted layout than {shown(folders[d])}/<class>/ (with or without images/): "
                                 f"place the class folders as it names them ({listed[0][0]}), or rewrite the lists "
                                 f"for this copy with `python -m dmp data prepare {spec.name}` (another dataset "
                                 f"version)")
            raise ValueError(f"the images of {shown(folders[d])} differ from the committed list "
                             f"{committed}: a different version of the dataset (or run `python -m dmp data "
                             f"prepare {spec.name}`)")
        if verify_images or manifest:
            manifests[d] = read_files(root, [p for p, _ in ents], decode=verify_images, digest=True, shown=shown,
                                      progress=progress, named=lambda rel, dom=dom: declared_path(spec, dom, rel))
            locked = lock.get("manifest", {}).get(d)
            if locked and locked != manifests[d]:
                raise ValueError(f"the files of {shown(folders[d])} (domain {d!r}) differ from the "
                                 f"version locked in {registry.lock_path(spec.name)}: same names and counts, "
                                 f"other bytes (manifest {manifests[d][:12]}, locked {locked[:12]})")
    return counts, manifests, entries


def verify(name: str, root: Path | None = None, *, verify_images: bool = False, progress: bool = True,
           domains=None) -> dict[str, dict[str, int]]:
    """Verify the extracted dataset under ``root`` (default :func:`registry.data_root`) against its declaration,
    lock file and committed lists (:func:`check_domains`); ``verify_images`` also decodes every image and checks
    the manifest. Features/arrays datasets: files with a pinned sha256 checked, every domain read and validated.
    Returns the per-class counts."""
    spec = registry.get_dataset(name)
    root = Path(root) if root and spec.kind == "images" else registry.require_dataset(spec)
    return check_copy(spec, root, verify_images=verify_images, progress=progress, domains=domains)


def check_copy(spec: DatasetSpec, root: Path, *, verify_images: bool = False, progress: bool = True,
               domains=None) -> dict[str, dict[str, int]]:
    """:func:`verify` of the copy of ``spec`` under ``root``."""
    name = spec.name
    if spec.kind != "images":
        for a in spec.archives:
            if a.sha256 and a.filename in {d.folder for d in spec.domains}:
                sha = sha256_file(root / a.filename)
                if sha != a.sha256:
                    raise ValueError(f"{root / a.filename}: sha256 {sha[:16]}... is not the pinned {a.sha256[:16]}... "
                                     f"of the published file ({a.urls[0] if a.urls else a.filename}): another or "
                                     f"damaged copy; remove it and run `python -m dmp data fetch {name}`")
        for d in spec.domains:
            read_arrays(spec, d.name)
        return {}
    names = [d.name for d in spec.domains if domains is None or d.name in domains]
    lock = registry.read_lock(name)
    counts, _, entries = check_domains(spec, root, names, lock=lock, verify_images=verify_images, progress=progress,
                                       manifest=any(d in lock["manifest"] for d in names))
    if spec.generated:
        check_generated(root, [rel for d in names for rel, _ in entries[d]], progress=progress)
    return counts


def check_generated(root: Path, rels, progress: bool = True) -> None:
    """Generated (demo) images: every file must hold the bytes the generator draws for it
    (:func:`dmp.data.demo.render`, saved as :func:`dmp.data.demo.generate` saves it), so an image changed in place
    is found without a lock file, on any machine."""
    from .demo import render

    bad = []
    for rel in tqdm(rels, desc="compare with the generator", unit="img", disable=not progress):
        domain, _, cls, fname = rel.split("/")  # <domain>/images/<class>/<class>_<index>.png
        buf = io.BytesIO()
        render(domain, cls, int(fname.rsplit("_", 1)[1].split(".")[0])).save(buf, format="PNG", optimize=False)
        if (Path(root) / rel).read_bytes() != buf.getvalue():
            bad.append(rel)
    if bad:
        raise ValueError(f"{Path(root) / bad[0]}" + (f" and {len(bad) - 1} other image(s)" if len(bad) > 1 else "")
                         + " differ from what the demo generator draws (changed in place?): regenerate the demo "
                           "with `python -m dmp data demo`")
