"""The developers' read-only copies of the two evidence datasets, kept beside the checkout (``../shared/data``), put
where a user puts their own copy: a link at the dataset's data folder (``datasets/<name>/data``, or
``$DMP_DATA_DIR/<name>``), made only where nothing is there yet. The package dmp knows no path outside the
repository; a study's run links them before it trains (``python -m studies run``), the tests that read them link
them under a temporary ``DMP_DATA_DIR`` (and are skipped where they are absent).

    python -m studies link-shared      # link them once, by hand
"""
from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
COPIES = {"office_caltech10": "office_caltech10_googlenet", "mnist_usps": "mnist_usps"}
"""Dataset -> its copy's folder under :data:`SHARED`."""


def present() -> bool:
    """Whether every copy is beside the checkout."""
    return all((SHARED / folder).is_dir() for folder in COPIES.values())


def link() -> list[str]:
    """Link each copy that is present at its dataset's data folder where that folder is absent; returns the datasets
    linked by this call."""
    from dmp.data import registry

    linked = []
    for name, folder in COPIES.items():
        copy, place = SHARED / folder, registry.data_root(registry.get_dataset(name))
        if copy.is_dir() and not place.exists() and not place.is_symlink():
            place.parent.mkdir(parents=True, exist_ok=True)
            place.symlink_to(os.path.relpath(copy, place.parent), target_is_directory=True)
            linked.append(name)
    return linked


def main(argv=None) -> int:
    """Link the copies and say which."""
    print("linked: " + (", ".join(link()) or "nothing (in place already, or no copy beside the checkout)"))
    return 0
