"""Datasets: registry, fetching/verification, split lists, the generated demo dataset and feature files."""
from .registry import (DatasetMissingError, DatasetSpec, Domain, data_root, dataset_names, dataset_version,
                       get_dataset, list_file, load_arrays, require_dataset)

__all__ = ["DatasetMissingError", "DatasetSpec", "Domain", "data_root", "dataset_names", "dataset_version",
           "get_dataset", "list_file", "load_arrays", "require_dataset"]
