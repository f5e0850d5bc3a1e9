"""The ``data`` command: ``dmp data {list,fetch,verify,prepare,declare,demo,cache,extract-features}``.

:func:`add_subparsers` adds it to the main parser; :func:`main` runs a parsed ``data`` command.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys


def add_subparsers(subparsers, extensions=()) -> argparse.ArgumentParser:
    """Add the ``data`` command (with its sub-commands) to an argparse ``subparsers`` object; each of
    ``extensions`` (``add(sub)``) adds one more sub-command that runs its own ``func``."""
    data = subparsers.add_parser("data", help="fetch, verify, prepare and generate datasets",
                                 description=__doc__.splitlines()[0])
    sub = data.add_subparsers(dest="data_command", required=True)
    p = sub.add_parser("list", help="list the registered datasets")
    p.add_argument("--json", action="store_true", help="print the full registry entries as JSON")
    for cmd, text in (("fetch", "download (or take from the downloads folder), verify and extract a dataset"),
                      ("verify", "verify an extracted dataset (counts, lists; --verify-images decodes all)")):
        p = sub.add_parser(cmd, help=text, description=text)
        p.add_argument("name", help="dataset name (see `data list`)")
        p.add_argument("--verify-images", action="store_true", help="decode every image")
        if cmd == "fetch":
            p.add_argument("--retries", type=int, default=3, help="resumed attempts per mirror")
            p.add_argument("--timeout", type=float, default=60, help="seconds a network read may wait")
            p.add_argument("--deadline", type=float, default=None,
                           help="seconds one download (one mirror, retries included) may take in all "
                                "(default: 1 h plus the size limit at 256 kB/s)")
            p.add_argument("--max-size", type=_size, default=None,
                           help="largest archive accepted, e.g. 500M or 20G (default: twice its declared size)")
    p = sub.add_parser("prepare", help="write the split lists under datasets/<name>/lists")
    p.add_argument("name", help="dataset name (see `data list`)")
    p.add_argument("--splits", nargs="+", default=None,
                   help="splits to write (full, partial, first<N>, n<K>); default: the dataset's protocol splits")
    p = sub.add_parser("declare", help="rewrite datasets/<name>/source.json and splits.json from the registry "
                                       "(the inputs of the DVC stages) and datasets/dvc_stages.yaml (which datasets "
                                       "have stages)")
    p.add_argument("names", nargs="*", help="datasets (default: every built-in image dataset and every "
                                            "datasets/<name>/dataset.yaml of kind images)")
    p = sub.add_parser("demo", help="generate the demo dataset and its lists")
    p.add_argument("--root", default=None, help="output folder (default: the registry's data root of demo)")
    p.add_argument("--no-lists", action="store_true", help="do not (re)write datasets/demo/lists")
    p = sub.add_parser("cache", help="decode and resize every image of a dataset once, for input_cache=on "
                                     "(uint8, 196 KB per image at 256 px)",
                       description="Write the input cache of an image dataset (dmp/data/cache.py): each image of "
                                   "each domain's full list decoded and resized to RESIZE x RESIZE, uint8, beside "
                                   "its data folder. Runs with input_cache=on read it.")
    p.add_argument("name", help="image dataset (see `data list`)")
    p.add_argument("--resize", type=int, default=256, help="the runs' resize (default: 256)")
    p.add_argument("--domains", nargs="+", default=None, help="domains to cache (default: all)")
    p.add_argument("--workers", default="auto", help="decoding processes (default: auto = min(8, cores - 1))")
    for add in extensions:  # commands of a higher layer under `data` (dmp/cli.py: extract-features)
        add(sub)
    data.set_defaults(func=main)
    return data


def _size(text: str) -> int:
    """``500M``, ``20G``, ``1.5e9`` -> bytes."""
    units = {"k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}
    text = text.strip().lower().rstrip("b")
    try:
        return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 500M or 20G)") from None


def _presence(registry, spec) -> str:
    """Whether the dataset's files are on this machine (where the pipeline reads them), for ``data list``; where
    they are not, the command that puts them there."""
    try:
        registry.require_dataset(spec)
    except registry.DatasetMissingError:
        how = place_command(registry, spec)
        if spec.generated:
            return f"not generated (dmp {how})"
        if spec.archives or spec.kind == "images":
            return f"not fetched (dmp {how})"
        return f"not in place ({how})" if how else "not in place"
    return "data in place"


def place_command(registry, spec) -> str:
    """How a dataset's files get where the pipeline reads them, as the words after ``dmp`` (``data fetch NAME``,
    ``data demo``), or for a features dataset that ``extract-features`` wrote, what makes it again (the options its
    ``meta`` records); "" where only the user can place them."""
    if spec.generated:
        return "data demo"
    if spec.archives or spec.kind == "images":
        return f"data fetch {spec.name}"
    meta = {key: json.loads(value) for key, value in spec.meta}
    if spec.kind != "features" or not {"source_dataset", "backbone"} <= set(meta):
        return ""
    shared = _files_of(registry, spec)
    if shared:  # a dataset.yaml that reads another features dataset's files (e.g. without their stored views)
        return f"its files are {shared}'s: make that one"
    options = [f"data extract-features {meta['source_dataset']} --out-name {spec.name} --backbone {meta['backbone']}"]
    if meta.get("weights_path"):
        options.append(f"--weights-path {meta['weights_path']}")
    if meta.get("pretrained") is False:
        options.append("--no-pretrained")
    if meta.get("split", "full") != "full":
        options.append(f"--split {meta['split']}")
    transform = str(meta.get("transform", ""))
    for key, default, pattern in (("resize", 256, r"Resize\(size=\((\d+)"), ("crop", 224, r"CenterCrop\(size=\((\d+)")):
        found = re.search(pattern, transform)
        value = meta.get(key, int(found.group(1)) if found else default)
        if value != default:
            options.append(f"--{key} {value}")
    if meta.get("views"):
        options.append(f"--views {meta['views']}")
    if meta.get("trunk_stage"):
        options.append(f"--trunk-stage {meta['trunk_stage']}")
    elif meta.get("trunk") and not meta.get("views"):
        options.append("--trunk")
    yml = registry.dataset_dir(spec.name) / "dataset.yaml"  # extract-features never replaces a declaration
    shown = yml if os.path.relpath(yml).startswith("..") else os.path.relpath(yml)
    return f"make it: move {shown} aside, then dmp {' '.join(options)}"


def _files_of(registry, spec) -> str:
    """The other registered dataset whose own data folder (``datasets/<name>/data``) ``spec`` reads, or ""."""
    root = registry.data_root(spec).resolve()
    owners = [n for n in registry.dataset_names() if (registry.dataset_dir(n) / "data").resolve() == root]
    return "" if spec.name in owners else next(iter(owners), "")


def main(args) -> int:
    """Run a parsed ``data`` command and return 0; on any error print one line ``error: ...`` (a system error names
    its path) and exit 2, or raise it with ``args.debug`` (``dmp --debug data ...``: the traceback)."""
    if getattr(args, "debug", False):
        return _run(args)
    from ..commands import error_message
    from .registry import FetchError

    try:
        return _run(args)
    except BrokenPipeError:  # `dmp data list | head -1`: ended quietly by the command's runner (dmp/commands.py)
        raise
    except Exception as exc:  # noqa: BLE001 (every error is one line, as every other command's)
        print(f"error: {exc if isinstance(exc, FetchError) else error_message(exc)}", file=sys.stderr)
        raise SystemExit(2) from None


def _run(args) -> int:
    """Run a parsed ``data`` command and return 0."""
    from . import declare, fetch, registry, splits, verify
    from .spec import as_dict

    cmd = args.data_command
    if cmd == "list":
        broken = registry.broken_declarations()
        specs = []
        for n in registry.dataset_names():
            try:  # a user dataset whose classes are read from its data may fail only now
                specs += [] if n in broken else [registry.get_dataset(n)]
            except ValueError as exc:
                broken[n] = str(exc)
        if args.json:
            print(json.dumps([{**as_dict(s), "data": _presence(registry, s)} for s in specs]
                             + [{"name": n, "broken": why} for n, why in broken.items()], indent=2))
        else:  # columns as wide as their longest entry (the name at least 18), the title and presence last
            rows = [(s.name, s.kind, f"{len(s.classes):3d} classes" if s.classes or not s.classes_from
                     else f"classes from its {s.classes_from} (data not in place)",
                     ", ".join(f"{d.name} ({d.short})" for d in s.domains),
                     f"[{s.title}{f'; {s.release}' if s.release else ''}]  {_presence(registry, s)}") for s in specs]
            width = [max([least, *(len(r[i]) for r in rows)]) for i, least in enumerate((18, 8, 0, 0))]
            width[0] = max([width[0], *map(len, broken)])
            for n, why in broken.items():
                print(f"{n:{width[0]}s} BROKEN   {why}")
            for row in rows:
                print(" ".join(f"{c:{w}s}" for c, w in zip(row[:2], width)) + " "
                      + "  ".join(f"{c:{w}s}" for c, w in zip(row[2:4], width[2:])) + f"  {row[4]}")
    elif cmd == "fetch":
        root = fetch.fetch(args.name, verify_images=args.verify_images, retries=args.retries,
                           timeout=args.timeout, deadline=args.deadline, max_size=args.max_size)
        spec = registry.get_dataset(args.name)
        lists = registry.lists_dir(args.name)
        if (spec.kind == "images" and not spec.generated
                and not all((lists / f"{d.name}_full.txt").is_file() for d in spec.domains)):
            written = splits.prepare(args.name)  # an image dataset's first fetch: its lists, once
            print(f"{args.name}: wrote {len(written)} lists under {lists}")
        print(f"{args.name}: ready in {root}")
    elif cmd == "verify":
        counts = verify.verify(args.name, verify_images=args.verify_images)
        total = {d: sum(c.values()) for d, c in counts.items()}
        if not total:  # features/arrays: the samples of each domain
            spec = registry.get_dataset(args.name)
            total = {d.name: len(splits.load_arrays(spec, d.name)[1]) for d in spec.domains}
        print(f"{args.name}: OK " + ", ".join(f"{d} {n}" for d, n in total.items()))
    elif cmd == "prepare":
        written = splits.prepare(args.name, args.splits)
        print(f"{args.name}: wrote {len(written)} lists under {registry.lists_dir(args.name)}")
    elif cmd == "declare":
        written = declare.write(args.names or None)
        print(f"declarations: {len(written)} file(s) rewritten" + "".join(f"\n  {p}" for p in written))
        for name, why in declare.stage_lists()[1].items():  # a lab's dataset DVC cannot version from here
            print(f"{name}: no DVC stage in this repository: {why}")
    elif cmd == "demo":
        from pathlib import Path

        from .demo import generate

        root = Path(args.root) if args.root else registry.data_root(registry.get_dataset("demo"))
        try:
            root = generate(root)
        except OSError as exc:  # its temporary folder beside root: say which folder the user named
            if not exc.strerror:  # the generator's own refusal, which names root itself
                raise
            raise OSError(exc.errno, f"cannot generate the demo dataset in {root}: {exc.strerror}") from exc
        if not args.no_lists:
            splits.prepare("demo", root=root)
        print(f"demo: generated in {root}")
    elif cmd == "cache":
        from ..params import resolve_workers
        from .cache import build

        spec = registry.get_dataset(args.name)
        domains = [spec.domain(d).name for d in args.domains] if args.domains else [d.name for d in spec.domains]
        if args.workers != "auto" and not args.workers.isdigit():
            raise ValueError(f"--workers {args.workers!r}: expected an integer >= 0 or auto")
        for d in domains:
            print(f"{args.name} {d}: {build(args.name, d, args.resize, resolve_workers(args.workers))}")
    return 0


if __name__ == "__main__":
    from ..commands import command_main

    command_main("data", add_subparsers)
