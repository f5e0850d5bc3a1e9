"""The evidence studies of ``scripts/evidence.py``: their tasks, methods, variants and seeds (declarations only), and
the training jobs they make."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from dmp import methods  # noqa: E402

STUDIES = ("main", "weak", "weak_variants", "anchors", "weights", "grid", "prototypes", "digits_init", "geometry",
           "comparison")

NAMES = {m: methods.label(m) for m in methods.names()}  # the registry's labels (dmp/methods/)
# source_only_bn: source-only whose BatchNorm statistics also see the target batches, as every DMP variant's do
VANILLA = ["source_only", "source_only_bn", "dmp_no_al", "dmp_no_ds", "dmp"]
PARTIAL = ["source_only", "source_only_bn", "dmp", "dmp_ent"]
OC10 = [("amazon", "dslr"), ("amazon", "webcam"), ("dslr", "amazon"), ("dslr", "webcam"), ("webcam", "amazon"),
        ("webcam", "dslr")]
DEMO = [("solid", "outline"), ("solid", "noisy")]  # the demo tables' tasks (config/demo.yaml)
# (dataset, setting, tasks, methods)
MAIN = [("demo", "vanilla", DEMO, VANILLA), ("demo", "partial", DEMO, PARTIAL),
        ("office_caltech10", "vanilla", OC10, VANILLA), ("mnist_usps", "vanilla", [("mnist", "usps"),
                                                                                  ("usps", "mnist")], VANILLA)]
# The main study's seeds per task where 3 cannot tell the methods apart: on the demo one seed in three collapses
# (partial), on digits DMP and DMP (No AL) differ by less than their seed std (docs/evidence.md)
MAIN_SEEDS = {"demo": 10, "mnist_usps": 10}
ANCHORS = {"batch": dict(anchor_mode="full_pass", anchor_bn="batch"),
           "eval": dict(anchor_mode="full_pass", anchor_bn="eval"),
           "accumulate": dict(anchor_mode="accumulate")}
GRID = {"lambda1": [0.1, 0.5, 1.0, 5.0, 10.0, 50.0], "lambda2": [1e2, 5e2, 1e3, 5e3, 1e4, 5e4]}
GRID_TASKS = [("demo", ("solid", "outline")), ("office_caltech10", ("amazon", "webcam"))]
# --study prototypes (scripts/diagnose_prototypes.py): two tasks of every dataset above, one of Office-Caltech10,
# two of Office-31
PROTOTYPE_TASKS = [("demo_pixels", ("outline", "blurry")), ("demo_pixels", ("solid", "noisy")),
                   ("digits_pixels", ("mnist", "usps")), ("digits_pixels", ("usps", "mnist")),
                   ("demo_gradients", ("outline", "blurry")), ("demo_gradients", ("solid", "noisy")),
                   ("demo", ("solid", "outline")), ("demo", ("solid", "noisy")),
                   ("office_caltech10", ("amazon", "webcam")), ("mnist_usps", ("mnist", "usps")),
                   ("mnist_usps", ("usps", "mnist")),
                   # Office-31's deeper CPU form (config/office31_lite_t128.yaml), where L_DS adds less than in the paper
                   ("office31_lite0_s5v20_t128", ("webcam", "amazon")),
                   ("office31_lite0_s5v20_t128", ("dslr", "amazon"))]
SHORT = {"amazon": "A", "dslr": "D", "webcam": "W", "mnist": "M", "usps": "U", "solid": "S", "outline": "O",
         "noisy": "N", "blurry": "B"}


WEIGHTS = {"demo": "demo", "mnist_usps": "digits"}  # dataset -> the recipe of its pre-trained small CNN


DEMO_ALL = [(a, b) for a in ("solid", "outline", "noisy", "blurry") for b in ("solid", "outline", "noisy", "blurry")
            if a != b]
DIGITS = [("mnist", "usps"), ("usps", "mnist")]
# --study weak: hand-crafted features brought in as a user brings their own (identity backbone, the defaults of a
# features dataset): the demo images' pixels and gradient histograms, and MNIST<->USPS's raw pixels as 256-d vectors
# (the JDA protocol's features, read in place from the shared .mat file)
WEAK = {"demo_pixels": DEMO_ALL, "demo_gradients": DEMO_ALL, "demo_bovw": DEMO_ALL, "digits_pixels": DIGITS,
        "digits_bovw": DIGITS}


# --study comparison: the comparison methods of the paper's tables (dmp/methods/, each with its own paper's
# hyper-parameters: the registry's defaults, nothing tuned per task) on the main study's tasks, presets and seeds
# 0..2, model at the last iteration, and COMPARISON_BASE's methods of the same tasks, seeds, presets and weights run
# by this study too (so that a table's rows share one data version, weights file and code version); the report
# takes a table's COMPARISON_BASE rows from this study where they have all run, else from the main study. Run in the
# order listed, COMPARISON_BASE's methods first (each method's tasks and seeds complete before the next starts).
COMPARISON = [("office_caltech10", "vanilla", OC10, ["dann", "cdan_e", "safn", "cdan", "bsp_dann", "hafn"]),
              ("demo", "vanilla", DEMO, ["dann", "cdan_e"]), ("demo", "partial", DEMO, ["pada"]),
              ("mnist_usps", "vanilla", DIGITS, ["dann", "cdan_e"])]
# The rows of DMP and source-only each comparison table shows beside the comparison methods (the same seeds)
COMPARISON_BASE = {"vanilla": ["source_only", "dmp_no_al", "dmp"], "partial": ["source_only", "dmp", "dmp_ent"]}
# Published numbers on the same data under their own protocol, quoted beside ours: (dataset, task, method) ->
# accuracy (%) exactly as printed, with the source in PUBLISHED_SOURCE. Empty: the digits tables of the comparison
# methods' papers (e.g. Long et al., "Conditional Adversarial Domain Adaptation", NeurIPS 2018) could not be checked
# against the papers offline, and no number is quoted unchecked.
PUBLISHED: dict[tuple[str, str, str], float] = {}
PUBLISHED_SOURCE = {}


# --study digits_init: how the digits CNN starts, for every method alike (the preset's row is the main study's runs)
DIGITS_INIT = {"pre-trained, lr x1 (preset)": {}, "pre-trained, backbone lr x0.1": dict(backbone_lr_mult=0.1),
               "random init": dict(pretrained=False, weights_path=None)}


def variant_folder(name: str) -> str:
    """A variant's label as its run folder name."""
    return name.replace(" ", "_").replace(",", "")


# --study weak_variants: what changes DMP on the weakest features (diagnostic; no default is taken from it)
WEAK_TASKS = [("outline", "blurry"), ("outline", "noisy"), ("solid", "noisy"), ("blurry", "solid")]
WEAK_VARIANTS = {"paper": {}, "k=3": dict(k=3), "lambda1=1": dict(lambda1=1.0),
                 "no-manifold-BN": dict(manifold_bn=False), "p-constant": dict(intra_grad_p=False)}


def jobs_for(study: str, seeds: int | None, only, weights: dict[str, str], method_filter=None):
    """The (config, run folder) of every run of ``study``; ``seeds`` = None: 3 per task, the main study's demo
    tables :data:`MAIN_SEEDS`; ``method_filter``: the methods to run (``--study comparison``; None: all)."""
    def job(dataset, setting, task, method, seed, variant="default", **extra):
        cfg = dict(dataset=dataset, setting=setting, source=task[0], target=task[1], method=method, seed=seed,
                   **extra)
        if dataset in WEIGHTS and "weights_path" not in extra:
            cfg["weights_path"] = weights[WEIGHTS[dataset]]
        out = Path(study, dataset, setting, f"{task[0]}-{task[1]}", method, variant, f"seed{seed}")
        return cfg, out
    other = seeds or 3  # seeds per task of the other studies
    if study == "main":
        for dataset, setting, tasks, names in MAIN:
            if not only or dataset in only:
                n = seeds or MAIN_SEEDS.get(dataset, 3)
                for task, method, seed in itertools.product(tasks, names, range(n)):
                    yield job(dataset, setting, task, method, seed)
    elif study == "weak":
        for dataset, tasks in WEAK.items():
            for task, method, seed in itertools.product(tasks, VANILLA, range(other)):
                if not only or dataset in only:
                    yield job(dataset, "vanilla", task, method, seed)
    elif study == "comparison":
        for dataset, setting, tasks, names in COMPARISON:
            for method, task, seed in itertools.product(COMPARISON_BASE[setting] + names, tasks, range(other)):
                if (not only or dataset in only) and (not method_filter or method in method_filter):
                    yield job(dataset, setting, task, method, seed)
    elif study == "digits_init":
        for task, method, (name, extra), seed in itertools.product(DIGITS, ["source_only", "dmp_no_al", "dmp"],
                                                                    list(DIGITS_INIT.items())[1:], range(other)):
            if not only or "mnist_usps" in only:
                yield job("mnist_usps", "vanilla", task, method, seed, variant_folder(name), **extra)
    elif study == "weak_variants":
        for task, method, (name, extra), seed in itertools.product(WEAK_TASKS, ["source_only", "dmp_no_al", "dmp"],
                                                                    WEAK_VARIANTS.items(), range(other)):
            if not only or "demo_pixels" in only:
                yield job("demo_pixels", "vanilla", task, method, seed, name, **extra)
    elif study == "anchors":
        for (dataset, task), (name, extra), seed in itertools.product(
                [("demo", t) for t in DEMO] + [("office_caltech10", t) for t in OC10[:2]], ANCHORS.items(),
                range(other)):
            if not only or dataset in only:
                yield job(dataset, "vanilla", task, "dmp", seed, name, **extra)
    elif study == "weights":
        for task, method, (name, norm), seed in itertools.product(
                DEMO, ["dmp_no_al", "dmp"], [("sum_one", "sum_one"), ("mean_one", "mean_one")], range(other)):
            if not only or "demo" in only:
                yield job("demo", "vanilla", task, method, seed, name, weight_norm=norm)
    elif study == "prototypes":
        for (dataset, task), seed in itertools.product(PROTOTYPE_TASKS, range(other)):
            if not only or dataset in only:
                yield job(dataset, "vanilla", task, "dmp_no_al", seed)
    elif study == "grid":
        for (dataset, task), l1, l2, seed in itertools.product(GRID_TASKS, GRID["lambda1"], GRID["lambda2"],
                                                                 range(other)):
            if not only or dataset in only:
                yield job(dataset, "vanilla", task, "dmp", seed, f"l1={l1:g},l2={l2:g}", lambda1=l1, lambda2=l2)
