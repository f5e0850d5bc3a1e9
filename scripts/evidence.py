"""Evidence that DMP behaves as the paper reports, on data small enough for a CPU (not part of the product):

* ``demo``: the generated shapes, with the backbone pre-trained on the demo's stand-in for ImageNet
  (``python -m dmp pretrain-demo``), vanilla and partial tasks of the demo tables;
* ``office_caltech10``: GoogLeNet features of Office-Caltech10, all six tasks (identity backbone);
* ``mnist_usps``: MNIST <-> USPS digits, a small CNN pre-trained on the demo's shapes in grey;

with source-only (both forms), DMP and its ablations (vanilla) or source-only, DMP, DMP+ent (partial), 3 seeds (the
demo and digits: 10), the paper's hyper-parameters (presets of dmp/config.py), the model at the last iteration (no
target labels). Also ``--study weak`` (hand-crafted features brought in as a user brings their own: the demo images
on all 12 tasks and the digits, as pixels, gradient histograms or bags of visual words), ``--study weak_variants``
(what changes DMP on the weakest of them), ``--study digits_init`` (how the digits CNN starts: pre-trained at lr x1
or x0.1, or random), ``--study geometry`` (where the main study's runs leave the two domains:
scripts/diagnose_geometry.py on their features.npz), ``--study anchors`` (the anchor/BatchNorm modes), ``--study
weights`` (the vanilla class weights) and ``--study grid`` (the paper's lambda1 x lambda2 grid on one demo task
and on Office-Caltech10 A->W), ``--study comparison`` (the registered comparison methods, DANN, CDAN+E, ..., with
their own papers' hyper-parameters on the main study's tasks and seeds, tabled beside the source-only and DMP rows
that this study runs with them, same tasks, seeds and weights; ``--method`` picks some). Every run is a normal
training run under ``results/evidence/runs`` (metrics.json: config, seed, git commit, dataset version); this script
launches them and aggregates their metrics.json files into ``docs/evidence.md`` (mean +- sample std over seeds).

    python scripts/evidence.py [--seeds N] [--jobs 2] [--study main anchors grid] [--only demo] [--method dann]
                               [--report-only]

The studies are declared in ``evidence_studies.py``, their runs made by ``study_runs.py``, the report is built by
``evidence_report.py``.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import sys
from pathlib import Path

import shared_copies
from evidence_report import collect, collect_geometry, collect_prototypes, render
from evidence_studies import ROOT, STUDIES, jobs_for
from study_runs import pretrained_weights, run_one

sys.path.insert(0, str(ROOT))


def run_prototypes(job):
    """The diagnostic of scripts/diagnose_prototypes.py for one run, written to ``out/prototypes.json`` (skipped
    when that file exists)."""
    import torch

    from diagnose_prototypes import diagnose
    from dmp.io import write_json
    cfg, out = job
    if (out / "prototypes.json").exists():
        return
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "prototypes.json", diagnose(dict(cfg, threads=1, device="cpu")))


def run_job(study_job):
    study, job = study_job
    return run_prototypes(job) if study == "prototypes" else run_one(job)


def write_geometry(out_root: Path) -> int:
    """``--study geometry``: ``geometry.json`` (scripts/diagnose_geometry.py) beside every vanilla run of the main
    study that has its ``features.npz`` and no ``geometry.json`` yet; returns how many were written."""
    from diagnose_geometry import geometry
    from dmp.io import write_json
    todo = [p.parent for p in sorted(out_root.glob("main/*/vanilla/*/*/default/seed*/features.npz"))
            if not (p.parent / "geometry.json").exists()]
    for run in todo:
        write_json(run / "geometry.json", geometry(run))
    return len(todo)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=None, help="seeds per task (default 3; the main study's demo 10)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--study", nargs="+", default=["main"],
                    choices=STUDIES)
    ap.add_argument("--only", action="append", help="dataset(s) to run")
    ap.add_argument("--method", action="append", help="method(s) to run (--study comparison; default: all)")
    ap.add_argument("--out", default=str(ROOT / "results" / "evidence" / "runs"))
    ap.add_argument("--report", default=str(ROOT / "docs" / "evidence.md"))
    ap.add_argument("--report-only", action="store_true", help="only rebuild the report from the runs on disk")
    args = ap.parse_args(argv)
    out_root = Path(args.out)
    if not args.report_only:
        shared_copies.link()  # the developers' copies of office_caltech10 and mnist_usps, where they have them
    weights = {} if args.report_only else pretrained_weights(out_root, args.only)
    if {"weak", "weak_variants"} & set(args.study) and not args.report_only:
        from weak_features import declare
        declare()
    jobs = [] if args.report_only else [(study, (cfg, out_root / out)) for study in args.study if study != "geometry"
                                        for cfg, out in jobs_for(study, args.seeds, args.only, weights, args.method)]
    from tqdm import tqdm
    if jobs:  # --report-only: none (no pool, no progress bar)
        with cf.ProcessPoolExecutor(args.jobs) as pool:
            for _ in tqdm(pool.map(run_job, jobs), total=len(jobs), desc="evidence runs"):
                pass
    if "geometry" in args.study and not args.report_only:
        print(f"geometry.json written for {write_geometry(out_root)} run(s)")
    return write_report(out_root, Path(args.report))


def write_report(out_root: Path, report: Path) -> int:
    """Render the report from the runs under ``out_root`` into ``report`` and print it; returns 0. No run there, or
    a run record that cannot be right (dmp.metrics.load_record: cut off, an accuracy outside [0, 100], a key
    missing): one line on stderr naming the folder or the file, returns 2, and ``report`` is left as it was."""
    from dmp.metrics import RecordError
    try:
        runs = collect(out_root)
        if runs.empty:
            raise RecordError(f"no runs under {out_root} (the report reads its */*/*/*/*/*/seed*/metrics.json)")
        text = render(runs, collect_prototypes(out_root), collect_geometry(out_root))
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
