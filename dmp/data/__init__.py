"""Datasets. One way through, each module importing only those before it:

spec (what a declaration holds) -> catalog (the built-in declarations, as data) -> registry (lookup, where each
dataset lives, lock file, version) -> load (decoding images to RGB, reading arrays, validated) -> verify (counts,
manifest, images of an extracted copy) -> archive / download -> fetch (mirrors, extraction, verification,
installation) -> splits (lists and protocol splits) -> inputs (torch datasets, the Task of a run).
Beside them: demo (the generated dataset), declare (DVC declaration files), features (extract-features), cli.
"""
from .registry import (DatasetMissingError, FetchError, data_root, dataset_names, dataset_version, get_dataset,
                       list_file, require_dataset)
from .spec import DatasetSpec, Domain
from .splits import load_arrays

__all__ = ["DatasetMissingError", "DatasetSpec", "Domain", "FetchError", "data_root", "dataset_names",
           "dataset_version", "get_dataset", "list_file", "load_arrays", "require_dataset"]
