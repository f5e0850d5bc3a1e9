"""The Office-31 study on the real images (config/office31_lite_t128.yaml) as a section of docs/evidence.md: our table
beside the paper's (dmp/tables/reported_results.csv, labelled reported), each method's gain over source-only beside
the paper's gain, the measured effect of each departure from the paper's protocol, the deeper fine-tune, the
paper's protocol on a lent GPU, the optimiser of the rows the paper compares with, and the partial setting.

Reads only committed run folders (metrics.json: config, seed, git commit, dataset version, weights sha256):
``results/office31_lite/runs/<dataset>/vanilla/<task>/<method>/G/full-full/seed<k>/`` (the suite's runs: the study's
head-only form on :data:`~studies.office31.common.STUDY_DATASET`, the deeper form on
:data:`~studies.office31.common.DEEPER_DATASET`), ``results/office31_lite/departures/<departure>/<task>/<method>/seed<k>/``
and ``results/office31_lite/checks/<check>/...`` (declared in :mod:`studies.office31.declared`).

    python -m studies office31 [--root results/office31_lite]     # prints the section
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dmp.metrics import RecordError
from studies.office31.common import (STUDY, STUDY_DATASET, SUITE_RUNS, departure_runs, gain_table, provenance,
                                     reported, study_table)
from studies.office31.deeper import deeper_section
from studies.office31.departures import departure_table, diagnosis
from studies.office31.gpu import gpu_section
from studies.office31.partial import partial_section
from studies.office31.sgd import sgd_check
from studies.records import office31_runs


def section(root: Path = STUDY) -> list[str]:
    """The study's section from the runs under ``root`` (no run of the head-only form: no lines)."""
    runs = office31_runs(SUITE_RUNS.format(STUDY_DATASET), root)
    if runs.empty:
        return []
    dep = departure_runs(root)
    paper = reported()
    table, avgs = study_table(runs, paper)
    lines = ["## Office-31, real images, EfficientNet-Lite0 head fine-tuned", "",
             "The paper's own tasks on the 4,110 real Office-31 images with an ImageNet-pretrained backbone, run "
             "through the suite (config/office31_lite_t128.yaml: `snakemake --cores 2 "
             "all_tables --configfile config/office31_lite_t128.yaml`; tables in `results/office31_lite/tables/`): "
             "EfficientNet-Lite0 with its ImageNet weights, Office-31's preset for every task and method (Adam 2e-4, "
             "batch 50, lambda1 10, lambda2 5e3, 40 epochs of the source, the intra-class term from epoch 15, anchors "
             "every epoch, the backbone at 0.1x lr), the last iterate, no target label for any choice. The CPU form: "
             "the trunk is stored once (`dmp data extract-features --views 4`), the head (last 1x1 convolution + "
             "BatchNorm) is fine-tuned on it; the departures and their measured effect are below the tables.", "",
             provenance(runs) + " Rows without \"paper\" are ours: mean ± sample std over the seeds; Avg = the "
             "mean over the 6 tasks per seed, then mean ± std.", ""]
    lines += table + [""]
    gains = gain_table(avgs, paper)
    dep_lines, dep_gains = departure_table(runs, dep)
    if gains:
        lines += ["Gains over source-only (Avg of the 6 tasks, per seed; the paper's from its printed averages):", "",
                  *gains, ""]
    lines += ["### Departures from the paper and their measured effect", "",
              "Each row changes one thing of the study's form on A->W (seeds as listed; "
              "`snakemake study_office31_departures` runs them); each form reads its own stored data (the dataset "
              "column), made from the same images with the same weights file:", "", *dep_lines, "",
              *diagnosis(avgs, paper, dep_gains), ""]
    return (lines + deeper_section(dep, paper, avgs, runs, root) + gpu_section(paper, root)
            + sgd_check(runs, paper, root) + partial_section(avgs, root))


def main(argv=None) -> int:
    """``python -m studies office31 [--root DIR]``: print the section; no run of the study under the root, or a run
    record that cannot be right (:func:`dmp.metrics.load_record`), is one line on stderr and returns 2."""
    ap = argparse.ArgumentParser(prog="python -m studies office31", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=STUDY, help="the study's folder (default: results/office31_lite)")
    root = ap.parse_args(argv).root
    try:
        lines = section(root)
        if not lines:
            raise RecordError(f"no runs under {root} (the section reads {SUITE_RUNS.format(STUDY_DATASET)} there)")
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0
