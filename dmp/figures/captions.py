"""Captions of the figures (reStructuredText, for the Snakemake report): what is plotted, which paper figure it
reproduces with the paper's settings, and the settings of *this* build (a smaller grid on the demo says so)."""
from __future__ import annotations

from dmp.figures.plan import FigurePlan


def _set(values) -> str:
    return "{" + ", ".join(f"{float(v):g}" if not isinstance(v, str) else v for v in values) + "}"


def _tasks(tasks) -> str:
    return ", ".join(t.replace("->", "→") for t in tasks)


def _n_classes(plan, dataset, spec) -> str:
    return ", ".join(str(plan.n_classes(dataset, s)) for s in spec["target_splits"])


def _seeds(spec) -> str:
    seeds = spec["seeds"] if "seed" not in spec else [spec["seed"]]
    return f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({', '.join(map(str, seeds))})"


PAPER = {
    "hyper": "Paper, Fig. Hyper: 6 × 6 grids, vanilla ImageCLEF I→P, P→I with λ1 ∈ {0.1, 0.5, 1, 5, 10, 50}, "
             "λ2 ∈ {100, 500, 1000, 5000, 10000, 50000}; partial Office-31 A→W, W→A with "
             "λ1 ∈ {0.5, 1, 5, 10, 50, 100}, λ2 ∈ {1, 5, 10, 50, 100, 500}; 50 repetitions per cell.",
    "k": "Paper, Fig. Err&Sen&Con (a): the six ImageCLEF tasks at (λ1, λ2) = (10, 5000); mean (cyan) and std "
         "(brown) over tasks.",
    "dprime": "Paper, Fig. Err&Sen&Con (b)-(c): ImageCLEF, error and eigenvalue curves against d', the "
              "(b_s - 1)-th error index highlighted by a horizontal dashed line.",
    "convergence": "Paper, Fig. Err&Sen&Con (d): Office-31 A→W, recognition rate and objective against training.",
    "tsne": "Paper, Fig. tSNE: VisDA-2017, 100 images per class; rows: coloured by domain, by class, target only "
            "by class; columns: ResNet-101 (source only), CDAN+E (not run here), DMP.",
    "confusion": "Paper, Fig. Confusion_Matrix: VisDA-2017 target, ResNet and DMP under the vanilla and partial "
                 "settings.",
    "weights": "Paper, Fig. Class_Weight&Overlap (a)-(b): VisDA-2017 S→R6 class weights of ResNet-50 and DMP, "
               "outlier classes in orange.",
    "shared_classes": "Paper, Fig. Class_Weight&Overlap (c)-(d): Office-31 A→W and W→A, 10 to 31 target classes "
                      "(the first N in alphabetical order), source 31 classes; ResNet, DANN, PADA (not run here), "
                      "DMP.",
    "interpolation_tsne": "Paper, Fig. DiscriInterpola: VisDA-2017, t-SNE of the interpolations for α = 0.1, 0.3, "
                          "0.5; ∘ correct, × misclassified.",
}


def caption(plan: FigurePlan, name: str) -> str:
    spec = plan.spec(name)
    ds = spec.get("dataset", "")
    what = {
        "hyper": lambda: "Target accuracy (%) over the λ1 × λ2 grid (mean over seeds), the peak framed in red. "
                         "This build: " + "; ".join(
                             f"{p['setting']} {p['dataset']} {_tasks(p['tasks'])}, {p.get('method', 'dmp')}, "
                             f"{len(p['lambda1'])} × {len(p['lambda2'])} grid λ1 ∈ {_set(p['lambda1'])}, "
                             f"λ2 ∈ {_set(p['lambda2'])}" for p in spec["panels"]) + f"; {_seeds(spec)}.",
        "k": lambda: f"Target accuracy (%) against the Top-k truncation k of the intra-class loss, per task, with the "
                     f"mean (cyan, dashed) and the standard deviation (brown, dashed, right axis) over tasks. This "
                     f"build: {ds} {_tasks(spec['tasks'])}, k ∈ {_set(spec['ks'])}, {_seeds(spec)}.",
        "dprime": lambda: f"Error indices e^G(d') and e^AG(d') (Theorems Grass_Bound and AffineGrass_Bound, "
                          f"dmp.manifolds.error_index) and the covariance eigenvalues of source and target batches "
                          f"against d', from the last manifold layer's features of a trained run, averaged over "
                          f"{spec['batches']} random batch pairs of the run's batch size b_s; the dashed line is "
                          f"e(b_s - 1). This build: {ds} {_tasks([spec['task']])}, {spec['method']}, {_seeds(spec)}.",
        "convergence": lambda: f"Target accuracy (measured every {spec['log_accuracy_every']} iterations for this "
                               f"plot only, never to select a model) and the objective L on the training batches "
                               f"against epochs, mean over seeds (band: std). This build: {ds} "
                               f"{_tasks([spec['task']])}, {spec['method']}, {_seeds(spec)}.",
        "tsne": lambda: f"2-D t-SNE (scikit-learn) of the last manifold layer's features, up to {spec['per_class']} "
                        f"source and target samples per class; rows: coloured by domain, by class, target only. "
                        f"This build: {ds} {_tasks([spec['task']])}, methods {', '.join(spec['methods'])}, "
                        f"{_seeds(spec)}.",
        "confusion": lambda: "Target confusion matrices, rows normalised to % of the true class, mean over seeds "
                             "(partial setting: the target's classes only). This build: " + f"{ds} "
                             f"{_tasks([spec['task']])}, " + ", ".join(f"{p['method']} ({p['setting']})"
                                                                        for p in spec["panels"]) + f", {_seeds(spec)}.",
        "weights": lambda: f"Partial class weights (Eq. ClassWeight) per class, mean over seeds; shared classes (the "
                           f"target's) in blue, outlier classes in orange. Source-only runs train without weights: "
                           f"theirs are Eq. ClassWeight applied to the model's mean target prediction. This build: "
                           f"{ds} {_tasks([spec['task']])} (partial), methods {', '.join(spec['methods'])}, "
                           f"{_seeds(spec)}.",
        "shared_classes": lambda: f"Target accuracy (%) against the number of target classes (partial setting, source "
                                  f"with every class). This build: {ds} {_tasks(spec['tasks'])}, target splits "
                                  f"{', '.join(spec['target_splits'])} ({_n_classes(plan, ds, spec)} classes), "
                                  f"methods {', '.join(spec['methods'])}, {_seeds(spec)}.",
        "interpolation_tsne": lambda: f"2-D t-SNE of interpolated target features α h_i + (1 - α) h_j of same-class "
                                      f"pairs (last manifold layer), one panel per α of the interpolation table, "
                                      f"coloured by class; ∘ classified correctly, × misclassified. This build: {ds} "
                                      f"{_tasks([spec['task']])}, {spec['method']}, "
                                      f"α ∈ {{{', '.join(spec['alphas'])}}}, up to {spec['per_class']} pairs per "
                                      f"class, {_seeds(spec)}.",
    }[name]()
    datasets = {spec.get("dataset")} | {p["dataset"] for p in spec.get("panels", []) if "dataset" in p}
    if "demo" in datasets:
        what += (" Demo build: a small version of the paper's figure (the settings above, on the generated demo "
                 "shapes) that checks the pipeline, not the paper's result.")
    return f"{what}\n\n{PAPER[name]}\n\nMissing runs are gaps, listed under the figure and in the CSV's note column."
