"""Many runs in one process: K runs of one method, task and config that differ only in their seed, stacked into one
batched model and trained by one step.

Run ``k`` (``k = 0 .. K-1``) has parameters ``theta_k``, buffers ``beta_k`` (BatchNorm's running statistics), its own
batches ``(x^s_k [b, ...], y^s_k [b], x^t_k [b, ...])`` from its own seeded streams, its own anchors and class weights.
The stacked model holds every tensor of the K models stacked along a new leading dimension
(``torch.func.stack_module_state``): ``Theta = [theta_0; ...; theta_{K-1}]``, each ``[K, *shape]``. One step computes

.. math::
    L_k = \\mathcal{L}(\\theta_k, \\beta_k;\\ x^s_k, y^s_k, x^t_k, \\text{anchors}_k, w_k), \\qquad k = 0 .. K-1

and its gradient :math:`g_k = \\partial L_k / \\partial \\theta_k` in one call: ``vmap(grad(objective))`` over ``k``
(``torch.func``), where :meth:`StackedRuns.objective` is the network by ``torch.func.functional_call`` on the run's
slice, then the method's terms and objective exactly as ``Trainer.objective`` computes them. Slice ``k`` of each
stacked gradient ``G = [g_0; ...; g_{K-1}]`` is run ``k``'s own gradient (the same as one backward pass of
:math:`\\sum_k L_k`, since :math:`L_j` does not depend on :math:`\\theta_k` for :math:`j \\ne k`; on the CPU the
transform's batched weight gradients come out in the layout of the single run's and cost half as much). Adam and SGD
(with momentum and weight decay) update each element from that element's gradient and state alone, so one optimiser
over the stacked parameters, with the single run's hyper-parameters and groups, is K optimisers.

BatchNorm in training mode (the manifold layers' BatchNorm1d, a backbone's with ``backbone_bn: train``) updates its
running statistics in place. The buffers are stacked like the parameters and passed to ``vmap`` batched
(``in_dims=0``), so each run's in-place update writes its own slice of the stacked buffer: each run keeps its own
running statistics, as alone. (``torch.func.replace_all_batch_norm_modules_`` would drop the running statistics,
which the evaluation normalises with; it is not used.) A frozen backbone's BatchNorm (``backbone_bn: frozen``) reads
its slice and writes nothing.

Random operations inside the step are refused (``vmap(randomness="error")``): a run alone draws them from the
global generator, K stacked runs cannot draw the same numbers. The registered networks draw none (no dropout).

Equivalence (tests/test_stacked.py, float32 on the CPU): after a few steps, each run's logged values agree with the
run trained alone by ``Trainer.step`` within 1e-5 relative, its parameters, buffers and optimiser moments within 1e-5
of each tensor's largest entry. It is not bit for bit: ``vmap`` turns each run's matrix products into one batched
product, whose kernels round differently from the single product. A parameter whose exact gradient is 0 (a Linear
bias that feeds a BatchNorm in training mode) is moved by Adam in a direction that round-off picks, in either path;
the test checks that its gradient is round-off instead (docs/benchmarks.md, "Many runs in one process").

Scope: the step, the anchor refresh, the transfer of every run's state (weights, running statistics, optimiser
moments, non-finite flag) to and from the K ``Trainer`` objects (:meth:`StackedRuns.write_back`,
:meth:`StackedRuns.load_from_trainers`), so that each trainer writes its own checkpoint, log and ``metrics.json``
exactly as a single run. The run loop: dmp/train/stacked_loop.py (``dmp train --seeds``).
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, stack_module_state, vmap

from .. import methods
from .schedule import lr_factor, set_lr

SEED_FREE = ("seed",)
"""The config keys in which the stacked runs may differ."""


class _RunAnchors:
    """One run's anchors inside the vmapped objective, as the methods read ``StepContext.anchors``: ``ready`` and
    ``on(device)`` -> ``(class means, per layer [c, d_l]; source means, per layer [d_l])`` (the run's slices)."""

    def __init__(self, class_means, means):
        self.class_means, self.means = class_means, means

    @property
    def ready(self) -> bool:
        return self.class_means is not None

    def on(self, device):
        return list(self.class_means), list(self.means)


def check_stackable(trainers) -> None:
    """Raise ``ValueError`` unless ``trainers`` (at least one) can be stacked: the same config but for
    :data:`SEED_FREE`, the same device, a method without extra trained modules (a domain discriminator would be one
    more stacked model: not done), the eager step (``compile: off``), and every run at the same iteration."""
    if not trainers:
        raise ValueError("no runs to stack")
    base = trainers[0]
    for t in trainers[1:]:
        differ = sorted(k for k in set(base.cfg) | set(t.cfg)
                        if k not in SEED_FREE and base.cfg.get(k) != t.cfg.get(k))
        if differ:
            raise ValueError(f"stacked runs differ only in {', '.join(SEED_FREE)}; these differ: {', '.join(differ)}")
        if t.device != base.device or t.iteration != base.iteration:
            raise ValueError("stacked runs share a device and an iteration")
    if base.modules is not None:
        raise ValueError(f"method {base.method.name!r} trains modules besides the network: not stackable")
    if base.compile_mode != "off":
        raise ValueError("stacked runs use the eager step (compile: off)")
    if base.cfg.get("inter_absent") == "skip" and not _batched_matrices(base.device):
        # the CPU path counts the classes present in the batch on the host: a data-dependent shape, no vmap rule
        raise ValueError("inter_absent: skip counts the classes on the host on the CPU path: not stackable")


def _batched_matrices(device) -> bool:
    from ..manifolds.spectral import batching
    return batching(torch.empty(0, device=device))


class StackedRuns:
    """K :class:`~dmp.train.trainer.Trainer` objects of one config but their seeds, trained by one batched step.

    Build after each trainer is built (its model initialised from its own seed, its streams seeded) and, for a
    resumed run, after ``try_resume``: the stacked state is taken from the trainers
    (:meth:`load_from_trainers`). Between stacked steps the trainers' own models and optimisers are stale;
    :meth:`write_back` puts every run's state back into its trainer (before its checkpoint, its anchor pass, its
    evaluation).

    Attributes: ``params`` / ``buffers`` (``{name: [K, *shape]}``, the stacked model), ``opt`` (one optimiser over
    ``params``, the single run's groups and hyper-parameters), ``nonfinite_at`` (``[K]``, each run's first
    iteration with a non-finite loss, -1 if none)."""

    def __init__(self, trainers):
        check_stackable(trainers)
        self.trainers = list(trainers)
        base = self.trainers[0]
        self.K, self.cfg, self.method, self.needs, self.sched = len(trainers), base.cfg, base.method, base.needs, \
            base.sched
        self.device, self.num_classes = base.device, base.task.num_classes
        self.model = copy.deepcopy(base.model).to("meta")  # the structure only: functional_call supplies the tensors
        self.params, self.buffers = stack_module_state([t.model for t in self.trainers])
        names = {id(p): n for n, p in base.model.named_parameters()}
        self._names = [[names[id(p)] for p in g["params"]] for g in base.opt.param_groups]
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [self.params[n] for n in group]}
                  for g, group in zip(base.opt.param_groups, self._names)]
        self.opt = type(base.opt)(groups, **base.opt.defaults)
        self.nonfinite_at = torch.full((self.K,), -1, dtype=torch.long, device=self.device)
        self._head_group = base._head_group
        self._stacked_cache: dict = {}
        self._trained = [n for n, p in self.params.items() if p.requires_grad]  # (a held backbone: no gradient)
        # per run: (gradient of the trained parameters, (loss, parts, accumulated features)), batched over the K runs
        self._vmapped = vmap(grad(self._objective_of_trained, has_aux=True),
                             in_dims=(0, 0, 0, 0, 0, 0, None, None), randomness="error")
        self.load_from_trainers()

    # -- state to and from the trainers ------------------------------------------------------------------
    @torch.no_grad()
    def load_from_trainers(self):
        """Stack every trainer's weights, running statistics, optimiser state and non-finite flag (after a resume)."""
        models = [dict(t.model.named_parameters()) for t in self.trainers]
        bufs = [dict(t.model.named_buffers()) for t in self.trainers]
        for name, stacked in self.params.items():
            stacked.copy_(torch.stack([m[name] for m in models]))
        for name, stacked in self.buffers.items():
            stacked.copy_(torch.stack([b[name] for b in bufs]))
        self.opt.state.clear()
        for g, group in enumerate(self._names):
            for i, name in enumerate(group):
                states = [t.opt.state.get(t.opt.param_groups[g]["params"][i]) for t in self.trainers]
                if states[0]:
                    self.opt.state[self.params[name]] = _stack_state(states)
        for k, t in enumerate(self.trainers):
            self.nonfinite_at[k] = t._nonfinite_at

    @torch.no_grad()
    def write_back(self):
        """Put run ``k``'s slice of every stacked tensor into trainer ``k``: weights, running statistics, optimiser
        state (Adam's step, first and second moments; SGD's momentum) and the non-finite flag. Each trainer then
        holds exactly the state it would hold alone at this iteration (up to :mod:`the step's rounding
        <dmp.train.stacked>`): its ``save_checkpoint``, ``refresh_anchors`` and ``finish`` work unchanged."""
        for k, t in enumerate(self.trainers):
            own = dict(t.model.named_parameters())
            for name, stacked in self.params.items():
                own[name].copy_(stacked[k])
            own = dict(t.model.named_buffers())
            for name, stacked in self.buffers.items():
                own[name].copy_(stacked[k])
            for g, group in enumerate(self._names):
                for i, name in enumerate(group):
                    state = self.opt.state.get(self.params[name])
                    if state:
                        t.opt.state[t.opt.param_groups[g]["params"][i]] = _unstack_state(state, k)
            t._nonfinite_at.copy_(self.nonfinite_at[k])

    def refresh_anchors(self):
        """Each run's anchor refresh (``Trainer.refresh_anchors``) on its own trainer, with its current weights: one
        anchor pass per run, as alone (BatchNorm's running statistics are not touched by it)."""
        self.write_back()
        for t in self.trainers:
            t.refresh_anchors()

    # -- one step ----------------------------------------------------------------------------------------
    def objective(self, params, buffers, xs, ys, extra, it, progress):
        """One run's forward passes and objective, as ``Trainer.objective`` (called by ``vmap`` with the run's
        slices): ``params`` / ``buffers`` ``{name: tensor}`` of one model, ``xs [b, ...]``, ``ys [b]``, ``extra`` a dict
        of the run's ``xt [b, ...]``, ``weights [c]`` (class weights), ``class_means`` (per layer ``[c, d_l]``),
        ``means`` (per layer ``[d_l]``), ``mean_prediction [c]``, each present only where the method reads it. Returns
        ``(loss, {"ce": ..., **terms}, extras)``: scalars, and the source features and target softmax when the anchors
        accumulate over the training batches."""
        cfg, needs = self.cfg, self.needs

        def forward(x):
            with self.trainers[0].autocast():
                feats, logits = functional_call(self.model, (params, buffers), (x,))
            return [f.float() for f in feats], logits.float()

        feats_s, logits_s = forward(xs)
        ce = F.cross_entropy(logits_s, ys)
        anchors = _RunAnchors(extra.get("class_means"), extra.get("means")) if needs.anchors else None
        ctx = methods.StepContext(cfg, it, progress, self.sched, self.num_classes, self.device, feats_s, logits_s, ys,
                                  anchors=anchors, mean_prediction=extra.get("mean_prediction"), modules=None)
        if needs.target == "loss":
            ctx.feats_t, ctx.logits_t = forward(extra["xt"])
            ctx.p_t = torch.softmax(ctx.logits_t, 1)
            ctx.class_weights = extra["weights"]
        elif needs.target == "bn" and "xt" in extra:
            with torch.no_grad():
                forward(extra["xt"])
        terms = self.method.losses(ctx)
        loss = self.method.total(ce, terms, ctx)
        accumulate = {}
        if needs.target == "loss" and cfg["anchor_mode"] == "accumulate":
            accumulate = {"feats_s": [f.detach() for f in feats_s], "p_t": ctx.p_t.detach()}
        return loss, {"ce": ce, **terms}, accumulate

    def _objective_of_trained(self, trained, held, buffers, xs, ys, extra, it, progress):
        """:meth:`objective` as a function of the trained parameters ``trained`` (``torch.func.grad`` differentiates
        its first argument), the held ones ``held`` beside them: ``(loss, (loss, parts, accumulate))``."""
        loss, parts, accumulate = self.objective({**held, **trained}, buffers, xs, ys, extra, it, progress)
        return loss, (loss, parts, accumulate)

    def _extra(self, xt):
        """The per-run inputs of the step besides the source batch, stacked ``[K, ...]`` (anchors and class weights
        stacked once per refresh)."""
        extra = {} if xt is None else {"xt": xt}
        if self.needs.target == "loss":
            extra["weights"] = self._stacked("weights", [t._device_weights() for t in self.trainers])
        anchors = [t.anchors for t in self.trainers]
        if self.needs.anchors and anchors[0].ready:
            extra["class_means"] = [self._stacked(f"class_means{j}", [a.class_means[j] for a in anchors])
                                    for j in range(len(anchors[0].class_means))]
            extra["means"] = [self._stacked(f"means{j}", [a.means[j] for a in anchors])
                              for j in range(len(anchors[0].means))]
        if anchors[0].mean_prediction is not None:
            extra["mean_prediction"] = self._stacked("mean_prediction", [a.mean_prediction for a in anchors])
        return extra

    def _stacked(self, key, tensors):
        """``torch.stack(tensors)``, made again only when one of the tensors is replaced (a refresh)."""
        ids = tuple(id(x) for x in tensors)
        hit = self._stacked_cache.get(key)
        if hit is None or hit[0] != ids:
            hit = self._stacked_cache[key] = (ids, torch.stack(tensors), tensors)  # (holds them: ids stay unique)
        return hit[1]

    def step(self, it, batches, log: bool = True):
        """One iteration of all K runs. ``batches``: per run ``(xs, ys, xt)`` as ``Trainer.step`` takes them (``xt``
        None for a method that reads no target batch), each from the run's own streams. Returns per run the log row
        ``Trainer.step`` returns (a list of K dicts) when ``log``, else None. A non-finite loss of any run raises
        ``FloatingPointError`` naming the run's seed, when read (logging iterations, :meth:`check_finite`)."""
        cfg, needs, lead = self.cfg, self.needs, self.trainers[0]
        self.model.train()
        progress = it / self.sched["iterations"]
        set_lr(self.opt, lr_factor(cfg["lr_schedule"], progress))
        xs = torch.stack([lead.to_device(b[0]) for b in batches])
        ys = torch.stack([b[1].to(self.device, non_blocking=lead.pin_memory) for b in batches])
        xt = None if batches[0][2] is None else torch.stack([lead.to_device(b[2]) for b in batches])
        trained = {n: self.params[n].detach() for n in self._trained}
        held = {n: p.detach() for n, p in self.params.items() if n not in trained}
        grads, (loss, parts, accumulate) = self._vmapped(trained, held, self.buffers, xs, ys, self._extra(xt), it,
                                                         progress)
        self.nonfinite_at.masked_fill_(~torch.isfinite(loss.detach()) & (self.nonfinite_at < 0), it)
        rows = None
        if log:
            table = torch.stack([v.detach().double() for v in (loss, *parts.values())]
                                + [self.nonfinite_at.double()]).tolist()  # [terms + 2][K], one transfer
            *values, first = table
            self.check_finite(it, [int(f) if f < it else -1 for f in first])  # earlier, unlogged steps
            lr = self.opt.param_groups[self._head_group]["lr"]
            rows = []
            for k, t in enumerate(self.trainers):
                if not math.isfinite(values[0][k]):
                    raise FloatingPointError(f"non-finite loss at iteration {it} (seed {t.cfg['seed']}): "
                                             + ", ".join(f"{n}={v[k]:.4g}" for n, v in zip(parts, values[1:])))
                rows.append(dict({n: v[k] for n, v in zip(parts, values[1:])}, iteration=it, lr=lr,
                                 loss=values[0][k]))
        # after the check above: a step that raises leaves every run as it was before it (a run whose partner diverged
        # takes the step again, re-stacked without it: dmp/train/stacked_loop.py)
        if accumulate:
            for k, t in enumerate(self.trainers):
                if needs.anchors:
                    t.anchors.add_source([f[k] for f in accumulate["feats_s"]], ys[k])
                if needs.mean_prediction:
                    t.anchors.add_target(accumulate["p_t"][k])
        for name in self._trained:  # slice k: dL_k / dtheta_k (the module docstring)
            self.params[name].grad = grads[name]
        self.opt.step()
        return rows

    def check_finite(self, it, first=None):
        """Raise if a step up to ``it`` of any run had a non-finite loss (``first``: the K flags, if read)."""
        first = self.nonfinite_at.tolist() if first is None else first
        for t, f in zip(self.trainers, first):
            if f >= 0:
                raise FloatingPointError(f"non-finite loss at iteration {f} of the run with seed {t.cfg['seed']} "
                                         f"(read at iteration {it})")


def _stack_state(states: list[dict]) -> dict:
    """One parameter's optimiser state of K runs as one state: tensors with a shape stacked ``[K, ...]``; the step
    count (a scalar, the same in every run at the same iteration) kept once."""
    out = {}
    for key, value in states[0].items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            out[key] = torch.stack([s[key] for s in states])
        else:
            out[key] = value.clone() if isinstance(value, torch.Tensor) else value
    return out


def _unstack_state(state: dict, k: int) -> dict:
    """Run ``k``'s optimiser state of one parameter (:func:`_stack_state` inverted)."""
    return {key: (value[k].clone() if value.dim() > 0 else value.clone()) if isinstance(value, torch.Tensor)
            else value for key, value in state.items()}
