"""Mutation pass: plant one-line bugs of the kinds a wrong DMP has (a swapped sign, source for target, a wrong lambda,
a detached tensor, an off-by-one, a wrong preset, a transposed confusion matrix, a mean over samples for a mean of
class means, ...) in the trainer, the DMP method, the anchors, the schedule, the class weights, the evaluation, the
presets, the comparison methods and their losses, the tables and the metrics checks, ONE AT A TIME, in a copy of the
repository, run the relevant non-slow tests with -x, record killed / survived and the first failing test with its
message, and restore the file.

Never run it on the checkout others work in: it edits the code under test. Make a copy first:

    git worktree add /tmp/mut HEAD
    .venv/bin/python tests/mutation_pass.py --tree /tmp/mut --out /tmp/mutation.json [--only ID ...]

A mutant whose text no longer matches the code (the code moved) is reported as "not applied": update its strings.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

# (id, file, kind, old text, new text)
M = "dmp/methods/dmp.py"
T, A, S, E, W, C = "dmp/train/trainer.py", "dmp/anchors.py", "dmp/train/schedule.py", "dmp/train/evaluate.py", \
    "dmp/weighting.py", "dmp/config.py"
AD, PW, AG, MX = "dmp/losses/adversarial.py", "dmp/losses/partial_weights.py", "dmp/tables/aggregate.py", \
    "dmp/metrics.py"
MT = {n: f"dmp/methods/{n}.py" for n in ("bsp", "cdan", "dann", "etn", "hafn", "iwan", "pada", "san")}
MUTANTS = [
    ('inter_start_off_by_one', M, 'off-by-one',
     'if it >= sched["inter_start_iteration"]:',
     'if it > sched["inter_start_iteration"]:'),
    ('intra_start_off_by_one', M, 'off-by-one',
     'if it >= sched["intra_start_iteration"]:',
     'if it > sched["intra_start_iteration"]:'),
    ('intra_gets_source_feats', M, 'source for target',
     'losses.intra_class_loss(ht, p_t, class_means,',
     'losses.intra_class_loss(hs, p_t, class_means,'),
    ('inter_gets_target_feats', M, 'target for source',
     'losses.inter_class_loss(hs, y_s, means,',
     'losses.inter_class_loss(ht, y_s, means,'),
    ('intra_unweighted', M, 'wrong weight',
     'class_weights=w_intra,',
     'class_weights=None,'),
    ('intra_grad_p_ignored', M, 'config ignored',
     'grad_p=cfg["intra_grad_p"]',
     'grad_p=True'),
    ('align_weighted_in_vanilla', M, 'wrong setting',
     'w = w_intra if cfg["setting"] == "partial" else None',
     'w = w_intra if cfg["setting"] == "vanilla" else None'),
    ('align_source_vs_source', M, 'source for target',
     'cfg["metric"], hs, ht, dim=',
     'cfg["metric"], hs, [h.flip(0) for h in hs], dim='),
    ('align_dim_ignored', M, 'config ignored',
     'dim=cfg["grassmann_dim"]',
     'dim=None'),
    ('entropy_detached', M, 'detached tensor',
     'out["entropy"] = losses.entropy_loss(p_t)',
     'out["entropy"] = losses.entropy_loss(p_t.detach())'),
    ('lambdas_swapped', M, 'wrong lambda',
     'cfg["lambda1"] * (terms["inter"] + terms["intra"]) + cfg["lambda2"] * terms["align"]',
     'cfg["lambda2"] * (terms["inter"] + terms["intra"]) + cfg["lambda1"] * terms["align"]'),
    ('entropy_sign', M, 'swapped sign',
     '+ cfg["entropy_weight"] * terms["entropy"]',
     '- cfg["entropy_weight"] * terms["entropy"]'),
    ('intra_sign', M, 'swapped sign',
     'cfg["lambda1"] * (terms["inter"] + terms["intra"])',
     'cfg["lambda1"] * (terms["inter"] - terms["intra"])'),
    ('ce_detached', T, 'detached tensor',
     'ce = F.cross_entropy(logits_s, ys)',
     'ce = F.cross_entropy(logits_s.detach(), ys)'),
    ('p_t_detached', T, 'detached tensor',
     'ctx.p_t = torch.softmax(ctx.logits_t, 1)',
     'ctx.p_t = torch.softmax(ctx.logits_t.detach(), 1)'),
    ('p_t_wrong_dim', T, 'wrong axis',
     'ctx.p_t = torch.softmax(ctx.logits_t, 1)',
     'ctx.p_t = torch.softmax(ctx.logits_t, 0)'),
    ('target_forward_on_source', T, 'source for target',
     'ctx.feats_t, ctx.logits_t = self.forward(xt)',
     'ctx.feats_t, ctx.logits_t = self.forward(xs)'),
    ('accumulate_target_feats', T, 'target for source',
     'self.anchors.add_source(feats_s, ys)',
     'self.anchors.add_source(ctx.feats_t, ys)'),
    ('accumulate_source_probs', T, 'source for target',
     'return loss, {"ce": ce, **terms}, feats_s, ctx.p_t',
     'return loss, {"ce": ce, **terms}, feats_s, torch.softmax(logits_s, 1)'),
    ('lr_progress_off_by_one', T, 'off-by-one',
     'progress = it / self.sched["iterations"]',
     'progress = (it + 1) / self.sched["iterations"]'),
    ('refresh_off_by_one', T, 'off-by-one',
     'it % self.period == 0 and (it > 0',
     '(it + 1) % self.period == 0 and (it > 0'),
    ('refresh_mode_swapped', T, 'wrong mode',
     '(it > 0 or cfg["anchor_mode"] == "full_pass")',
     '(it > 0 or cfg["anchor_mode"] == "accumulate")'),
    ('anchor_pass_on_target', T, 'target for source',
     'for x, y in self._anchor_batches(self.task.source_eval):',
     'for x, y in self._anchor_batches(self.task.target_eval):'),
    ('anchor_pass_source_train', T, 'wrong split',
     'for x, y in self._anchor_batches(self.task.source_eval):',
     'for x, y in self._anchor_batches(self.task.source_train):'),
    ('pi_on_source', T, 'source for target',
     'for x, _ in self._anchor_batches(self.task.target_eval):',
     'for x, _ in self._anchor_batches(self.task.source_eval):'),
    ('pi_logits_not_softmax', T, 'wrong axis',
     'self.anchors.add_target(torch.softmax(self.forward(x)[1], 1))',
     'self.anchors.add_target(torch.softmax(self.forward(x)[1], 0))'),
    ('weights_vanilla_always', T, 'wrong setting',
     'self.weights = class_weights(self.anchors.mean_prediction, self.task.num_classes, cfg["setting"])',
     'self.weights = class_weights(self.anchors.mean_prediction, self.task.num_classes, "vanilla")'),
    ('anchor_eval_bn_train_mode', T, 'wrong mode',
     '            self.model.eval()\n            yield from eval_loader',
     '            self.model.train()\n            yield from eval_loader'),
    ('final_eval_on_source', T, 'source for target',
     'feats, probs, labels = predict(self.model, task.target_eval, self.device, cfg["eval_batch_size"],',
     'feats, probs, labels = predict(self.model, task.source_eval, self.device, cfg["eval_batch_size"],'),
    ('report_args_swapped', T, 'transposed',
     'classification_report(probs.argmax(1).numpy(), labels.numpy(), task.classes)',
     'classification_report(labels.numpy(), probs.argmax(1).numpy(), task.classes)'),
    ('source_mean_is_mean_of_class_means', A, 'mean of class means',
     'self.means = [(s.sum(0) / self._count.sum()).float() for s in self._sum]',
     'self.means = [(s / n).mean(0).float() for s in self._sum]'),
    ('pred_sum_mean', A, 'mean vs sum',
     'self._pred_sum += probs.detach().double().sum(0)',
     'self._pred_sum += probs.detach().double().mean(0)'),
    ('pred_count_batches', A, 'wrong count',
     'self._pred_count += probs.shape[0]',
     'self._pred_count += 1'),
    ('sums_not_reset', A, 'window not reset',
     '            self.mean_prediction = (self._pred_sum / self._pred_count).float()\n        self._reset_sums()',
     '            self.mean_prediction = (self._pred_sum / self._pred_count).float()'),
    ('count_presence', A, 'wrong count',
     'self._count += onehot.sum(0)',
     'self._count += onehot.sum(0).clamp_max(1)'),
    ('anneal_sign', S, 'swapped sign',
     'return (1.0 + 10.0 * progress) ** -0.75',
     'return (1.0 + 10.0 * progress) ** 0.75'),
    ('anneal_gamma', S, 'wrong constant',
     'return (1.0 + 10.0 * progress) ** -0.75',
     'return (1.0 + 1.0 * progress) ** -0.75'),
    ('epoch_floor', S, 'off-by-one',
     'math.ceil(n_source / cfg["batch_size"])',
     'n_source // cfg["batch_size"]'),
    ('epochs_rounded_first', S, 'rounding',
     'return int(round(float(value[:-2]) * iterations_per_epoch))',
     'return int(round(float(value[:-2]))) * iterations_per_epoch'),
    ('refreshes_count', S, 'off-by-one',
     'refreshes = math.ceil(total / period) - (1 if cfg["anchor_mode"] == "accumulate" else 0)',
     'refreshes = math.ceil(total / period)'),
    ('inter_start_from_intra', S, 'wrong key',
     '"inter_start_iteration": at_iteration(cfg["inter_start"], per_epoch)',
     '"inter_start_iteration": at_iteration(cfg["intra_start"], per_epoch)'),
    ('lr_compounds', S, 'compounding',
     'group["lr"] = group["initial_lr"] * factor',
     'group["lr"] = group["lr"] * factor'),
    ('cm_transposed', E, 'transposed confusion matrix',
     'np.add.at(cm, (labels, pred), 1)',
     'np.add.at(cm, (pred, labels), 1)'),
    ('mca_is_overall', E, 'mean over samples',
     '"mean_class_accuracy": float(np.mean(list(per_class.values()))),',
     '"mean_class_accuracy": 100.0 * float((pred == labels).mean()),'),
    ('per_class_by_column', E, 'transposed',
     '100.0 * cm[i, i] / cm[i].sum()',
     '100.0 * cm[i, i] / cm[:, i].sum()'),
    ('present_by_column', E, 'transposed',
     'present = cm.sum(1) > 0',
     'present = cm.sum(0) > 0'),
    ('predict_softmax_dim0', E, 'wrong axis',
     'probs.append(torch.softmax(logits.float(), 1).cpu())',
     'probs.append(torch.softmax(logits.float(), 0).cpu())'),
    ('weights_setting_flipped', W, 'wrong setting',
     'if setting == "vanilla" or mean_prediction is None:',
     'if setting == "partial" or mean_prediction is None:'),
    ('align_rows_unweighted', W, 'wrong weight',
     'rows = w.to(layers[0])[y_s].unsqueeze(1)',
     'rows = w.to(layers[0]).mean()'),
    ('demo_intra_start', C, 'wrong preset',
     'epochs=16,\n             intra_start="6ep"',
     'epochs=16,\n             intra_start="5ep"'),
    ('digits_constant_lr', C, 'wrong preset',
     'sample_norm=True, lr_schedule="anneal", epochs=24,',
     'sample_norm=True, lr_schedule="constant", epochs=24,'),
    ('visda_partial_lambda2', C, 'wrong preset',
     '("visda2017", "partial"): dict(_VISDA, backbone="resnet50", lambda1=10.0, lambda2=1.0)',
     '("visda2017", "partial"): dict(_VISDA, backbone="resnet50", lambda1=10.0, lambda2=5e3)'),
    ('visda_epoch', C, 'wrong preset',
     'lr_schedule="anneal", epoch_iterations=1000, epochs=30',
     'lr_schedule="anneal", epoch_iterations=100, epochs=30'),
    ('caltech_batch', C, 'wrong preset',
     'standardize=True,\n                                          batch_size=32)',
     'standardize=True,\n                                          batch_size=50)'),
    # -- DMP's options read from the config, and the units of the trainer, the anchors and the evaluation --
    ('inter_num_classes_batch', M, 'wrong axis',
     'means, p_t.shape[1],',
     'means, p_t.shape[0],'),
    ('inter_absent_ignored', M, 'config ignored',
     'absent=cfg["inter_absent"]',
     'absent="zero"'),
    ('intra_k_ignored', M, 'config ignored',
     'k=cfg["k"]',
     'k=1'),
    ('le_eps_ignored', M, 'config ignored',
     'eps=cfg["le_eps"])',
     ')'),
    ('weight_norm_ignored', M, 'config ignored',
     'weighting.normalise_weights(weights, cfg["weight_norm"])',
     'weighting.normalise_weights(weights, "mean_one")'),
    ('intra_outside_lambda1', M, 'wrong lambda',
     'cfg["lambda1"] * (terms["inter"] + terms["intra"])',
     'cfg["lambda1"] * terms["inter"] + terms["intra"]'),
    ('progress_per_epoch', T, 'wrong unit',
     'progress = it / self.sched["iterations"]',
     'progress = it / self.iters_per_epoch'),
    ('class_means_over_total', A, 'wrong count',
     'self.class_means = [(s / n).float() for s in self._sum]',
     'self.class_means = [(s / self._count.sum()).float() for s in self._sum]'),
    ('accuracy_fraction', E, 'wrong unit',
     '"accuracy": 100.0 * float((pred == labels).mean()),',
     '"accuracy": float((pred == labels).mean()),'),
    ('pi_complement', W, 'wrong weight',
     'w = mean_prediction.detach().double().clamp_min(0)',
     'w = (1 - mean_prediction.detach().double()).clamp_min(0)'),
    ('period_off_by_one', S, 'off-by-one',
     'period = max(1, at_iteration(cfg["anchor_period"], per_epoch))',
     'period = max(1, at_iteration(cfg["anchor_period"], per_epoch) - 1)'),
    ('anchor_batches_unshuffled', T, 'order ignored',
     'yield from eval_loader(dataset, cfg["batch_size"], self.workers, order=order,',
     'yield from eval_loader(dataset, cfg["batch_size"], self.workers, order=None,'),
    ('target_mean_pred_of_source', T, 'wrong samples',
     '"target_mean_prediction": [float(p) for p in probs.mean(0)]',
     '"target_mean_prediction": [float(p) for p in probs[: len(probs) // 2].mean(0)]'),
    # -- the terms take the lists of all the manifold layers in one call: a wrong layer is a wrong wiring --
    ('align_first_layer_only', M, 'wrong layer',
     'cfg["metric"], hs, ht, dim=',
     'cfg["metric"], hs[:1], ht[:1], dim='),
    ('align_layers_crossed', M, 'wrong layer',
     'cfg["metric"], hs, ht, dim=',
     'cfg["metric"], hs, [ht[-1]] + ht[1:], dim='),
    ('intra_last_layer_only', M, 'wrong layer',
     'losses.intra_class_loss(ht, p_t, class_means,',
     'losses.intra_class_loss(ht[-1:], p_t, class_means[-1:],'),
    ('inter_first_layer_twice', M, 'wrong layer',
     'losses.inter_class_loss(hs, y_s, means,',
     'losses.inter_class_loss([hs[0]] * len(hs), y_s, [means[0]] * len(hs),'),
    ('entropy_left_out', M, 'term dropped',
     'if not self.entropy:',
     'if True:'),
    ('metrics_weights_uniform', T, 'wrong weight',
     '"class_weights": [float(w) for w in self.weights]',
     '"class_weights": [1.0 / len(self.weights)] * len(self.weights)'),
    # -- the comparison methods, their losses, the tables and the metrics checks (tests: TESTS_BY_DIR) --
    ('grl_no_minus_one', AD, 'wrong schedule',
     "return 2.0 / (1.0 + math.exp(-gamma * progress)) - 1.0",
     "return 2.0 / (1.0 + math.exp(-gamma * progress))"),
    ('grl_not_reversed', AD, 'swapped sign',
     "return -ctx.coeff * grad, None",
     "return ctx.coeff * grad, None"),
    ('dropout_no_rescale', AD, 'wrong constant',
     "x = x * keep / (1.0 - p)",
     "x = x * keep"),
    ('stream_offset_lost', AD, 'dependent random streams',
     "int(stream) * 0x9E3779B9",
     "int(stream) * 2**40"),
    ('masks_same_every_iteration', AD, 'seed ignored',
     "+ int(iteration) + 7",
     "+ 7"),
    ('domain_loss_not_halved', AD, 'wrong constant',
     "return 0.5 * (ls.mean() + lt.mean())",
     "return ls.mean() + lt.mean()"),
    ('weight_t_ignored', AD, 'wrong weight',
     "lt = lt * weight_t.reshape(-1)",
     "lt = lt"),
    ('multilinear_order', AD, 'transposed',
     "(g.unsqueeze(2) * f.unsqueeze(1))",
     "(f.unsqueeze(2) * g.unsqueeze(1))"),
    ('random_map_scale', AD, 'wrong constant',
     "/ math.sqrt(self.dim)",
     "/ self.dim"),
    ('random_map_threshold', AD, 'off-by-one',
     "return feature_dim * num_classes > threshold",
     "return feature_dim * num_classes >= threshold"),
    ('entropy_eps_dropped', AD, 'wrong constant',
     "-(p * torch.log(p + eps)).sum(1)",
     "-(p * torch.log(p)).sum(1)"),
    ('entropy_weights_norm_not_detached', AD, 'detached tensor',
     "return w / w.detach().mean()",
     "return w / w.mean()"),
    ('entropy_weights_sign', AD, 'swapped sign',
     "w = 1.0 + torch.exp(-h)",
     "w = 1.0 + torch.exp(h)"),
    ('pada_sum_not_max', PW, 'wrong normalisation',
     "g / top.clamp_min(1e-300)",
     "g / g.sum().clamp_min(1e-300)"),
    ('complement_not_detached', PW, 'detached tensor',
     "w = 1.0 - p_source.detach()",
     "w = 1.0 - p_source"),
    ('complement_not_normalised', PW, 'wrong normalisation',
     "return w / (w.mean() + eps)",
     "return w"),
    ('leaky_coeff', PW, 'wrong constant',
     "math.log(coeff)",
     "math.log(coeff + 1)"),
    ('cdan_conditioning_not_detached', MT["cdan"], 'detached tensor',
     "g = p.detach()",
     "g = p"),
    ('cdan_e_weights_coeff_dropped', MT["cdan"], 'wrong schedule',
     "losses.entropy_weights(p[:n_s], coeff), losses.entropy_weights(p[n_s:], coeff)",
     "losses.entropy_weights(p[:n_s]), losses.entropy_weights(p[n_s:])"),
    ('cdan_trade_off_ignored', MT["cdan"], 'config ignored',
     'return {"transfer": cfg["dann_trade_off"]}',
     'return {"transfer": 1.0}'),
    ('san_gamma_dropped', MT["san"], 'wrong weight',
     "coeff * gamma[k]), generator=gen)",
     "coeff), generator=gen)"),
    ('san_instance_weights_not_detached', MT["san"], 'detached tensor',
     "g = p.detach()",
     "g = p"),
    ('san_entropy_outside_trade_off', MT["san"], 'wrong lambda',
     '"entropy": t * cfg["san_entropy_weight"]',
     '"entropy": cfg["san_entropy_weight"]'),
    ('pada_weights_from_iteration_0', MT["pada"], 'off-by-one',
     'ctx.iteration < ctx.sched["anchor_period"]',
     "ctx.iteration < 0"),
    ('pada_trade_off_dropped', MT["pada"], 'config ignored',
     'terms["ce_weighted"] + ctx.cfg["dann_trade_off"] * terms["transfer"]',
     'terms["ce_weighted"] + terms["transfer"]'),
    ('iwan_same_stream', MT["iwan"], 'dependent random streams',
     "h_s.device, stream=1)",
     "h_s.device, stream=0)"),
    ('iwan_weight_disc_factor', MT["iwan"], 'wrong constant',
     'return {"weight_disc": 1.5 * t,',
     'return {"weight_disc": t,'),
    ('etn_transfer_factor', MT["etn"], 'wrong constant',
     '"transfer": 2.0 * cfg["dann_trade_off"]',
     '"transfer": cfg["dann_trade_off"]'),
    ('etn_aux_not_detached', MT["etn"], 'detached tensor',
     "torch.cat([h_s, h_t]).detach(), generator=gen), c)",
     "torch.cat([h_s, h_t]), generator=gen), c)"),
    ('bsp_k_ignored', MT["bsp"], 'config ignored',
     'k=ctx.cfg["bsp_k"]',
     "k=1"),
    ('hafn_radius_ignored', MT["hafn"], 'config ignored',
     'r = ctx.cfg["hafn_radius"]',
     "r = 25.0"),
    ('dann_masks_global', MT["dann"], 'seed ignored',
     'gen = losses.step_generator(ctx.cfg["seed"], ctx.iteration, h_s.device)',
     "gen = None"),
    ('accuracy_100_refused', MX, 'off-by-one',
     "0 <= value <= 100):",
     "0 <= value < 100):"),
    ('time_zero_refused', MX, 'off-by-one',
     'metrics[key] >= 0):',
     'metrics[key] > 0):'),
    ('missing_key_is_expected', MX, 'wrong default',
     "have = config[key] if key in config else _default(key)",
     "have = config.get(key, want)"),
    ('weights_sha_unchecked', MX, 'check skipped',
     "weights_sha256 == _sha256(want)",
     "weights_sha256 != ''"),
    ('std_ddof0', AG, 'wrong estimator',
     'agg(mean="mean", std="std", n="count")',
     'agg(mean="mean", std=lambda v: v.std(ddof=0), n="count")'),
]

TESTS = ["tests/test_wiring.py", "tests/test_anchors_independent.py", "tests/test_metrics_unbalanced.py",
         "tests/test_lr_presets.py", "tests/test_weighting.py", "tests/test_schedule.py", "tests/test_trainer.py",
         "tests/test_losses.py"]
# the mutants of these folders run these tests instead (each list with its own pytest selection)
_FAST = ["-k", "not cli_trains and not resumed and not finite_on and not has_its_row"]
TESTS_BY_DIR = {"dmp/losses": ["tests/test_baseline_methods.py", "tests/test_baseline_losses.py", *_FAST],
                "dmp/methods/": ["tests/test_baseline_methods.py", "tests/test_baseline_losses.py", *_FAST],
                "dmp/tables": ["tests/test_tables.py"], MX: ["tests/test_tables.py"]}


def tests_for(path: str) -> list[str]:
    """The test files (and selection) a mutant of ``path`` runs: the DMP method's file runs TESTS."""
    return next((t for d, t in TESTS_BY_DIR.items() if path.startswith(d) and path != M), TESTS)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, help="a copy of the repository (git worktree), edited in place")
    ap.add_argument("--out", required=True, help="JSON file of the results")
    ap.add_argument("--only", nargs="*", default=[], help="mutant ids to run (default: all)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds a mutant's tests may run; past it the mutant is 'timeout', neither killed nor "
                         "survived (on a loaded machine the tests are slow, not hung)")
    args = ap.parse_args(argv)
    tree = Path(args.tree).resolve()
    if tree == Path(__file__).resolve().parents[1]:
        sys.exit("error: --tree is this checkout; run the pass on a copy (git worktree add /tmp/mut HEAD)")
    results = []
    for mid, path, kind, old, new in MUTANTS:
        if args.only and mid not in args.only:
            continue
        f = tree / path
        original = f.read_bytes()
        src = original.decode()
        if src.count(old) != 1:
            results.append(dict(id=mid, file=path, kind=kind, status=f"not applied ({src.count(old)} matches)"))
            print(json.dumps(results[-1]), flush=True)
            continue
        f.write_text(src.replace(old, new))
        start = time.time()
        try:
            tests = ["-k", "not killed_process", *TESTS] if tests_for(path) is TESTS else tests_for(path)
            p = subprocess.run([args.python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
                                *tests], cwd=tree, capture_output=True, text=True,
                               timeout=args.timeout)
            lines = p.stdout.splitlines()
            by = [line for line in lines if line.startswith(("FAILED", "ERROR"))][:1]
            msg = [line for line in lines if line.startswith("E  ")][:2]
            status = "killed" if p.returncode != 0 else "survived"
        except subprocess.TimeoutExpired:
            status, by, msg = "timeout", [], []
        finally:
            f.write_bytes(original)  # the exact bytes
        results.append(dict(id=mid, file=path, kind=kind, status=status, by=by, msg=msg,
                            seconds=round(time.time() - start, 1)))
        print(json.dumps(results[-1]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    planted = [r for r in results if not r["status"].startswith("not applied")]
    survivors = [r["id"] for r in planted if r["status"] == "survived"]
    undecided = [r["id"] for r in planted if r["status"] == "timeout"]
    print(f"planted {len(planted)}, killed {sum(r['status'] == 'killed' for r in planted)}, "
          f"survived: {survivors or 'none'}, timeout: {undecided or 'none'}")


if __name__ == "__main__":
    main()
