"""The Office-31 study's runs beside the suite's (config/office31_lite_t128.yaml trains and tables the head-only and
the deeper form's six tasks), declared as data, each with the ``key=value`` words of its ``dmp train`` command line:

* the departures from the paper's protocol, each changing one thing of the study's form
  (``results/office31_lite/departures/<departure>/<task>/<method>/seed<k>/``);
* the checks of the tables, one setting changed on the same trunk, tasks, seeds and preset
  (``results/office31_lite/checks/<check>/<task>/<method>/seed<k>/``);
* the pseudo-label diagnosis (:mod:`studies.office31.pseudo_label_runs`,
  ``results/office31_lite/diagnosis/pseudo_labels[_<variant>]/q<q>/<task>/<method>/seed<k>/``).

The deeper form's own departure, ``stages_5_on_v20``, is the second block of the suite's vanilla table: its runs
are the suite's (``results/office31_lite/runs/office31_lite0_s5v20_t128/``). The trunk datasets the runs read are
stored as config/office31_lite_t128.yaml's header says, and for the departures also::

    python -m dmp data extract-features office31 --out-name office31_lite0_t224 --backbone efficientnet_lite0 \\
        --resize 256 --crop 224 --trunk                                                   # no_views_224
    python -m dmp data extract-features office31 --out-name office31_lite0_s5_t128 --backbone efficientnet_lite0 \\
        --resize 146 --crop 128 --views 4 --trunk-stage 5                                 # stages_5_on
    python -m dmp data cache office31 --resize 146                 # all_layers: every layer, read from the images
"""
from __future__ import annotations

import itertools
from pathlib import Path

from studies.office31.pseudo_label_runs import DOMAINS, OUT, variant_root
from studies.records import OFFICE31
from studies.runs import Run

TASKS = ["A-W", "D-W", "W-D", "A-D", "D-A", "W-A"]
ALL = "dataset=office31 backbone=efficientnet_lite0 resize=146 crop=128 input_cache=on"  # every layer, from the images
SGD = "optimizer=sgd lr=0.01 momentum=0.9 weight_decay=5e-4 lr_schedule=anneal"  # the optimiser of the paper's cited rows
DEEPER = "dataset=office31_lite0_s5v20_t128"
LOG = "log_accuracy_every=50"  # the target accuracy during training, for the diagnosis only (training unchanged)

DEPARTURES = {
    "no_views": "dataset=office31_lite0_t128_noviews",
    "head_frozen": "dataset=office31_lite0_t128 backbone_lr_mult=0",
    "no_views_224": "dataset=office31_lite0_t224",
    "stages_5_on": "dataset=office31_lite0_s5_t128",
    "stages_5_on_v20_sgd": f"{DEEPER} {SGD}",
    "stages_5_on_v20_lr0": f"{DEEPER} backbone_lr_mult=0",
    "stages_5_on_v20_bnfrozen": f"{DEEPER} backbone_bn=frozen",
    "stages_5_on_v20_mean_one": f"{DEEPER} weight_norm=mean_one",
    "all_layers": ALL,
    "all_layers_bnfrozen": f"{ALL} backbone_bn=frozen",
}
"""Departure -> what it trains with (its descriptions: :data:`studies.office31.departures.DEPARTURES`)."""
DEPARTURE_RUNS = {
    "no_views": [(["A-W"], ["source_only", "dmp"], [0, 1], "")],
    "head_frozen": [(["A-W"], ["source_only", "dmp"], [0, 1], "")],
    "no_views_224": [(["A-W"], ["source_only", "dmp"], [0, 1], "")],
    "stages_5_on": [(["A-W"], ["source_only", "dmp"], [0], "")],
    "stages_5_on_v20_sgd": [(["A-W"], ["source_only"], [0], LOG)],
    "stages_5_on_v20_lr0": [(["A-W", "D-A"], ["source_only"], [0], LOG)],
    "stages_5_on_v20_bnfrozen": [(["D-W", "W-D", "D-A", "W-A"], ["source_only", "dmp"], [0], LOG),
                                 (["D-W", "W-D", "D-A", "W-A"], ["source_only", "dmp"], [1], ""),
                                 (["D-W", "W-D", "D-A", "W-A"], ["dmp_no_ds"], [0, 1], ""),
                                 (["A-W", "A-D"], ["source_only", "dmp", "dmp_no_ds"], [0], ""),
                                 (["A-W", "D-W", "W-D", "D-A", "W-A"], ["dmp_no_al"], [0], "")],
    "stages_5_on_v20_mean_one": [(["A-W", "D-A", "W-A"], ["dmp"], [0], "")],
    "all_layers": [(["D-A"], ["source_only", "dmp"], [0, 1], "")],
    "all_layers_bnfrozen": [(["D-A", "W-A"], ["source_only", "dmp_no_ds", "dmp"], [0, 1], "")],
}
"""Departure -> its runs: (tasks, methods, seeds, extra words) products."""

PARTIAL = "setting=partial source_split=full target_split=partial"
CHECKS = {
    # partial, PADA with the official code's weighted cross-entropy beside the suite's PADA (the paper's objective)
    "pada_ce_code": [(TASKS, ["pada"], [0], f"{PARTIAL} pada_ce=code")],
    # partial, DMP with the class weights' mean prediction averaged across refreshes (the demo's stabiliser)
    "momentum_0.9": [(TASKS, ["dmp"], [0, 1, 2], f"{PARTIAL} mean_prediction_momentum=0.9")],
    # vanilla, the optimiser of the papers the paper's ResNet-50, DANN and CDAN+E rows cite, instead of Adam 2e-4
    "sgd_protocol": [(TASKS, ["source_only"], [0, 1, 2], f"setting=vanilla {SGD}"),
                     (TASKS, ["cdan_e", "dmp"], [0], f"setting=vanilla {SGD}")],
}
"""Check -> its runs on the head-only form's trunk: (tasks, methods, seeds, the words it changes) products."""

PSEUDO_LABELS = [({}, [0.0], ["D-A", "W-A"], ["dmp_no_ds", "dmp"], [0, 1]),
                 ({}, [0.3], ["D-A", "W-A"], ["dmp"], [0, 1]), ({}, [0.6], ["D-A", "W-A"], ["dmp"], [0]),
                 ({"weight_norm": "mean_one"}, [0.0, 0.3], ["D-A", "W-A"], ["dmp"], [0]),
                 ({"intra_grad_p": "false"}, [0.0, 0.3], ["D-A", "W-A"], ["dmp"], [0])]
"""The pseudo-label diagnosis's runs: (the variant's keys, fractions q, tasks, methods, seeds) products."""


def _domains(task: str) -> str:
    src, tgt = task.split("-")
    return f"source={DOMAINS[src]} target={DOMAINS[tgt]}"


def _words(text: str) -> dict:
    return dict(word.split("=", 1) for word in text.split())


def _run(where: str, name: str, task: str, method: str, seed: int, words: str) -> Run:
    return Run(Path(name, task, method, f"seed{seed}"), _words(
        f"{words} {_domains(task)} metric=G device=cpu threads=1 method={method} seed={seed}"),
        root=OFFICE31 / where, kind="dmp train")


def departure_runs() -> list[Run]:
    """Every run of the departures (:data:`DEPARTURE_RUNS`)."""
    return [_run("departures", name, task, method, seed, f"{DEPARTURES[name]} setting=vanilla {extra}")
            for name, groups in DEPARTURE_RUNS.items() for tasks, methods, seeds, extra in groups
            for task, method, seed in itertools.product(tasks, methods, seeds)]


def check_runs() -> list[Run]:
    """Every run of the checks (:data:`CHECKS`)."""
    return [_run("checks", name, task, method, seed, f"dataset=office31_lite0_t128 {words}")
            for name, groups in CHECKS.items() for tasks, methods, seeds, words in groups
            for task, method, seed in itertools.product(tasks, methods, seeds)]


def pseudo_label_runs() -> list[Run]:
    """Every run of the pseudo-label diagnosis (:data:`PSEUDO_LABELS`), each writing its diagnosis.json."""
    return [Run(Path(f"q{q:g}", task, method, f"seed{seed}"),
                dict(task=task, method=method, fraction=q, seed=seed, overrides=overrides),
                output="diagnosis.json", root=variant_root(overrides, OUT), kind="pseudo labels")
            for overrides, fractions, tasks, methods, seeds in PSEUDO_LABELS
            for q, task, method, seed in itertools.product(fractions, tasks, methods, seeds)]
