"""The declaration files DVC stages depend on, written from the registry and committed:
``datasets/<name>/source.json`` (what the fetched or generated data is: domains, classes, expected counts,
layout, archives and pinned checksums - not the mirrors, which do not change the data) and
``datasets/<name>/splits.json`` (what the lists are derived with: classes, partial classes, protocol splits,
the split protocol's version and seed). A stage therefore reruns when the data's declaration changes, not when
the code that fetches it is edited. ``python -m dmp data declare`` rewrites them; a test checks they are current.

It also writes ``datasets/dvc_stages.yaml``, the lists of datasets dvc.yaml's ``fetch@<name>`` (the built-in
benchmarks: public data DVC pins but keeps no copy of), ``fetch_own@<name>`` (a lab's own, cached so that ``dvc
push`` / ``dvc pull`` store and restore it) and ``prepare@<name>`` stages iterate over (read through dvc.yaml's
``vars:``): every built-in image dataset and every image dataset declared in the checkout's
``datasets/<name>/dataset.yaml`` with its images in ``datasets/<name>/data``, so a lab's own dataset is fetched,
prepared and versioned by ``dvc repro`` as the built-ins are. A dataset declared outside the checkout (``DMP_DATASETS_DIR``) or with its images elsewhere
cannot be a stage of this repository (a DVC output lives inside it): :func:`stage_lists` says why for each.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..io import write_text
from . import demo, registry, splits
from .catalog import PUBLISHED_ORDER
from .spec import DatasetSpec


def source(spec: DatasetSpec) -> dict:
    doc = {"dataset": spec.name, "kind": spec.kind, "layout": spec.layout, "release": spec.release,
           "classes": list(spec.classes),
           "domains": [{"name": d.name, "folder": d.folder, "count": d.count,
                        "class_counts": list(d.class_counts) if d.class_counts else None} for d in spec.domains],
           "images_per_class": spec.images_per_class, "label_lists": [list(x) for x in spec.label_lists]}
    if spec.classes_from:  # a user dataset whose classes are read from its data: how, not what (no data yet)
        doc["classes_from"] = spec.classes_from
    if spec.generated:
        doc["generator"] = demo.declaration()
    else:
        doc["archives"] = [{"key": a.key, "file": a.filename, "domains": list(a.domains), "sha256": a.sha256,
                            "extras": list(a.extras)} for a in spec.archives]
    return doc


def split_rules(spec: DatasetSpec) -> dict:
    doc = {"dataset": spec.name, "protocol": splits.PROTOCOL, "seed": splits.SEED, "classes": list(spec.classes),
           "partial_classes": list(spec.partial_classes), "splits": list(spec.splits)}
    if spec.partial_names:  # named partial classes of a user dataset whose classes are read from its data
        doc["partial_classes"] = list(spec.partial_names)
    if spec.eval_lists:  # the lists whose images are scored apart (lists/train/, lists/eval/)
        doc["eval_lists"] = [list(x) for x in spec.eval_lists]
    if spec.name in PUBLISHED_ORDER and spec.layout == "class_folders":  # the full lists' class order (published)
        doc["list_order"] = list(PUBLISHED_ORDER[spec.name])
    return doc


STAGES_FILE = "dvc_stages.yaml"
"""In ``datasets/``: the datasets of dvc.yaml's foreach stages (:func:`stage_lists`)."""


def _user_images() -> dict[str, str]:
    """``{name: why it gets no DVC stage, or ''}`` of the user image datasets (``dataset.yaml``, broken ones
    included; features/arrays declarations are files placed by hand, not stages)."""
    from .catalog import BUILTIN

    builtin, broken, out = {s.name for s in BUILTIN}, registry.broken_declarations(), {}
    for name in sorted(n for n in registry.dataset_names() if n not in builtin):
        folder = registry.dataset_dir(name)
        where = "docs/datasets.md, 'DVC'"
        if folder.parent.resolve() != registry.DATASETS_DIR.resolve():
            out[name] = (f"declared in {folder}, outside this checkout: a DVC stage's output lives inside its "
                         f"repository, so version it with a dvc.yaml beside the declaration ({where})")
        elif name in broken:
            out[name] = f"its declaration cannot be read: {broken[name]}"
        else:
            spec = registry.get_dataset(name, classes_from_data=False)
            if spec.kind != "images":
                continue
            if Path(spec.default_root or "") != (folder / "data").resolve():
                out[name] = (f"its images are in {spec.default_root} (root:), not in {folder / 'data'}: a DVC output "
                             f"lives inside the repository ({where})")
            else:
                out[name] = ""
    return out


def declared() -> list[str]:
    """The datasets with declaration files: every built-in image dataset, then the image datasets declared in this
    checkout's ``datasets/<name>/dataset.yaml`` with their images in ``datasets/<name>/data``."""
    from .catalog import BUILTIN
    return [s.name for s in BUILTIN if s.kind == "images"] + [n for n, why in _user_images().items() if not why]


def stage_lists() -> tuple[dict[str, list[str]], dict[str, str]]:
    """``({"fetch": names, "fetch_own": names, "prepare": names}, {name: why not})``: the datasets of dvc.yaml's
    ``fetch@<name>`` stage (the built-in ones with archives to download; not a named release such as
    ``officehome_15913``, fetched by name), ``fetch_own@<name>`` stage (the same of the datasets declared in the
    checkout) and ``prepare@<name>`` stage (every declared image dataset but a named release), and the user image
    datasets that cannot have one, with the reason (one line each)."""
    from .catalog import BUILTIN

    builtin = {s.name for s in BUILTIN}
    lists = {"fetch": [], "fetch_own": [], "prepare": []}
    for name in declared():
        spec = registry.get_dataset(name, classes_from_data=False)
        if spec.variant_of:
            continue
        if spec.archives and not spec.generated:
            lists["fetch" if name in builtin else "fetch_own"].append(name)
        lists["prepare"].append(name)
    return lists, {n: why for n, why in _user_images().items() if why}


def render_stages() -> str:
    """The text of ``datasets/dvc_stages.yaml``."""
    lists, _ = stage_lists()
    return ("# The datasets of dvc.yaml's fetch@<name>, fetch_own@<name> and prepare@<name> stages, written from the\n"
            "# registry (built-in and datasets/<name>/dataset.yaml) by `python -m dmp data declare`: do not edit.\n"
            + "".join(f"{k}: {json.dumps(v)}\n" for k, v in lists.items()))


def render(name: str) -> dict[Path, str]:
    """``{path: text}`` of the declaration files of ``name``."""
    spec = registry.get_dataset(name, classes_from_data=False)
    return {registry.dataset_dir(name) / f: _dump(doc)
            for f, doc in (("source.json", source(spec)), ("splits.json", split_rules(spec)))}


def _dump(doc: dict) -> str:
    """Indented JSON with lists of plain values on one line."""
    text = json.dumps(doc, indent=1)
    return re.sub(r"\[\n\s*([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]",
                  text) + "\n"


def write(names=None) -> list[Path]:
    """(Re)write the declaration files of ``names`` (default: :func:`declared`) and ``datasets/dvc_stages.yaml``
    where they changed."""
    refused = {n: why for n, why in _user_images().items() if why and n in (names or ())}
    if refused:  # named on the command line: nothing is written for it, nor for the others
        name = next(iter(refused))
        raise ValueError(f"{name}: no declaration files in this repository: {refused[name]}")
    written = []
    files = [render(name) for name in names or declared()] + [{registry.DATASETS_DIR / STAGES_FILE: render_stages()}]
    for rendered in files:
        for path, text in rendered.items():
            if not path.is_file() or path.read_text() != text:
                write_text(path, text)
                written.append(path)
    return written
