"""The interface of a training method (modelled on DomainBed's ``algorithms.py`` registry).

A method is one module in ``dmp/methods/`` holding a :class:`Method` subclass decorated with
:func:`dmp.methods.register`; the trainer, the schedule, the config, the suite, the tables and the figures ask the
registry (``dmp.methods.get(name)``) and never test a method name. Adding a method is that one module plus its
reference test (the loss on small tensors against an independent implementation in the test).

What a method author writes (class attributes first, then methods to override):

``name``
    The registry key: ``python -m dmp train method=<name>``, the run folder, the table row id (``row_vanilla_
    office31_<name>``) and the ``method`` column of ``dmp/tables/reported_results.csv``.
``label``
    How tables and figures print it (``"CDAN+E"``).
``paper``
    The paper (and official code) it follows, e.g. ``"Long et al., NeurIPS 2018; github.com/thuml/CDAN"``.
``comparison``
    True (the default) for a comparison method of another paper; False for DMP, its variants and source-only (the
    suite's ``comparison_methods: false`` keeps only those rows).
``footnote``
    A sentence the tables print in their notes when they hold the method's row (ours): where it departs from its
    paper, e.g. "closest documented form: ... (docs/method.md)"; empty when it is faithful.
``params``
    Its own hyper-parameters, each declared once: ``{"key": Param(default, help, check, expect, source)}``
    (:class:`dmp.params.Param`; ``source`` = the sentence or table of its own paper, or its official code, the
    default rests on). Keys are global names (prefix them with the method family, ``dann_trade_off``); they exist
    in a run's config only for the methods that declare or ``uses`` them, so ``python -m dmp config --show``,
    ``key=value`` overrides and the Snakemake config check know them, and a DMP run's config is unchanged.
``uses``
    Keys declared by another method's ``params`` that this one reads too (CDAN reads DANN's trade-off): a key is
    declared once, in one module.
``fixed``
    Trainer keys the method is defined by, ``{"key": value}`` (the frozen probe's ``backbone_lr_mult: 0``): set
    after the preset; a user value that differs is refused, naming the key. Default: none.
``terms``
    The names of the loss terms :meth:`losses` returns, in order: the ``log.csv`` columns after ``ce`` (``loss``,
    always the logged total, and ``ce``, the source cross-entropy, come first).
``target``
    What the loop does with the target batch: ``"loss"`` (forwarded with gradients; ``StepContext`` holds its
    features, logits and softmax), ``"bn"`` (forwarded without gradients, so BatchNorm's running statistics see
    it; no loss), ``"none"`` (never loaded). Source and target batches go through the network in separate calls
    (BatchNorm sees single-domain batches) for every method: one protocol for all.
``anchors`` / ``mean_prediction``
    Whether the loop keeps the source class means and source mean per manifold layer (``dmp.anchors.Anchors``,
    refreshed every ``anchor_period`` as ``anchor_mode`` says), and the mean target softmax over the target set
    (refreshed with them; it gives ``StepContext.class_weights``, Eq. ClassWeight: ``1/c`` vanilla, ``pi``
    partial). Override :meth:`needs` when they depend on the config.
``compilable``
    Whether config ``compile`` may compile the method's step (dmp/train/compiled.py): true only when its terms depend
    on the iteration through the schedule's start switches alone (not on ``StepContext.progress``, as a
    gradient-reversal coefficient does, nor on per-iteration random generators), else a compiled step would
    recompile every iteration. Default false.

:meth:`needs` (cfg) -> :class:`Needs`
    The loop's services for a config (defaults: the class attributes above).
:meth:`check` (cfg)
    Cross-key checks of a resolved config; raise :class:`dmp.params.ConfigError` naming the key.
:meth:`build_modules` (cfg, feature_dims, num_classes) -> ``nn.Module`` or None
    Extra trained modules (a domain discriminator ...), built after the network (the network's initialisation is
    the same for every method and seed), from the manifold-layer widths and the class count. The trainer moves
    them to the device, puts :meth:`param_groups` in the optimizer (scaled by the lr schedule like every group),
    saves their state in the checkpoint (a resumed run is identical to an uninterrupted one) and passes them as
    ``StepContext.modules``; they are in train mode during steps.
:meth:`param_groups` (modules, cfg) -> list of optimizer groups
    Default: one group at ``lr`` (the new layers' lr). Each group needs ``initial_lr`` (the schedule's base).
:meth:`losses` (ctx: :class:`StepContext`) -> ``{term: scalar tensor}``
    The unweighted terms of one iteration, keys = ``terms``. Call loss functions through their modules
    (``from .. import losses`` then ``losses.intra_class_loss(...)``) so tests can spy on them.
:meth:`total` (ce, terms, ctx) -> scalar tensor
    The objective minimised (and logged as ``loss``). Default: ``ce + sum(weights[t] * terms[t])`` over
    ``terms`` in order, with :meth:`weights`. A gradient-reversal method returns the *minimised* total: the
    reversal lives in the features' path to its discriminator (``ctx.progress`` drives its schedule).
:meth:`weights` (cfg) -> ``{term: float}``
    The weights of the default :meth:`total`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import torch
from torch import nn

from ..params import ConfigError, Param

__all__ = ["ConfigError", "Method", "Needs", "Param", "StepContext"]

TARGET_USES = ("loss", "bn", "none")


@dataclasses.dataclass(frozen=True)
class Needs:
    """What a method needs from the training loop (see the module docstring)."""
    target: str = "loss"
    anchors: bool = False
    mean_prediction: bool = False

    @property
    def refreshes(self) -> bool:
        """Whether the loop runs the periodic anchor / mean-prediction refresh at all."""
        return self.anchors or self.mean_prediction


@dataclasses.dataclass
class StepContext:
    """Everything a method's :meth:`Method.losses` may read at one iteration (float32 tensors on ``device``).

    ``feats_*`` are the manifold layers' outputs (a list, one ``[n, d_l]`` per layer, the last one feeds the
    classifier); the ``*_t`` fields are None when the method's ``target`` is not ``"loss"``."""
    cfg: dict
    iteration: int
    progress: float  # iteration / iterations, in [0, 1): the schedule of a gradient-reversal coefficient
    sched: dict  # dmp.train.schedule.schedule(): iterations, warm-up iterations, anchor period ...
    num_classes: int
    device: torch.device
    feats_s: list
    logits_s: torch.Tensor
    y_s: torch.Tensor
    feats_t: list | None = None
    logits_t: torch.Tensor | None = None
    p_t: torch.Tensor | None = None  # softmax(logits_t)
    anchors: Any = None  # dmp.anchors.Anchors (methods with anchors)
    class_weights: torch.Tensor | None = None  # [c] on device, Eq. ClassWeight (sums to 1; 1/c in vanilla)
    mean_prediction: torch.Tensor | None = None  # [c] mean target softmax of the last refresh, or None
    modules: nn.Module | None = None  # build_modules()


class Method:
    """Base class of a registered method; see the module docstring for what to declare and override."""
    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    comparison: ClassVar[bool] = True
    footnote: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    uses: ClassVar[tuple[str, ...]] = ()
    fixed: ClassVar[dict[str, Any]] = {}
    terms: ClassVar[tuple[str, ...]] = ()
    target: ClassVar[str] = "loss"
    anchors: ClassVar[bool] = False
    mean_prediction: ClassVar[bool] = False
    compilable: ClassVar[bool] = False

    def needs(self, cfg: dict) -> Needs:
        return Needs(self.target, self.anchors, self.mean_prediction)

    def check(self, cfg: dict) -> None:
        """Cross-key checks of a resolved config (each key's own check is its ``Param``)."""

    def build_modules(self, cfg: dict, feature_dims: list[int], num_classes: int) -> nn.Module | None:
        return None

    def param_groups(self, modules: nn.Module, cfg: dict) -> list[dict]:
        params = [p for p in modules.parameters() if p.requires_grad]
        return [{"params": params, "lr": cfg["lr"], "initial_lr": cfg["lr"]}] if params else []

    def losses(self, ctx: StepContext) -> dict[str, torch.Tensor]:
        return {}

    def weights(self, cfg: dict) -> dict[str, float]:
        return {t: 1.0 for t in self.terms}

    def total(self, ce: torch.Tensor, terms: dict[str, torch.Tensor], ctx: StepContext) -> torch.Tensor:
        w = self.weights(ctx.cfg)
        loss = ce
        for t in self.terms:
            loss = loss + w[t] * terms[t]
        return loss

    def __repr__(self):
        return f"<method {self.name}: {self.label}>"
