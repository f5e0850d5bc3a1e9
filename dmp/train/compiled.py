"""Config ``compile``: the training step through ``torch.compile`` (a host-bound step launches ~1,000 small kernels).

Modes (:func:`resolve_mode`):

* ``off`` - the eager step (:meth:`Trainer.objective` as written): a deterministic run's numbers, bit for bit.
* ``loss`` - the method's loss terms and objective (``method.losses(ctx)`` and ``method.total``, what follows the
  forward passes) compiled; the forward passes and the backward of the network stay eager.
* ``step`` - the whole forward and loss of a step (:meth:`Trainer.objective`) compiled; its backward comes from
  AOTAutograd. On CUDA with the inductor backend it is compiled with ``mode="reduce-overhead"``: the step replays as
  CUDA graphs (static shapes: ``BatchStream`` always yields ``batch_size`` samples).
* ``auto`` (the default) - ``off`` on the CPU and whenever ``deterministic: true`` (bit-reproducibility is the run's
  contract); on CUDA with ``deterministic: false``, :data:`AUTO_CUDA` (``off`` at present: no compiled mode is shown
  equivalent on CUDA), where code that fails to compile would run eagerly (a mode that was asked for fails instead,
  in one line naming the key).

A FUNCTION is compiled, never the model: ``Trainer.model`` stays the ``DMPNet`` (checkpoints keep their
``state_dict`` keys, a run resumes under any mode). Graphs are compiled with ``dynamic=False`` and see no Python
value that changes every step: the iteration reaches a compiled step as :func:`switch_iteration`, the smallest
iteration with the same start switches (``it >= sched["<term>_start_iteration"]``), so a run compiles once per
combination of switches (twice for DMP's intra-class warm-up), and the anchors and class weights are tensors (a
refresh replaces them without a recompilation). The eigen-decompositions of the manifold distances
(``spectral.spectral_function``) run eagerly between compiled graphs (:func:`keep_eager`; a compilation is then a
few graphs): on CUDA ``linalg.eigh`` checks cuSOLVER's error flag on the host, which no CUDA graph can capture, and
the dynamo of torch 2.11 could not trace its autograd function (benchmarks/cuda_probe.py on an H200). Only the
methods that declare ``compilable`` (dmp/methods/base.py), whose terms depend on the iteration through those
switches alone, are compiled; a method that draws per-iteration random masks or follows the training progress
(gradient reversal) would compile a graph per step.

``DMP_COMPILE_BACKEND`` (environment, default ``inductor``) names another ``torch.compile`` backend (``aot_eager``:
the same graph capture and AOTAutograd backward without code generation; the tests use it, inductor costs tens of
seconds of C++ compilation per graph on a CPU).
"""
from __future__ import annotations

import os
import shutil
import time
import warnings

import torch

from ..config import ConfigError

MODES = ("auto", "off", "loss", "step")
# What ``auto`` means on CUDA when the run is not deterministic: ``off``, by measurement (H200, torch 2.11, ResNet-50,
# batch 50; docs/benchmarks.md, results/benchmarks/h200-2026-11-27/). ``loss`` gained nothing measurable (DMP step
# 64.3 ms against 65.6 ms eager). ``step`` (CUDA graphs) is faster (41.0 against 49.7 ms, logged steps, one process;
# 44.2 against 65.6 ms unlogged, two processes) after a compilation of 77.5 s cold or 7.5 s with inductor's cache
# warm, but its objective differed from the eager one by 1e-3 relative at the first step (1e-2 in one term) and the
# trained logits by 10 % after 20 steps. On the CPU the compiled step stays within what one float32 rounding of the
# weights does to the eager step (``compile_equivalence.py --against perturbed``); on CUDA the first-step gap (9.7e-4)
# is the size of TF32's rounding, which cuDNN's convolutions use in both modes (emulated on the CPU, ``--against
# tf32``: 9.6e-4), but that is not measured on a GPU, nor a whole compiled run there: until ``gpu_session.sh``'s
# ``equivalence`` (``--tf32 off``, the yardstick) and ``fullrun`` parts show them, ``step`` is a choice a run makes.
AUTO_CUDA = "off"
BACKEND_ENV = "DMP_COMPILE_BACKEND"


def backend() -> str:
    return os.environ.get(BACKEND_ENV, "inductor")


def resolve_mode(cfg: dict, device: torch.device, method) -> str:
    """The mode a run's ``compile`` key means on ``device`` for ``method`` (``off``, ``loss`` or ``step``); a mode
    that cannot work here raises :class:`ConfigError` naming the key, before any training."""
    mode = cfg["compile"]
    if mode == "auto":
        return AUTO_CUDA if device.type == "cuda" and not cfg["deterministic"] and method.compilable \
            and _unavailable(device) is None else "off"
    if mode == "off":
        return mode
    if not method.compilable:
        raise ConfigError(f"config key 'compile' = {mode!r}: method {method.name!r} depends on the iteration beyond "
                          f"the start switches (progress or per-iteration random masks), so a compiled step would "
                          f"recompile every iteration; compilable methods: {', '.join(_compilable())}; use compile: off")
    why = _unavailable(device)
    if why:
        raise ConfigError(f"config key 'compile' = {mode!r}: torch.compile is unavailable here ({why}); use "
                          f"compile: off")
    return mode


def _compilable() -> list[str]:
    from .. import methods
    return [name for name in methods.names() if methods.get(name).compilable]


def _unavailable(device: torch.device) -> str | None:
    """Why ``torch.compile`` with :func:`backend` cannot run on ``device``, or None."""
    import torch._dynamo

    name = backend()
    if not torch._dynamo.is_dynamo_supported():
        return "torch.compile does not support this Python"
    if name not in torch._dynamo.list_backends(exclude_tags=()):
        return f"no torch.compile backend {name!r} ({BACKEND_ENV})"
    if name == "inductor":
        if device.type == "cuda":
            from torch.utils._triton import has_triton
            if not has_triton():
                return "the inductor backend needs triton on CUDA"
        elif not shutil.which(os.environ.get("CXX", "g++")) and not shutil.which("c++"):
            return "the inductor backend needs a C++ compiler on the CPU (g++)"
    return None


def switch_iteration(it: int, sched: dict) -> int:
    """The smallest iteration with the same start switches as ``it``: ``0`` or the latest
    ``sched["<term>_start_iteration"]`` reached (``s >= t`` for every start ``t`` exactly when ``it >= t``)."""
    return max([0] + [t for k, t in sched.items() if k.endswith("_start_iteration") and t <= it])


def keep_eager():
    """Keep the eigen-decompositions out of compiled graphs (a graph break around ``spectral.spectral_function``,
    :func:`torch.compiler.disable`), once per process; eager runs are unchanged. Applied here, not where the function
    is defined: importing dynamo costs ~1.3 s, which every ``python -m dmp`` command would pay."""
    from ..manifolds import spectral

    # Dynamo traces the functions behind ``functools.lru_cache`` (constant masks and signs made from shapes and a
    # device) and warns that it ignores the cache: the traced function is the one cached, so the warning is noise.
    warnings.filterwarnings("ignore", message="Dynamo detected a call to a `functools.lru_cache`-wrapped function")
    if not getattr(spectral.spectral_function, "_dmp_kept_eager", False):
        wrapped = torch.compiler.disable(spectral.spectral_function)
        wrapped._dmp_kept_eager = True
        spectral.spectral_function = wrapped


def losses_and_total(method, ctx, ce):
    """The method's terms and objective of one step: ``(total, terms)`` (what ``compile: loss`` compiles)."""
    terms = method.losses(ctx)
    return method.total(ce, terms, ctx), terms


class Step:
    """The forward and loss of a trainer's step under mode ``mode``: ``step(it, progress, xs, ys, xt, weights)``
    returns :meth:`Trainer.objective`'s ``(loss, parts, source features, target softmax)``; ``loss(ctx, ce)`` is
    :func:`losses_and_total` (compiled in mode ``loss``).

    ``fallback`` (a mode chosen by ``compile: auto``, not asked for): code that fails to compile runs eagerly, with
    dynamo's warning (``suppress_errors``: the frame runs once, eagerly), instead of ending the run."""

    def __init__(self, trainer, mode: str, fallback: bool = False):
        self.mode, self.trainer, self.fallback = mode, trainer, fallback
        self._announced: set = set()  # the switch iterations whose compilation was announced
        self.cuda_graphs = mode == "step" and trainer.device.type == "cuda" and backend() == "inductor"
        method = trainer.method
        if mode != "off":
            keep_eager()

        def loss(ctx, ce):
            return losses_and_total(method, ctx, ce)

        self.loss = self._compile(loss) if mode == "loss" else loss
        self._objective = self._compile(trainer.objective) if mode == "step" else trainer.objective

    def _compile(self, fn):
        fn = compile_function(fn, self.cuda_graphs)
        return torch._dynamo.config.patch(suppress_errors=True)(fn) if self.fallback else fn

    def __call__(self, it, progress, xs, ys, xt, weights):
        if self.mode == "off":
            return self._objective(it, progress, xs, ys, xt, weights)
        sched = self.trainer.sched
        it = switch_iteration(it, sched)
        progress = it / sched["iterations"]
        announce = it not in self._announced and self.trainer.progress  # a new combination of switches: compiles
        if announce:
            self._announced.add(it)
            from tqdm import tqdm
            what = "the step" if self.mode == "step" else "the loss terms"
            tqdm.write(f"compile: {self.mode}: compiling {what} for the switches of iteration {it} (a minute or more "
                       f"with a cold inductor cache, seconds with a warm one: docs/benchmarks.md)")
            start = time.perf_counter()
        if self.mode == "step":  # the batches reach the graph on the device (copies are no graph operation)
            xs, xt = self.trainer.to_device(xs), None if xt is None else self.trainer.to_device(xt)
            if self.cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()  # the last step's outputs are read: reuse their memory
        try:
            out = self._objective(it, progress, xs, ys, xt, weights)
        except torch._dynamo.exc.TorchDynamoException as exc:  # graph capture or the backend failed
            cause = getattr(exc, "inner_exception", None) or exc  # (the backend's own error)
            text = str(cause).strip()
            why = f"{type(cause).__name__}: {text.splitlines()[0][:200]}" if text else type(cause).__name__
            raise ConfigError(f"config key 'compile' = {self.mode!r}: torch.compile failed ({why}); use "
                              f"compile: off") from None
        if announce:  # measured here: the forward's graphs (a backward graph compiles in the first backward pass)
            tqdm.write(f"compile: {self.mode}: forward compiled in {time.perf_counter() - start:.1f} s")
        return out


def compile_function(fn, cuda_graphs: bool):
    """``torch.compile(fn)`` as a mode compiles it: :func:`backend`, static shapes, and CUDA graphs
    (``mode="reduce-overhead"``) when ``cuda_graphs`` (mode ``step`` on CUDA with inductor; the benchmarks compile
    their eager references with it too)."""
    return torch.compile(fn, backend=backend(), dynamic=False, **(dict(mode="reduce-overhead") if cuda_graphs else {}))
