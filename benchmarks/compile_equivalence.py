"""Benchmark (prints figures; not a test): does a compiled DMP step (config ``compile``) train like the eager one?

Two trainers from the same configuration and weights, one with ``compile: off`` and one with ``--compile MODE``
(or, ``--against``, an eager one moved by one float32 rounding of its weights, or with TF32 convolutions: the
yardsticks), train on the same batches for ``--steps`` iterations (every step logged). Prints, per step, both
objectives and the largest relative difference of a logged term; at the end the largest over the steps and that of
the trained models' logits on one batch, the seconds of the second trainer's first step (the compilation: run the
script twice on one machine to see the cost with inductor's on-disk cache warm, as the second job of a suite on that
machine pays it) and the median step time of each (logging every step, so a host read per step).

    python benchmarks/compile_equivalence.py --device cuda --compile step          # CUDA graphs (reduce-overhead)
    python benchmarks/compile_equivalence.py --device cuda --compile step --tf32 off   # is the difference TF32's?
    python benchmarks/compile_equivalence.py --against perturbed     # eager against eager moved by one rounding
    python benchmarks/compile_equivalence.py --against tf32          # eager against eager with TF32 convolutions
    DMP_COMPILE_BACKEND=aot_eager python benchmarks/compile_equivalence.py --backbone identity --steps 4   # CPU

The shapes default to benchmarks/step_overhead.py's (ResNet-50, batch 50, 224 px, layers 1024/512, 31 classes), so
that one's compilation finds this one's graphs in the cache.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmp.config import resolve  # noqa: E402
from dmp.data.inputs import Task, TensorDataset  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402


def tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float32) rounded to TensorFloat-32's 10 mantissa bits (to nearest, ties away from zero), with the
    gradient of the identity."""
    bits = x.detach().contiguous().view(torch.int32)
    rounded = ((bits + 0x1000) & -0x2000).view(torch.float32)
    return x + (rounded - x).detach()


def emulate_tf32_convolutions(model: torch.nn.Module):
    """Every ``Conv2d`` of ``model`` computes with its input and weight rounded to TF32 (float32 accumulation)."""
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            m._conv_forward = (lambda f: lambda x, w, b: f(tf32(x), tf32(w), b))(m._conv_forward)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--in-dim", type=int, default=1024, help="feature dim (identity backbone)")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--classes", type=int, default=31)
    ap.add_argument("--dims", type=int, nargs="+", default=[1024, 512])
    ap.add_argument("--metric", default="G")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batches", type=int, default=4, help="distinct batches, cycled")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--compile", choices=("loss", "step"), default="step")
    ap.add_argument("--against", choices=("compiled", "perturbed", "tf32"), default="compiled",
                    help="perturbed: the second trainer is eager too, its weights moved by one float32 rounding "
                    "(each multiplied by 1 +- 2^-24): how far rounding alone carries a trajectory (the yardstick "
                    "for the compiled one); tf32: eager, its convolutions' inputs and weights rounded to "
                    "TensorFloat-32 (10 mantissa bits, float32 accumulation: what cuDNN does with allow_tf32), "
                    "emulated, for a device without it")
    ap.add_argument("--tf32", choices=("default", "off"), default="default",
                    help="off: no TensorFloat-32 in cuDNN convolutions or matmuls, for both trainers (torch's default "
                    "lets cuDNN use it; rounding of about 1e-3 whose placement differs between kernels)")
    args = ap.parse_args(argv)
    if args.tf32 == "off":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    b, k = args.batch, args.batches
    shape = (args.in_dim,) if args.backbone == "identity" else (3, args.size, args.size)
    x = torch.randn(2 * b * k, *shape, generator=g)
    y = torch.randint(0, args.classes, (2 * b * k,), generator=g)
    ds = TensorDataset(x, y)
    task = Task(ds, ds, ds, ds, [f"c{i}" for i in range(args.classes)], 3,
                args.in_dim if args.backbone == "identity" else None, "benchmark")
    batches = [(x[2 * i * b:(2 * i + 1) * b].to(device), y[2 * i * b:(2 * i + 1) * b].to(device),
                x[(2 * i + 1) * b:(2 * i + 2) * b].to(device)) for i in range(k)]

    def trainer(mode):
        cfg = resolve(dict(dataset="benchmark", source="s", target="t", preset="none", method="dmp",
                           backbone=args.backbone, pretrained=False, batch_size=b, bottleneck_dims=args.dims,
                           metric=args.metric, intra_start=0, iterations=10**6, device=args.device,
                           precision=args.precision, compile=mode, eval_batch_size=b))
        t = Trainer(cfg, task, Path(tempfile.mkdtemp()), progress=False)
        return t

    label = args.compile if args.against == "compiled" else args.against
    eager, comp = trainer("off"), trainer(args.compile if args.against == "compiled" else "off")
    comp.model.load_state_dict(eager.model.state_dict())
    if args.against == "perturbed":
        gp = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for q in comp.model.parameters():
                sign = torch.randint(0, 2, q.shape, generator=gp).to(q.device, q.dtype) * 2 - 1
                q.mul_(1 + sign * 2.0 ** -24)
    if args.against == "tf32":
        emulate_tf32_convolutions(comp.model)
    for t in (eager, comp):
        t.refresh_anchors()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = {"off": [], label: []}
    worst, first = 0.0, None
    print(f"backbone={args.backbone} batch={b} dims={args.dims} device="
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'} precision={args.precision} "
          f"torch={torch.__version__} against={label} steps={args.steps} tf32={args.tf32}")
    for it in range(args.steps):
        rows = {}
        for name, t in (("off", eager), (label, comp)):
            sync()
            t0 = time.perf_counter()
            rows[name] = t.step(it, *batches[it % k], log=True)
            sync()
            (times[name].append if it or name == "off" else (lambda s: None))(time.perf_counter() - t0)
            if it == 0 and name != "off":
                first = time.perf_counter() - t0
        a, c = rows["off"], rows[label]
        keys = [key for key in a if key not in ("iteration", "lr")]
        rel, term = max((abs(a[key] - c[key]) / max(abs(a[key]), 1e-12), key) for key in keys)
        worst = max(worst, rel)
        print(f"step {it:3d}  loss off {a['loss']:.8g}  {label} {c['loss']:.8g}  max relative difference of "
              f"the logged terms {rel:.2e} ({term}: {a[term]:.8g} against {c[term]:.8g})")
    # The trained functions, compared on a batch with BatchNorm's batch statistics (as in training): a weight
    # comparison would count the biases of the linear layers before BatchNorm, whose gradient is round-off
    # (BatchNorm removes them) and which the optimiser moves by different noise in each run.
    with torch.no_grad():
        outs = [t.forward(batches[0][0])[1].float() for t in (eager, comp)]
    w = ((outs[0] - outs[1]).abs().max() / outs[0].abs().max()).item()
    print(f"largest relative difference over {args.steps} steps: logged terms {worst:.2e}; logits of the trained "
          f"models {w:.2e}")
    print(f"first {'compiled step (compilation)' if args.against == 'compiled' else 'step'} {first:.1f} s; median "
          f"step (logged) off "
          f"{statistics.median(times['off']) * 1e3:.1f} ms, {label} {statistics.median(times[label]) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
