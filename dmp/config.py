"""The hyper-parameter registry: every run option declared once, with its default and its check.

A run config is built in three layers (later wins):

1. the defaults declared in :data:`PARAMS` below;
2. the paper's preset for the run's ``(dataset, setting)`` (:data:`PRESETS`, from the paper's
   "Datasets and Experimental Setting" section and ``NOTES.md``), applied when ``preset: auto``; a dataset
   without one gets the defaults of its kind (:data:`KIND_PRESETS`: feature vectors use the identity backbone);
3. the user's YAML file and ``key=value`` overrides.

:func:`resolve` validates the result before any training starts and names the offending key.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import yaml

from . import methods
from .data.registry import get_dataset
from .manifolds import LE_EPS
from .manifolds import METRICS as _METRIC_FUNCTIONS
from .models import backbones
from .params import INPUT_PARAMS, ConfigError, Param, _choice, _int_ge0, _nonneg, _pos_int

# The training methods are the registry's (dmp/methods/: one module each, declaring its own method-scoped keys).
METRICS = tuple(_METRIC_FUNCTIONS)
SETTINGS = ("vanilla", "partial")


_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def spelled(param: Param, value):
    """``value`` as the key means it, whichever way a word reached it: YAML 1.1 reads ``off``/``on``/``yes``/``no``
    as booleans (``compile=off`` -> False, meaning ``"off"``), and Snakemake's ``--config`` passes the values inside a
    mapping as strings (``train={"input_cache":true}`` -> ``"true"``, meaning True)."""
    if isinstance(value, bool) and value not in param.choices:
        word = "on" if value else "off"
        return word if word in param.choices else value
    if isinstance(value, str) and isinstance(param.default, bool) and value.lower() in _WORDS:
        return _WORDS[value.lower()]
    return value


def _unit(upper_open: bool):
    """A number in [0, 1) (``upper_open``) or [0, 1]."""
    def check(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v and (v < 1 if upper_open else v <= 1)
    return check


# Split names (dmp/data/splits.py): the whole list, the partial-target classes, the first N classes, K per class.
SPLIT_NAME = r"full|partial|first[1-9][0-9]*|n[1-9][0-9]*"


def _split(allow_none=False):
    import re
    return dict(check=lambda v: (allow_none and v is None) or (isinstance(v, str) and re.fullmatch(SPLIT_NAME, v)
                                                                is not None),
                expect="full, partial, first<N> or n<K> (N, K > 0)" + (" or null" if allow_none else ""))


# numpy's legacy seeding (np.random.seed) takes seeds below 2**32.
SEED_LIMIT = 2**32


def _when(positive=False):
    """An iteration count, or ``"<E>ep"`` for E epochs (see dmp/train/schedule.py)."""
    def check(v):
        if isinstance(v, str) and v.endswith("ep"):
            try:
                e = float(v[:-2])
            except ValueError:
                return False
            return math.isfinite(e) and (e > 0 if positive else e >= 0)
        return isinstance(v, int) and not isinstance(v, bool) and (v > 0 if positive else v >= 0)
    bound = "> 0" if positive else ">= 0"
    return dict(check=check, expect=f"an iteration count {bound} or '<E>ep' (E epochs, E {bound})")


PARAMS: dict[str, Param] = {
    # --- task -------------------------------------------------------------------------------
    "dataset": Param(None, "dataset registry name (python -m dmp data list)",
                     lambda v: isinstance(v, str), "a dataset name"),
    "source": Param(None, "source domain name", lambda v: isinstance(v, str), "a domain name"),
    "target": Param(None, "target domain name", lambda v: isinstance(v, str), "a domain name"),
    "setting": Param("vanilla", "vanilla (uniform class weights) or partial (Eq. ClassWeight)",
                     **_choice(*SETTINGS)),
    "source_split": Param("full", "split of the source domain's list (full, n10, first10, ...)", **_split()),
    "target_split": Param(None, "split of the target list; null = full (vanilla) / partial (partial)",
                          **_split(allow_none=True)),
    "preset": Param("auto", "auto = apply the paper's preset for (dataset, setting); none = defaults only",
                    **_choice("auto", "none")),
    # --- method -----------------------------------------------------------------------------
    "method": Param("dmp", "the training method, a name of the registry dmp/methods/ (listed below with their own "
                    "keys): source_only, source_only_bn (its BatchNorm statistics also see the target batches), dmp, "
                    "dmp_no_al (no alignment), dmp_no_ds (no discriminative terms), dmp_ent (DMP + target entropy), "
                    "and the comparison methods", lambda v: isinstance(v, str), "a registered method name"),
    "metric": Param("G", "manifold metric for the alignment loss: Grassmann, affine Grassmann, Log-Euclidean",
                    **_choice(*METRICS)),
    "lambda1": Param(10.0, "weight of the discriminative structure loss L_DS (Eq. Objective)", **_nonneg()),
    "lambda2": Param(5e3, "weight of the alignment loss L_AL (Eq. Objective)", **_nonneg()),
    "k": Param(1, "Top-k truncation of the intra-class loss (Eq. IntraLoss&Truncated)", **_pos_int()),
    "grassmann_dim": Param(None, "d' of the (affine) Grassmann metric; null = batch size - 1",
                           **_pos_int(allow_none=True)),
    "le_eps": Param(LE_EPS, "epsilon of the Log-Euclidean metric, C + eps I (not stated in the paper)",
                    check=lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf,
                    expect="a finite number > 0"),
    "entropy_weight": Param(0.1, "weight of the target entropy loss in dmp_ent (not stated in the paper)",
                            **_nonneg()),
    "intra_grad_p": Param(True, "whether the gradient of L_intra flows into the soft labels p (the paper's gradient, "
                          "Sec. 'Optimization and Algorithm', has a dp/dTheta term); false = p as a constant "
                          "confidence weight ('the predictions are used to weight the importance')",
                          **_choice(True, False)),
    "inter_absent": Param("zero", "classes absent from the source batch in L_inter: 'zero' = the paper's "
                          "all-zero class centre, 'skip' = only pairs of classes present in the batch",
                          **_choice("zero", "skip")),
    "weight_norm": Param("sum_one", "class weights of Eq. WeightedIntraLoss: sum_one = Eq. ClassWeight as printed "
                         "(1/c vanilla, pi partial; 'constant mass'), mean_one = c times that (vanilla then is "
                         "the unweighted Eq. IntraLoss&Truncated). Source rows of the alignment are weighted in "
                         "the partial setting only",
                         **_choice("sum_one", "mean_one")),
    "intra_start": Param("15ep", "when the intra-class (target) term is switched on: an iteration, or '<E>ep' "
                         "(paper, Office-31 A->W: after 15 epochs; other datasets: not stated, we use the same)",
                         **_when()),
    "inter_start": Param(0, "when the inter-class term is switched on (iteration or '<E>ep')", **_when()),
    "mean_prediction_momentum": Param(0.0, "the partial class weights' mean target prediction pi across refreshes: "
                                      "pi <- m pi_previous + (1 - m) pi_this_pass; 0 = the paper (pi is 'the mean "
                                      "value of the target prediction P^t' of the current pass, Eq. ClassWeight); "
                                      "> 0 damps a pass whose prediction flips between two near classes",
                                      check=_unit(upper_open=True), expect="a number in [0, 1)"),
    "anchor_mode": Param("full_pass", "full_pass = no-grad pass over the whole source (and, for partial, "
                         "target) set every T_up, as Algorithm DMP; accumulate = means of the training batches "
                         "since the last refresh (the authors' earlier code)", **_choice("full_pass", "accumulate")),
    "anchor_bn": Param("batch", "BatchNorm during the full anchor pass: batch = per-domain batch statistics of "
                       "shuffled batches of batch_size (as the losses see them; running statistics untouched); "
                       "eval = running statistics (blended over both domains)", **_choice("batch", "eval")),
    "anchor_period": Param("1ep", "T_up: anchor refresh period, iterations or '<E>ep' (paper: 'after every "
                           "epoch or several iterations')", **_when(positive=True)),
    # --- schedule (dmp/train/schedule.py; `python -m dmp config --schedule` prints it) --------------------
    "epochs": Param(40, "T_max in epochs (not stated in the paper; see docs/method.md)",
                    check=lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf,
                    expect="a number > 0"),
    "epoch_iterations": Param(None, "iterations per epoch; null = one pass over the source training split "
                              "(ceil(n_s / batch_size)); VisDA fixes it (1000)", **_pos_int(allow_none=True)),
    # --- model ------------------------------------------------------------------------------
    "backbone": Param("resnet50", "backbone registry name (dmp/models/backbones.py), or timm:<model> / "
                      "torchvision:<model> with weights_path (your own architecture)",
                      check=backbones.known,
                      expect="one of " + ", ".join(backbones.BACKBONES) + ", timm:<model> or torchvision:<model>",
                      choices=tuple(backbones.BACKBONES)),
    "pretrained": Param(True, "load ImageNet weights for the backbone (never silently random)",
                        **_choice(True, False)),
    "weights_path": Param(None, "explicit local weights file for the backbone",
                          lambda v: v is None or isinstance(v, str), "a path or null"),
    "bottleneck_dims": Param([1024, 512], "widths of the manifold layers (LeakyReLU(0.2) then Tanh)",
                             lambda v: isinstance(v, list) and len(v) >= 1
                             and all(isinstance(x, int) and x > 0 for x in v), "a list of positive ints"),
    "manifold_bn": Param(True, "BatchNorm1d after each manifold layer's Linear (the authors' DRMEA code; the paper "
                         "names only the activations)", **_choice(True, False)),
    "backbone_bn": Param("train", "the backbone's BatchNorm layers while training: train = batch statistics, running "
                         "statistics re-estimated on the training batches (PyTorch's default; the paper does not say); "
                         "frozen = the pre-trained running statistics throughout (eval mode; their affine weights "
                         "still learn)", **_choice("train", "frozen")),
    "standardize": Param(False, "z-score input features with source statistics (feature datasets)",
                         **_choice(True, False)),
    "sample_norm": Param(False, "array/feature datasets: scale each sample to zero mean and unit variance (the "
                         "same for every method; for digits it removes the ink-density difference of the domains)",
                         **_choice(True, False)),
    "shift": Param(0, "arrays datasets of small images: random translation of training samples by up to this many "
                   "pixels, the same for every method; 0 = none (the paper's image datasets use random crops)",
                   **_int_ge0()),
    "scale_jitter": Param(0.0, "arrays datasets of small images: random scaling of training samples by a factor in "
                          "1 +- scale_jitter, the same for every method; 0 = none",
                          check=lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
                          expect="a number in [0, 1)"),
    # --- optimisation -----------------------------------------------------------------------
    "optimizer": Param("adam", "adam or sgd (momentum 0.9, nesterov off)", **_choice("adam", "sgd")),
    "lr": Param(2e-4, "learning rate of the new layers",
                check=lambda v: isinstance(v, float) and 0 < v < math.inf, expect="a finite number > 0"),
    "backbone_lr_mult": Param(0.1, "backbone lr = lr * backbone_lr_mult", **_nonneg()),
    "betas": Param([0.9, 0.999], "Adam betas", lambda v: isinstance(v, list) and len(v) == 2
                   and all(map(_unit(upper_open=True), v)), "[b1, b2], two numbers in [0, 1)"),
    "momentum": Param(0.9, "SGD momentum", check=_unit(upper_open=False), expect="a number in [0, 1]"),
    "weight_decay": Param(0.0, "weight decay", **_nonneg()),
    "lr_schedule": Param("constant", "constant, or anneal: lr_p = lr / (1 + 10 p)^0.75 (Ganin et al.)",
                         **_choice("constant", "anneal")),
    "batch_size": Param(50, "b_s, per domain", check=lambda v: isinstance(v, int) and v >= 2,
                        expect="an integer >= 2"),
    "iterations": Param(None, "T_max in iterations, overriding epochs (short runs, tests); null = epochs x "
                        "iterations per epoch", **_pos_int(allow_none=True)),
    # --- data / execution -------------------------------------------------------------------
    **INPUT_PARAMS,
    "num_workers": Param("auto", "DataLoader workers per image stream (a DMP run has two); auto = min(8, usable "
                         "cores - 1), 0 for data held in memory (docs/benchmarks.md)",
                         check=lambda v: v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
                         expect="an integer >= 0 or auto"),
    "eval_batch_size": Param(256, "batch size of no-grad passes", **_pos_int()),
    "interpolation_per_class": Param(100, "target samples per class for the interpolation analysis",
                                     **_pos_int()),
    "seed": Param(0, "random seed (python, numpy, torch, DataLoader workers)",
                  check=lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < SEED_LIMIT,
                  expect=f"an integer in [0, 2**32) (numpy's seeds), at most {SEED_LIMIT - 1}"),
    "device": Param("auto", "cpu, cuda or auto", **_choice("cpu", "cuda", "auto")),
    "threads": Param(None, "torch CPU threads; null = torch's default", **_pos_int(allow_none=True)),
    "deterministic": Param(True, "torch.use_deterministic_algorithms (CUDA); false lets cuDNN pick the fastest "
                           "kernels (cudnn.benchmark)", **_choice(True, False)),
    "precision": Param("fp32", "fp32, or bf16 = torch.autocast(bfloat16) on the model's forward passes (training, "
                       "anchor pass, evaluation); losses and manifold distances stay fp32/fp64",
                       **_choice("fp32", "bf16")),
    "compile": Param("auto", "torch.compile of the training step (dmp/train/compiled.py): off = eager; loss = the "
                     "method's loss terms compiled; step = the forward and loss compiled (CUDA graphs on CUDA); auto = "
                     "off (on CUDA without deterministic: compiled.AUTO_CUDA, off until a compiled mode is shown "
                     "equivalent there)",
                     **_choice("auto", "off", "loss", "step")),
    "checkpoint_every": Param(500, "iterations between checkpoints", **_pos_int()),
    "log_every": Param(10, "iterations between log.csv rows", **_pos_int()),
    "log_accuracy_every": Param(0, "iterations between target-accuracy measurements for the convergence figure "
                                "(metrics.json accuracy_log; 0 = never). Plotted only, never used to select a model; "
                                "the training itself is the same", **_int_ge0()),
    "save_features": Param(100, "at the end of a run, save the last manifold layer's features of up to this many "
                           "source and target samples per class (with labels, predictions and interpolations) to "
                           "features.npz, for the t-SNE and d' figures; 0 = none", **_int_ge0()),
}

# The paper's stated settings (paper Sec. "Datasets and Experimental Setting", NOTES.md). Keys not listed
# here keep the defaults above; every value that is not from the paper is a default above, documented there.
_ADAM_OFFICE = dict(optimizer="adam", lr=2e-4, betas=[0.9, 0.999], batch_size=50, backbone="resnet50")
# VisDA: an epoch is 1000 iterations (32k images; one pass over the 152k synthetic images would be 4763), so
# that the warm-up and the anchor period keep the meaning they have on the small datasets.
_VISDA = dict(optimizer="sgd", lr=3e-3, momentum=0.9, weight_decay=5e-4, batch_size=32,
              lr_schedule="anneal", epoch_iterations=1000, epochs=30, intra_start="10ep")
# The demo: a miniature of the paper's regime. The small CNN is pre-trained once on a generated corpus that is no
# demo domain (the demo's "ImageNet", dmp/train/pretrain.py) and fine-tuned at 0.1x lr; the intra-class term
# starts after a warm-up at the same share of training as the paper's A->W (15 of 40 epochs).
_DEMO = dict(backbone="smallcnn", pretrained=True, resize=24, crop=20, batch_size=32, lr=1e-3, epochs=16,
             intra_start="6ep", anchor_period="1ep")
PRESETS: dict[tuple[str, str], dict[str, Any]] = {
    **{(ds, "vanilla"): dict(_ADAM_OFFICE, lambda1=10.0, lambda2=5e3)
       for ds in ("office31", "officehome", "imageclef")},
    **{(ds, "partial"): dict(_ADAM_OFFICE, lambda1=10.0, lambda2=1.0)
       for ds in ("office31", "officehome", "imageclef")},
    ("visda2017", "vanilla"): dict(_VISDA, backbone="resnet101", lambda1=10.0, lambda2=5e3),
    ("visda2017", "partial"): dict(_VISDA, backbone="resnet50", lambda1=10.0, lambda2=1.0),
    # Embedded CPU demo and the frozen-feature protocol (ours, not the paper's).
    # The manifold layers keep the paper's widths (1024, 512) everywhere: lambda2 is tied to the 1/d_l^2 factor
    # of the metrics, so narrower layers would make the alignment term (1024/d)^2 times stronger.
    ("demo", "vanilla"): dict(_DEMO, lambda2=5e3),
    ("demo", "partial"): dict(_DEMO, lambda2=1.0),
    ("office_caltech10", "vanilla"): dict(backbone="identity", pretrained=False, standardize=True,
                                          batch_size=32),
    # Digits: the GroupNorm CNN pre-trained on the demo's shapes corpus in grey (`python -m dmp pretrain-demo
    # --recipe digits`, passed as weights_path), fine-tuned at the full lr (a corpus of shapes is a weak prior
    # for digit strokes), per-sample normalisation, GroupNorm in the CNN (a source-trained BatchNorm normalises
    # USPS with MNIST statistics) and the annealed lr (the last iterate of a constant lr swung): docs/method.md.
    # The intra-class term starts at the share of training of the paper's A->W, as on the demo (9 of 24 epochs).
    ("mnist_usps", "vanilla"): dict(backbone="smallcnn_gn", pretrained=True, batch_size=32, lr=1e-3,
                                    backbone_lr_mult=1.0, sample_norm=True, lr_schedule="anneal", epochs=24,
                                    intra_start="9ep", shift=2, scale_jitter=0.25),
}


# Defaults by the kind of a dataset that has no preset of its own (``datasets/<name>/dataset.yaml``): feature
# vectors go straight into the manifold layers, so the backbone is the identity (a ResNet cannot read them).
KIND_PRESETS: dict[str, dict[str, Any]] = {
    "features": dict(backbone="identity", pretrained=False),
}


def _preset(dataset, setting) -> dict[str, Any]:
    """The paper's preset for ``(dataset, setting)``; for another release of a dataset (``variant_of``, e.g. the
    15,913-image Office-Home) the preset of the dataset it is a release of; else the defaults of the dataset's
    kind (none for an unknown dataset: the run then fails on the name, with the list of known ones)."""
    if (dataset, setting) in PRESETS:
        return PRESETS[(dataset, setting)]
    if not isinstance(dataset, str):
        return {}
    try:
        spec = get_dataset(dataset)
    except (KeyError, ValueError, OSError):
        return {}
    if spec.variant_of and (spec.variant_of, setting) in PRESETS:
        return PRESETS[(spec.variant_of, setting)]
    meta = {k: json.loads(v) for k, v in spec.meta}
    if spec.kind == "features" and meta.get("reads_it") and (meta.get("source_dataset"), setting) in PRESETS:
        # a backbone trunk's activations of a paper dataset (extract-features --trunk): that dataset's preset,
        # with the head of the trunk that stored them as the backbone (fine-tuned at backbone_lr_mult)
        # (its images were cropped when they were stored: the image pipeline's keys do not apply)
        return {**{k: v for k, v in PRESETS[(meta["source_dataset"], setting)].items() if k not in ("resize", "crop")},
                "backbone": meta["reads_it"], "pretrained": True}
    return KIND_PRESETS.get(spec.kind, {})


def defaults() -> dict[str, Any]:
    return {k: p.default for k, p in PARAMS.items()}


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings; values are YAML (``lambda2=5e3``, ``bottleneck_dims=[64,32]``)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = _coerce(safe_load(value, f"override {key.strip()}") if value != "" else None)
    return out


def _coerce(v):
    # YAML 1.1 reads "5e3" as a string; accept it as a number.
    if isinstance(v, str):
        try:
            return float(v) if any(c in v for c in ".eE") else int(v)
        except ValueError:
            return v
    return v


# Keys whose integer values are taken as floats (``lambda2=5000`` is ``5000.0``; also every method-scoped key with a
# float default).
FLOAT_KEYS = ("lr", "lambda1", "lambda2", "le_eps", "entropy_weight", "backbone_lr_mult", "momentum", "weight_decay",
              "scale_jitter")


def _as_float(v):
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def short_repr(value, width: int = 60) -> str:
    """``repr(value)`` cut to at most ``width`` characters (nested containers abbreviated without building their
    whole repr): an error message never prints a value longer than a line."""
    import reprlib

    r = reprlib.Repr()
    r.maxstring = r.maxother = width
    r.maxlevel, r.maxlist, r.maxdict, r.maxtuple, r.maxset = 2, 6, 4, 6, 6
    text = r.repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def value_problem(param: Param, value, written=None) -> str | None:
    """What is wrong with ``value`` (already coerced; ``written``: as the user wrote it, if not the same) for a key
    declared by ``param`` (``"= VALUE is invalid: expected ..."``), None if it passes the key's check."""
    try:
        ok = param.check is None or bool(param.check(value))
    except Exception:  # a check meeting a value of an unexpected type
        ok = False
    shown = value if written is None else written
    return None if ok else f"= {short_repr(shown)} is invalid: expected {param.expect}"


def resolve(user: dict[str, Any], check_files: bool = False) -> dict[str, Any]:
    """Merge defaults, the paper preset and the user's values; validate; return the full config.

    The config holds the keys of :data:`PARAMS` and the method-scoped keys of the run's method (its own and those
    it ``uses``, dmp/methods/); a key of another method is refused, naming the methods it belongs to.
    ``check_files``: also that ``weights_path`` names a file here (``dmp train`` and ``dmp config``, before any work;
    the suite plans runs whose weights file a rule writes first)."""
    method = methods.get(_coerce(user.get("method", PARAMS["method"].default)))
    scoped = methods.scoped_params(method.name)
    scope = {**PARAMS, **scoped}
    unknown = sorted(set(user) - set(scope))
    if unknown:
        elsewhere = {k: methods.owners(k) for k in unknown if methods.owners(k)}
        if elsewhere:
            key, owners = next(iter(elsewhere.items()))
            raise ConfigError(f"config key {key!r} belongs to method(s) {', '.join(owners)}, not to method "
                              f"{method.name!r} (see python -m dmp config --show)")
        known = [*scope, *methods.declared_params()]
        raise ConfigError(f"unknown config key(s): {', '.join(k + did_you_mean(k, known) for k in unknown)} "
                          f"(see dmp config --show)")
    cfg = {k: p.default for k, p in scope.items()}
    preset_name = user.get("preset", cfg["preset"])
    if preset_name == "auto":
        cfg.update({k: v for k, v in _preset(user.get("dataset"), user.get("setting", cfg["setting"])).items()
                    if k in scope})
    cfg.update({k: _coerce(v) for k, v in user.items()})
    for key, value in method.fixed.items():  # what the method is defined by (a frozen probe's lr multiplier)
        if key in user and spelled(scope[key], _as_float(_coerce(user[key]))) != value:
            raise ConfigError(f"config key {key!r} = {short_repr(user[key])}: method {method.name!r} is defined by "
                              f"{key} = {value} (drop {key}, or choose another method)")
        cfg[key] = value
    floats = [k for k, p in scoped.items() if isinstance(p.default, float)]
    for key in (*FLOAT_KEYS, *floats):
        cfg[key] = _as_float(cfg[key])
    for key, param in scope.items():
        cfg[key] = spelled(param, cfg[key])
        problem = value_problem(param, cfg[key])
        if problem:
            raise ConfigError(f"config key {key!r} {problem}")
    if cfg["crop"] > cfg["resize"]:
        raise ConfigError(f"config key 'crop' = {cfg['crop']} is larger than 'resize' = {cfg['resize']} (the crop is "
                          f"cut from the resized image): set crop <= resize")
    if cfg["input_device"] and not cfg["input_cache"]:
        raise ConfigError("config key 'input_device' = on holds the input cache on the device: set input_cache=on "
                          "too (python -m dmp data cache DATASET builds it), or drop input_device")
    for key in ("dataset", "source", "target"):
        if cfg[key] is None:
            raise ConfigError(f"config key {key!r} is required")
    if cfg["target_split"] is None:
        cfg["target_split"] = "partial" if cfg["setting"] == "partial" else "full"
    method.check(cfg)
    if cfg["weights_path"] and not backbones.get(cfg["backbone"]).weights:
        raise ConfigError(f"config key 'weights_path' = {short_repr(cfg['weights_path'])}: the {cfg['backbone']} "
                          "backbone has no weights to load; drop weights_path or choose a CNN backbone")
    if check_files and cfg["weights_path"] and not os.path.isfile(cfg["weights_path"]):
        what = "a folder, not a weights file" if os.path.isdir(cfg["weights_path"]) else "no such file"
        raise ConfigError(f"config key 'weights_path' = {short_repr(cfg['weights_path'])}: {what} (a path relative "
                          f"to the current folder, or absolute); give the backbone's weights file, or drop "
                          f"weights_path for its ImageNet weights")
    return cfg


# The most values a YAML document may expand to through its aliases (``*name``): a few hundred bytes of nested
# aliases can stand for billions of values (a "billion laughs" document), which no config needs.
YAML_MAX_VALUES = 100_000


def safe_load(stream, where) -> Any:
    """``yaml.safe_load`` of a text or open file, refusing (:class:`ConfigError` naming ``where``) a document that
    expands to more than :data:`YAML_MAX_VALUES` values through aliases."""
    loader = yaml.SafeLoader(stream)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        sizes: dict[int, int] = {}

        def size(n) -> int:  # values of the expanded document under node n (an alias is its anchor's node again)
            if id(n) not in sizes:
                sizes[id(n)] = 0  # (a recursive alias counts once)
                children = n.value if isinstance(n, yaml.SequenceNode) else [
                    c for pair in n.value for c in pair] if isinstance(n, yaml.MappingNode) else []
                sizes[id(n)] = min(1 + sum(size(c) for c in children), YAML_MAX_VALUES + 1)
            return sizes[id(n)]

        if size(node) > YAML_MAX_VALUES:
            raise ConfigError(f"{where}: the YAML expands to more than {YAML_MAX_VALUES:,} values through its aliases "
                              f"(*name); write the values out")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml(path) -> dict[str, Any]:
    """A run config file (a mapping); a file that is not UTF-8 text, expands through aliases beyond
    :data:`YAML_MAX_VALUES` or is not a mapping raises :class:`ConfigError` naming it (malformed YAML raises
    ``yaml.MarkedYAMLError``, which names it and the line)."""
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a YAML text file (not UTF-8 text); give a run config file") from None
    if "\x00" in text:
        raise ConfigError(f"{path}: not a YAML text file (binary data); give a run config file")
    import io

    stream = io.StringIO(text)
    stream.name = str(path)  # PyYAML's error marks name the stream by its name
    data = safe_load(stream, path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a run config must be a mapping of key: value")
    named = [k for k in data if not isinstance(k, str)]
    if named:
        raise ConfigError(f"{path}: config key {short_repr(named[0])} is not a name (see python -m dmp config --show)")
    return data


def describe() -> str:
    """Human-readable table of every parameter, its default and its meaning; then each registered method (label,
    paper) with its own keys and the source of each default."""
    declared = methods.declared_params()
    width = max(map(len, [*PARAMS, *declared]))
    lines = [f"{k:<{width}}  {p.default!r:<14}  {p.help}" for k, p in PARAMS.items()]
    for name in methods.names():
        m = methods.get(name)
        lines += ["", f"method {name} ({m.label}; {m.paper})"]
        lines += [f"  {k:<{width - 2}}  {p.default!r:<14}  {p.help}" + (f" [source: {p.source}]" if p.source else "")
                  for k, p in m.params.items()]
        if m.uses:
            lines.append(f"  (also uses: {', '.join(m.uses)})")
    return "\n".join(lines)


def did_you_mean(key, known) -> str:
    """`` (did you mean 'x'?)`` with the known key closest to a misspelled ``key``, or nothing."""
    import difflib

    close = difflib.get_close_matches(str(key), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_values(values: dict[str, Any], where: str) -> None:
    """Validate ``values``, a part of a run config written elsewhere than the command line (the Snakemake suite's
    ``train:`` or an ``overrides[i].set``), key by key against :data:`PARAMS`; errors name ``<where>.<key>``."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where} must be a mapping of key: value, got {short_repr(values)}")
    declared = methods.declared_params()
    for key, value in values.items():
        if key not in PARAMS and key not in declared:
            raise ConfigError(f"{where}.{key}: unknown config key{did_you_mean(key, [*PARAMS, *declared])}; see "
                              f"dmp config --show")
        # the same coercions and check as a run's config (dependent keys, e.g. crop <= resize, are checked when the
        # suite resolves each run's config)
        param = PARAMS[key] if key in PARAMS else declared[key][1]
        coerced = spelled(param, _coerce(value))
        if key in FLOAT_KEYS or isinstance(param.default, float):
            coerced = _as_float(coerced)
        problem = value_problem(param, coerced, written=value)
        if problem:
            raise ConfigError(f"{where}.{key} {problem}")
