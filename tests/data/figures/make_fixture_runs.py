"""Write the fixed runs the figure tests read (tests/data/figures/runs/...), once:

    .venv/bin/python tests/data/figures/make_fixture_runs.py

Synthetic, seeded numbers in the trainer's formats: metrics.json (status, accuracy, confusion matrix, class
weights, mean target prediction, accuracy_log, the run's config), log.csv and features.npz (16-d features, a
few samples per class).  On purpose: hyper-parameter point (lambda1, lambda2) = (50, 10) of the partial grid has
no run at all and (1, 1000) of the vanilla grid only seed 0; k = 3 on P->I is unfinished (``status: running``); the
partial VisDA source-only run is missing (a gap in the confusion figure and the weights figure); the shared-class
run of DMP with 20 target classes has only seed 1; the t-SNE source-only run finished without features.npz."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
from dmp.figures.plan import FigurePlan  # noqa: E402
from dmp.suite import variant_values  # noqa: E402

DIM = 16


def skip(run) -> bool:
    v = variant_values(run.variant)
    return ((run.dataset, v.get("lambda1"), v.get("lambda2")) == ("office31", 50.0, 10.0)
            or (v.get("lambda1"), v.get("lambda2"), run.seed) == (1.0, 1000.0, 1)
            or (run.dataset, run.setting, run.method) == ("visda2017", "partial", "source_only")
            or (run.target_split, run.method, run.seed) == ("first20", "dmp", 0))


def metrics_for(plan, run, rng) -> dict:
    suite = plan.suite
    classes = list(suite.class_names(run.dataset))
    c = len(classes)
    v = variant_values(run.variant)
    present = list(range(plan.n_classes(run.dataset, run.target_split)))
    if run.target_split == "partial":
        present = list(suite.spec(run.dataset).partial_classes)
    base = {"source_only": 60.0, "dmp": 72.0}.get(run.method, 70.0)
    base += -abs(np.log10(v.get("lambda1", 10.0) / 10.0)) * 3 - abs(np.log10(v.get("lambda2", 5e3) / 5e3)) * 2
    base -= 1.5 * (v.get("k", 1) - 1) + 0.2 * (len(present) - 10)
    acc = round(float(np.clip(base + rng.normal(0, 1.0), 0, 100)), 2)
    cm = np.zeros((c, c), dtype=int)
    for t in present:
        n = int(rng.integers(20, 40))
        correct = int(round(n * acc / 100))
        cm[t, t] = correct
        wrong = rng.choice(c, size=n - correct)
        np.add.at(cm[t], wrong, 1)
    pred = rng.dirichlet(np.ones(c) * 2)
    pred[present] += 0.5 if run.method == "dmp" else 0.1
    pred = pred / pred.sum()
    config = {**suite.run_config(run), "lambda1": v.get("lambda1", 10.0), "lambda2": v.get("lambda2", 5e3),
              "k": v.get("k", 1), "log_accuracy_every": v.get("log_accuracy_every", 0), "batch_size": 12}
    every = v.get("log_accuracy_every", 0)
    accuracy_log = [{"iteration": i, "epoch": i / 25, "accuracy": round(acc * (1 - np.exp(-i / 30)) + 8.0, 3)}
                    for i in range(0, 101, every)] if every else []
    return {"status": "running" if (run.task, v.get("k"), run.method) == ("P->I", 3, "dmp") else "complete",
            "accuracy": acc, "mean_class_accuracy": acc, "class_names": classes,
            "confusion_matrix": cm.tolist(),
            "class_weights": [round(float(x), 5) for x in (pred if run.method != "source_only" else np.ones(c) / c)],
            "target_mean_prediction": [round(float(x), 5) for x in pred], "iterations": 100,
            "iterations_per_epoch": 25, "accuracy_log": accuracy_log, "seed": run.seed, "config": config,
            "git_commit": "fixture", "code_version": "fixture", "dataset_version": "fixture"}


def features_for(plan, run, rng, per_class=3) -> dict:
    c = len(plan.suite.class_names(run.dataset))
    centres = np.random.default_rng(7).normal(0, 3, (c, DIM))
    spread = 1.0 if run.method == "dmp" else 2.0
    out = {}
    for domain, shift in (("source", 0.0), ("target", 1.5 if run.method == "source_only" else 0.3)):
        labels = np.repeat(np.arange(c), per_class)
        x = centres[labels] + shift + rng.normal(0, spread, (len(labels), DIM))
        predicted = np.where(rng.random(len(labels)) < 0.8, labels, rng.integers(0, c, len(labels)))
        out.update({f"{domain}_features": x.astype(np.float32), f"{domain}_labels": labels,
                    f"{domain}_pred": predicted, f"{domain}_index": np.arange(len(labels))})
    t = out["target_features"].astype(np.float64)
    tl = out["target_labels"]
    i = np.arange(len(tl))
    j = np.array([rng.choice(np.flatnonzero((tl == tl[a]) & (i != a))) for a in i])
    alphas = (0.0, 0.1, 0.3, 0.5)
    out["interp_alpha"] = np.repeat(np.array(alphas, np.float32), len(i))
    out["interp_features"] = np.concatenate([a * t[i] + (1 - a) * t[j] for a in alphas]).astype(np.float32)
    out["interp_labels"] = np.tile(tl, len(alphas))
    out["interp_pred"] = np.where(rng.random(len(out["interp_labels"])) < 0.85, out["interp_labels"],
                                  rng.integers(0, c, len(out["interp_labels"])))
    return out


def main():
    config = yaml.safe_load((HERE / "figures_config.yaml").read_text())
    plan = FigurePlan(config)
    shutil.rmtree(HERE / "runs", ignore_errors=True)
    rng = np.random.default_rng(2025)
    with_features = {r for n in ("dprime", "tsne", "interpolation_tsne") for r in plan.runs(n)}
    for run in plan.all_runs():
        if skip(run):
            continue
        folder = ROOT / run.folder(config["results"])
        folder.mkdir(parents=True, exist_ok=True)
        metrics = metrics_for(plan, run, rng)
        (folder / "metrics.json").write_text(json.dumps(metrics, sort_keys=True) + "\n")
        if variant_values(run.variant).get("log_accuracy_every"):
            rows = ["iteration,lr,loss,ce,inter,intra,align,entropy"]
            for it in range(0, 100, 10):
                loss = 2.5 * np.exp(-it / 40) + 0.3 + rng.normal(0, 0.05)
                rows.append(f"{it},0.0002,{loss:.4f},{loss * 0.6:.4f},0.1,0.1,0.01,0")
            (folder / "log.csv").write_text("\n".join(rows) + "\n")
        if run in with_features and not (run.dataset, run.method) == ("visda2017", "source_only"):
            np.savez_compressed(folder / "features.npz", **features_for(plan, run, rng,
                                                                       4 if run.dataset == "imageclef" else 6))
        print(folder.relative_to(ROOT))


if __name__ == "__main__":
    main()
