"""What a study declares: its runs, each a folder and the config it trains (python -m dmp train's keys), and what
they start from (the pre-trained small CNNs, made once). Snakemake trains each declared run as one job
(workflow/rules/studies.smk, ``python -m studies train <folder>``); nothing here schedules training.

Also the tasks and methods the evidence studies share."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import NamedTuple

from studies.records import EVIDENCE

# source_only_bn: source-only whose BatchNorm statistics also see the target batches, as every DMP variant's do
VANILLA = ["source_only", "source_only_bn", "dmp_no_al", "dmp_no_ds", "dmp"]
PARTIAL = ["source_only", "source_only_bn", "dmp", "dmp_ent"]
OC10 = [("amazon", "dslr"), ("amazon", "webcam"), ("dslr", "amazon"), ("dslr", "webcam"), ("webcam", "amazon"),
        ("webcam", "dslr")]
DEMO = [("solid", "outline"), ("solid", "noisy")]  # the demo tables' tasks (config/demo.yaml)
DIGITS = [("mnist", "usps"), ("usps", "mnist")]
DEMO_ALL = [(a, b) for a in ("solid", "outline", "noisy", "blurry") for b in ("solid", "outline", "noisy", "blurry")
            if a != b]
SEEDS = 3
"""Seeds per task of a study that declares no other count."""

WEIGHTS = {"demo": "demo", "mnist_usps": "digits"}
"""Dataset -> the recipe of its pre-trained small CNN (``python -m dmp pretrain-demo --recipe ...``)."""
WEIGHT_FILES = {"demo": "smallcnn_demo.pt", "digits": "smallcnn_gn_digits.pt"}
"""Recipe -> its file under :data:`WEIGHTS_DIR`."""
WEIGHTS_DIR = EVIDENCE.parent / "weights"
MAKE_LOCK = WEIGHTS_DIR / ".make.lock"
"""The lock of what runs make on demand (:func:`waiting_lock`; beside the weights, which git ignores)."""


class Run(NamedTuple):
    """One declared run: ``folder`` under ``root`` (the evidence studies': :data:`studies.records.EVIDENCE`), the
    ``config`` it trains, what it writes there (``output``: metrics.json for a training run; a diagnosis writes its
    own file) and how it is made (``kind``: ``train``, :func:`train` with the config's values; ``dmp train``, the
    command line with the config's ``key=value`` words, as a user types it; or a diagnosis of
    :data:`studies.catalog.MAKERS`)."""
    folder: Path
    config: dict
    output: str = "metrics.json"
    root: Path = EVIDENCE
    kind: str = "train"

    @property
    def path(self) -> Path:
        """The run's folder."""
        return self.root / self.folder

    @property
    def weights(self) -> str | None:
        """The recipe of the pre-trained CNN the run loads (None: it loads none of them)."""
        path = self.config.get("weights_path")
        return next((r for r, name in WEIGHT_FILES.items() if path and Path(path).name == name), None)


def weights_path(recipe: str) -> str:
    """Where the pre-trained CNN of ``recipe`` is made (absolute, as the runs record it)."""
    return str(WEIGHTS_DIR / WEIGHT_FILES[recipe])


def run(study: str, dataset: str, setting: str, task, method: str, seed: int, variant: str = "default",
        output: str = "metrics.json", kind: str = "train", **extra) -> Run:
    """The run of ``method`` on ``task`` (source, target) in ``study``: its folder
    ``<study>/<dataset>/<setting>/<source>-<target>/<method>/<variant>/seed<k>`` and its config (``extra``: the
    keys the variant changes; the dataset's pre-trained CNN unless ``extra`` names its own weights), made as
    ``kind`` (:class:`Run`)."""
    cfg = dict(dataset=dataset, setting=setting, source=task[0], target=task[1], method=method, seed=seed, **extra)
    if dataset in WEIGHTS and "weights_path" not in extra:
        cfg["weights_path"] = weights_path(WEIGHTS[dataset])
    return Run(Path(study, dataset, setting, f"{task[0]}-{task[1]}", method, variant, f"seed{seed}"), cfg, output,
               kind=kind)


def variant_folder(name: str) -> str:
    """A variant's label as its run folder name."""
    return name.replace(" ", "_").replace(",", "")


@contextlib.contextmanager
def waiting_lock(path: Path):
    """Hold an exclusive ``fcntl.flock`` on ``path`` for the ``with`` block, waiting for another process that holds
    it: what two jobs that both need one file made on demand share."""
    import fcntl
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def make_weights(recipe: str) -> Path:
    """The pre-trained small CNN of ``recipe`` (as the demo pipeline's demo_weights rule makes it), and the demo
    images it is pre-trained beside (as the demo_data rule makes them), each made where it is absent. Made on demand
    by the first run that loads it, not a step of the DAG: the file is not committed, so a fresh clone would
    otherwise retrain every committed run that loads it."""
    from dmp.train.pretrain import pretrain_backbone
    path = Path(weights_path(recipe))
    with waiting_lock(MAKE_LOCK):
        demo_images()
        if not path.exists():
            pretrain_backbone(path, recipe)
    return path


def demo_images() -> None:
    """Generate the demo's images and lists where they are absent."""
    from dmp.data import registry, splits
    from dmp.data.demo import generate
    demo = registry.data_root(registry.get_dataset("demo"))
    if not demo.exists():
        generate(demo)
        splits.prepare("demo")


def train(declared: Run) -> None:
    """Train one declared run into its folder on the CPU with one thread (one Snakemake job)."""
    import torch

    from dmp.train import train as train_run
    torch.set_num_threads(1)
    train_run(dict(declared.config, threads=1, device="cpu"), declared.path, progress=False)


def dmp_train(declared: Run) -> None:
    """``dmp train --out <folder> key=value ...`` of one declared run (one Snakemake job)."""
    from dmp.cli import main
    main(["train", "--out", str(declared.path), *(f"{k}={v}" for k, v in declared.config.items())])
