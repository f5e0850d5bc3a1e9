"""What the studies' training runs start from and how one runs: the pre-trained small CNNs (made once) and one
training job on the CPU. Used by ``evidence.py`` and ``partial_lockin.py``."""
from __future__ import annotations

from pathlib import Path

from evidence_studies import WEIGHTS


def pretrained_weights(out_root: Path, only=None) -> dict[str, str]:
    """The pre-trained small CNNs, made once (as the demo pipeline's demo_weights rule does): recipe ``demo``
    for the demo, ``digits`` for mnist_usps (``python -m dmp pretrain-demo --recipe ...``); and the demo images
    (as the demo_data rule does). ``only``: the datasets to run (None: all); a recipe none of them uses is not
    made."""
    from dmp.data import registry, splits
    from dmp.data.demo import generate
    from dmp.train.pretrain import pretrain_backbone
    needed = {r for d, r in WEIGHTS.items() if not only or d in only}
    demo = registry.data_root(registry.get_dataset("demo"))
    if needed and not demo.exists():
        generate(demo)
        splits.prepare("demo")
    paths = {}
    for recipe, name in (("demo", "smallcnn_demo.pt"), ("digits", "smallcnn_gn_digits.pt")):
        paths[recipe] = out_root.parent / "weights" / name
        if recipe in needed and not paths[recipe].exists():
            pretrain_backbone(paths[recipe], recipe)
    return {k: str(v) for k, v in paths.items()}


def run_one(job):
    """Train one ``(config, out folder)`` job on the CPU with one thread (a process pool runs several side by side)."""
    import torch

    from dmp.train import train
    cfg, out = job
    torch.set_num_threads(1)
    train(dict(cfg, threads=1, device="cpu"), out, progress=False)
