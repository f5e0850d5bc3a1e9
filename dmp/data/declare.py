"""The declaration files DVC stages depend on, written from the registry and committed:
``datasets/<name>/source.json`` (what the fetched or generated data is: domains, classes, expected counts,
layout, archives and pinned checksums - not the mirrors, which do not change the data) and
``datasets/<name>/splits.json`` (what the lists are derived with: classes, partial classes, protocol splits,
the split protocol's version and seed). A stage therefore reruns when the data's declaration changes, not when
the code that fetches it is edited. ``python -m dmp data declare`` rewrites them; a test checks they are current.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..io import write_text
from . import demo, registry, splits
from .spec import DatasetSpec


def source(spec: DatasetSpec) -> dict:
    doc = {"dataset": spec.name, "kind": spec.kind, "layout": spec.layout, "release": spec.release,
           "classes": list(spec.classes),
           "domains": [{"name": d.name, "folder": d.folder, "count": d.count,
                        "class_counts": list(d.class_counts) if d.class_counts else None} for d in spec.domains],
           "images_per_class": spec.images_per_class, "label_lists": [list(x) for x in spec.label_lists]}
    if spec.generated:
        doc["generator"] = demo.declaration()
    else:
        doc["archives"] = [{"key": a.key, "file": a.filename, "domains": list(a.domains), "sha256": a.sha256,
                            "extras": list(a.extras)} for a in spec.archives]
    return doc


def split_rules(spec: DatasetSpec) -> dict:
    return {"dataset": spec.name, "protocol": splits.PROTOCOL, "seed": splits.SEED, "classes": list(spec.classes),
            "partial_classes": list(spec.partial_classes), "splits": list(spec.splits)}


def declared() -> list[str]:
    """The datasets with declaration files: every built-in image dataset."""
    from .catalog import BUILTIN
    return [s.name for s in BUILTIN if s.kind == "images"]


def render(name: str) -> dict[Path, str]:
    """``{path: text}`` of the declaration files of ``name``."""
    spec = registry.get_dataset(name)
    return {registry.dataset_dir(name) / f: _dump(doc)
            for f, doc in (("source.json", source(spec)), ("splits.json", split_rules(spec)))}


def _dump(doc: dict) -> str:
    """Indented JSON with lists of plain values on one line."""
    text = json.dumps(doc, indent=1)
    return re.sub(r"\[\n\s*([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]",
                  text) + "\n"


def write(names=None) -> list[Path]:
    """(Re)write the declaration files of ``names`` (default: :func:`declared`) where they changed."""
    written = []
    for name in names or declared():
        for path, text in render(name).items():
            if not path.is_file() or path.read_text() != text:
                write_text(path, text)
                written.append(path)
    return written
