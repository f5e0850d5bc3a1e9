"""How the trainer wires DMP together, checked on short CPU runs of an unbalanced shift against what the objective
and the schedule say, not against the implementation itself:

1. every log row is ``loss = ce + lambda1 (inter + intra) + lambda2 align + entropy_weight entropy`` (distinct
   lambdas), each term zero exactly where the method, the anchors and the warm-ups say, probed at the boundary;
2. what each term sees (spies on the loss functions and a hook on the model): the cross-entropy the source logits
   and labels, the inter-class term the source features and labels with the source-mean anchor, the intra-class
   term the target features and the softmax of the same target forward with the class-mean anchors (no gradient
   into the anchors, gradient into the target features and, when configured, the predictions), the alignment the
   source and target features of the same layer, and each term's output receives exactly its lambda from the
   loss. Each term is called once per step with the lists of all the manifold layers (one batched computation):
   the l-th entry of every list must be layer l's;
3. the lr of every logged row is the schedule's formula at that iteration, and the anchors are refreshed at
   exactly the iterations of the anchor period.
"""
from __future__ import annotations

import csv
import math

import pytest
import torch
import torch.nn.functional as F

import dmp.losses as losses_pkg
import dmp.manifolds as manifolds_pkg
from dmp.config import resolve
from dmp.train import train
from dmp.train.trainer import Trainer
from unbalanced import RowIndex, producer, record_forwards, spy, tiny_cfg, unbalanced_task

ROW_TOL = dict(rel=1e-5, abs=1e-6)


def log_rows(folder):
    with open(folder / "log.csv", newline="") as fh:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]


# ---------------------------------------------------------------------------------------------------- 1
# (method, setting, anchor_mode): which terms each one trains
CASES = [
    ("dmp", "vanilla", "full_pass"),
    ("dmp", "vanilla", "accumulate"),
    ("dmp_ent", "partial", "full_pass"),
    ("dmp_no_al", "vanilla", "full_pass"),
    ("dmp_no_ds", "partial", "full_pass"),
    ("source_only", "vanilla", "full_pass"),
    ("source_only_bn", "vanilla", "full_pass"),
]


@pytest.mark.parametrize("method, setting, mode", CASES)
def test_each_log_row_is_the_objective_and_terms_are_zero_exactly_where_they_should(tmp_path, method, setting,
                                                                                   mode):
    inter_start, intra_start, period = 2, 5, 3
    cfg = tiny_cfg(method=method, setting=setting, anchor_mode=mode, inter_start=inter_start,
                   intra_start=intra_start, anchor_period=period, iterations=9)
    m = train(cfg, tmp_path, task=unbalanced_task(), progress=False)
    c = m["config"]
    assert (c["lambda1"], c["lambda2"], c["entropy_weight"]) == (3.0, 7.0, 0.5)  # distinct: a swap shows
    rows = log_rows(tmp_path)
    assert [int(r["iteration"]) for r in rows] == list(range(9))
    method = c["method"]
    trained = method not in ("source_only", "source_only_bn")
    # log.csv holds the method's own terms only (dmp/methods/): source-only logs none of DMP's
    assert set(rows[0]) == {"iteration", "lr", "loss", "ce"} | ({"inter", "intra", "align", "entropy"} if trained
                                                                  else set())
    rows = [{"inter": 0.0, "intra": 0.0, "align": 0.0, "entropy": 0.0, **r} for r in rows]
    ds = trained and method != "dmp_no_ds"
    first_anchor = 0 if c["anchor_mode"] == "full_pass" else period  # accumulate: first window closes at T_up
    for r in rows:
        it = int(r["iteration"])
        expected = r["ce"] + 3.0 * (r["inter"] + r["intra"]) + 7.0 * r["align"] + 0.5 * r["entropy"]
        assert r["loss"] == pytest.approx(expected, **ROW_TOL), \
            f"iteration {it}: loss {r['loss']} != ce + lambda1 (inter + intra) + lambda2 align + w_ent entropy " \
            f"= {expected} ({r})"
        assert r["ce"] > 0, f"iteration {it}: the source cross-entropy is {r['ce']}"
        want = {
            "inter": ds and it >= max(inter_start, first_anchor),
            "intra": ds and it >= max(intra_start, first_anchor),
            "align": trained and method != "dmp_no_al",
            "entropy": method == "dmp_ent",
        }
        for term, on in want.items():
            assert (r[term] != 0) == on, \
                f"{method} {c['setting']} {c['anchor_mode']}, iteration {it}: {term} = {r[term]}, expected " \
                f"{'non-zero' if on else 'zero'} (inter from {inter_start}, intra from {intra_start}, anchors " \
                f"from {first_anchor})"


def test_warm_ups_given_in_epochs_start_at_the_converted_iteration(tmp_path):
    """58 source samples, batch 16: an epoch is ceil(58 / 16) = 4 iterations, so 0.5ep = iteration 2 and
    1.25ep = iteration 5."""
    task = unbalanced_task()
    assert len(task.source_train) == 58
    train(tiny_cfg(inter_start="0.5ep", intra_start="1.25ep", iterations=7), tmp_path, task=task, progress=False)
    rows = log_rows(tmp_path)
    on = {t: [int(r["iteration"]) for r in rows if r[t] != 0] for t in ("inter", "intra")}
    assert on["inter"] == list(range(2, 7)), f"inter-class term on at iterations {on['inter']}; 0.5ep = iteration 2"
    assert on["intra"] == list(range(5, 7)), f"intra-class term on at iterations {on['intra']}; 1.25ep = iteration 5"


# ---------------------------------------------------------------------------------------------------- 3 (lr)
@pytest.mark.parametrize("schedule", ["constant", "anneal"])
def test_logged_lr_is_the_schedule_formula_at_each_iteration(tmp_path, schedule):
    T, lr0 = 9, 2e-3
    train(tiny_cfg(lr=lr0, lr_schedule=schedule, iterations=T), tmp_path, task=unbalanced_task(), progress=False)
    rows = log_rows(tmp_path)
    assert len(rows) == T
    for r in rows:
        it = r["iteration"]
        # Ganin et al.: lr_p = lr0 / (1 + 10 p)^0.75 with p = it / T_max
        want = lr0 if schedule == "constant" else lr0 / (1 + 10 * it / T) ** 0.75
        assert r["lr"] == pytest.approx(want, rel=1e-12), f"iteration {int(it)}: lr {r['lr']}, schedule says {want}"


def test_backbone_group_runs_at_its_multiple_of_the_annealed_lr(tmp_path):
    """A backbone with parameters (the small CNN): its group's lr is backbone_lr_mult x the head's, both annealed."""
    import numpy as np
    from dmp.data.inputs import Task, TensorDataset
    rng = np.random.default_rng(0)
    ds = TensorDataset(rng.normal(size=(20, 1, 12, 12)).astype(np.float32), np.arange(20) % 3)
    task = Task(ds, ds, ds, ds, ["a", "b", "c"], 1, None, "images")
    cfg = resolve(tiny_cfg(backbone="smallcnn", bottleneck_dims=[16, 8], batch_size=5, lr=1e-2,
                           backbone_lr_mult=0.1, lr_schedule="anneal", iterations=10, method="source_only"))
    t = Trainer(cfg, task, tmp_path, progress=False)
    t.run(stop_after=4)  # last step: iteration 3
    lrs = sorted(g["lr"] for g in t.opt.param_groups)
    factor = (1 + 10 * 3 / 10) ** -0.75
    assert lrs == pytest.approx([1e-3 * factor, 1e-2 * factor], rel=1e-12)


# ---------------------------------------------------------------------------------------------------- 3 (T_up)
@pytest.mark.parametrize("setting", ["vanilla", "partial"])
def test_full_anchor_passes_run_at_exactly_every_anchor_period(tmp_path, setting):
    """No-grad forwards before a training step are an anchor pass: they happen before steps 0, T_up, 2 T_up, ...
    and read the source evaluation split (and, partial, the target evaluation split) whole, each sample once, in
    shuffled batches of at most batch_size (anchor_bn: batch, the default: a class-sorted list read in order would
    give BatchNorm single-class batches)."""
    task = unbalanced_task(eval_counts=((7, 5, 3, 2), (4, 6, 2, 3)))
    t = Trainer(resolve(tiny_cfg(setting=setting, anchor_period=3, iterations=8)), task, tmp_path, progress=False)
    fw = record_forwards(t.model)
    t.run(stop_after=8)
    where = RowIndex(source_train=task.source_train, target_train=task.target_train,
                     source_eval=task.source_eval, target_eval=task.target_eval)
    step, passes, pending = -1, {}, []
    for f in fw:
        names, _ = where.of(f["x"])
        if f["grad"]:
            if names == {"source_train"}:
                step += 1
                if pending:
                    passes[step] = pending
                pending = []
        else:
            pending.append((names, f["x"]))
    assert sorted(passes) == [0, 3, 6], f"anchor passes before steps {sorted(passes)}, T_up = 3"
    position = {x.numpy().tobytes(): i for i, x in enumerate(task.source_eval.x)}
    for it, batches in passes.items():
        seen, order = {}, []
        for names, x in batches:
            assert len(names) == 1, f"an anchor batch before step {it} mixes {names}"
            assert len(x) <= t.cfg["batch_size"], f"an anchor batch of {len(x)} > batch_size before step {it}"
            (name,) = names
            seen[name] = seen.get(name, 0) + len(x)
            if name == "source_eval":
                order += [position[r.numpy().tobytes()] for r in x]
        assert sorted(order) == list(range(len(task.source_eval))), \
            f"the anchor pass before step {it} did not read each source sample once"
        assert order != sorted(order), f"the anchor pass before step {it} read the source in list order, not shuffled"
        want = {"source_eval": len(task.source_eval)}
        if setting == "partial":
            want["target_eval"] = len(task.target_eval)
        assert seen == want, f"the anchor pass before step {it} read {seen}, expected {want}"


# ---------------------------------------------------------------------------------------------------- 2
def spied_run(tmp_path, monkeypatch, task, **over):
    """A run whose loss calls, model forwards and anchors at each call are recorded."""
    cfg = resolve(tiny_cfg(**over))
    t = Trainer(cfg, task, tmp_path, progress=False)
    fw = record_forwards(t.model)

    def anchors_now():
        a = t.anchors
        return {"class_means": [m.detach().clone() for m in a.class_means],
                "means": [m.detach().clone() for m in a.means], "weights": t.weights.clone()}

    def probe(args, kwargs, out):
        found = {"anchors": anchors_now() if t.anchors.ready else None}
        if out.requires_grad:  # which inputs (each layer of a list) the term sends a gradient to
            found["grad"] = [[grad_wrt(out, x) if x.requires_grad else None for x in a] if isinstance(a, list)
                             else grad_wrt(out, a) if isinstance(a, torch.Tensor) and a.requires_grad else None
                             for a in args]
        return found

    calls = {}
    for module, name in ((losses_pkg, "intra_class_loss"), (losses_pkg, "inter_class_loss"),
                         (losses_pkg, "entropy_loss"), (manifolds_pkg, "alignment_distance")):
        calls[name] = spy(monkeypatch, module, name, probe=probe)
    ce = spy(monkeypatch, F, "cross_entropy")
    m = t.run()
    return cfg, t, fw, calls, ce, m


def grad_wrt(out, tensor):
    g, = torch.autograd.grad(out, tensor, retain_graph=True, allow_unused=True)
    return g


def per_layer(arg, n_layers, what):
    """The list of one tensor per manifold layer a term received as ``arg``."""
    assert isinstance(arg, (list, tuple)) and len(arg) == n_layers, \
        f"the {what} is not a list of the {n_layers} manifold layers: {type(arg).__name__}"
    return list(arg)


def reaches(g) -> bool:
    return g is not None and bool(g.abs().sum() > 0)


@pytest.mark.parametrize("grad_p", [True, False])
def test_intra_class_term_sees_target_features_and_their_own_softmax(tmp_path, monkeypatch, grad_p):
    task = unbalanced_task()
    where = RowIndex(source=task.source_train, target=task.target_train)
    cfg, t, fw, calls, _, m = spied_run(tmp_path, monkeypatch, task, intra_start=2, iterations=6,
                                        intra_grad_p=grad_p, k=2)
    intra = calls["intra_class_loss"]
    dims = cfg["bottleneck_dims"]
    assert len(intra) == 6 - 2, f"{len(intra)} intra-class calls, expected one per step from iteration 2"
    for call in intra:
        (h_t, p_t, class_means), kw = call["args"][:3], call["kwargs"]
        h_t, class_means = per_layer(h_t, len(dims), "target features"), per_layer(class_means, len(dims), "anchors")
        forwards = set()
        for l, (h, means) in enumerate(zip(h_t, class_means)):
            f, layer = producer(fw, h)
            assert f is not None and f["grad"], "the intra-class term's features are no training forward's output"
            assert layer == l, f"the intra-class term's layer {l} holds the features of layer {layer}"
            names, _ = where.of(f["x"])
            assert names == {"target"}, f"the intra-class term got the features of a batch from {names}, not the " \
                                        f"target"
            torch.testing.assert_close(p_t, torch.softmax(f["logits"], 1), rtol=0, atol=0,
                                       msg="p_t is not the softmax of the model on the same target batch")
            forwards.add(id(f))
            assert torch.equal(means, call["probe"]["anchors"]["class_means"][l]), \
                f"layer {l}: the intra-class term's anchors are not the current source class means of that layer"
            assert not means.requires_grad, "the class-mean anchors carry a gradient"
        assert len(forwards) == 1, "the intra-class term's layers come from different forwards"
        k = call["args"][3] if len(call["args"]) > 3 else kw.get("k", 1)
        assert k == 2, f"the intra-class term's Top-k is {k}, the config's k is 2"
        w = kw.get("class_weights")
        assert w is not None and torch.allclose(w.cpu(), torch.full((4,), 0.25)), \
            f"vanilla intra-class weights should be 1/c (Eq. ClassWeight), got {w}"
        grads = call["probe"].get("grad") or [[None] * len(dims), None, None]
        assert all(reaches(g) for g in grads[0]), \
            "no gradient reaches the target features (of every layer) through the intra-class term"
        reaches_p = reaches(grads[1])
        assert reaches_p == grad_p, f"intra_grad_p={grad_p} but the gradient into p_t {'does' if reaches_p else 'does not'}" \
                                    f" flow"
        assert call["grads"] == [pytest.approx(3.0)], \
            f"the intra-class term enters the loss with weight {call['grads']}, expected lambda1 = 3"


def test_inter_class_term_and_cross_entropy_see_the_source_batch(tmp_path, monkeypatch):
    task = unbalanced_task()
    where = RowIndex(source=task.source_train, target=task.target_train)
    cfg, t, fw, calls, ce, m = spied_run(tmp_path, monkeypatch, task, iterations=5, inter_absent="skip")
    inter = calls["inter_class_loss"]
    n_layers = len(cfg["bottleneck_dims"])
    assert len(inter) == 5, f"{len(inter)} inter-class calls in 5 steps, expected one per step"
    for call in inter:
        h_s, y_s, means, c = call["args"][:4]
        h_s, means = per_layer(h_s, n_layers, "source features"), per_layer(means, n_layers, "anchors")
        for l, (h, mean) in enumerate(zip(h_s, means)):
            f, layer = producer(fw, h)
            assert f is not None and f["grad"], "the inter-class term's features are no training forward's output"
            assert layer == l, f"the inter-class term's layer {l} holds the features of layer {layer}"
            names, labels = where.of(f["x"])
            assert names == {"source"}, f"the inter-class term got the features of a batch from {names}, not the " \
                                        f"source"
            assert torch.equal(y_s.cpu(), labels), "the inter-class term's labels are not the source batch's labels"
            assert torch.equal(mean, call["probe"]["anchors"]["means"][l]), \
                f"layer {l}: the inter-class anchor is not the current source mean of that layer"
            assert not mean.requires_grad, "the source-mean anchor carries a gradient"
        assert c == 4, f"the inter-class term is told of {c} classes, the task has 4"
        assert call["kwargs"].get("absent", "zero") == cfg["inter_absent"], \
            f"the inter-class term treats absent classes as {call['kwargs'].get('absent', 'zero')!r}, the config " \
            f"says {cfg['inter_absent']!r}"
        g = (call["probe"].get("grad") or [[None] * n_layers])[0]
        assert all(reaches(x) for x in g), "no gradient reaches the source features (of every layer, inter-class)"
        assert call["grads"] == [pytest.approx(3.0)], \
            f"the inter-class term enters the loss with weight {call['grads']}, expected lambda1 = 3"
    steps = [c for c in ce if c["out"].requires_grad]
    assert len(steps) == 5, f"{len(steps)} cross-entropy calls in 5 steps"
    for call in steps:
        logits, y = call["args"][:2]
        f = next((f for f in fw if f["grad"] and f["logits"] is logits), None)
        assert f is not None, "the cross-entropy is not computed on a training forward's logits"
        names, labels = where.of(f["x"])
        assert names == {"source"} and torch.equal(y.cpu(), labels), \
            f"the cross-entropy is computed on a batch from {names} or with other labels than that batch's"
        assert call["grads"] == [pytest.approx(1.0)]


@pytest.mark.parametrize("setting, metric", [("vanilla", "G"), ("partial", "LE")])
def test_alignment_sees_both_domains_of_one_layer_weighted_in_partial(tmp_path, monkeypatch, setting, metric):
    task = unbalanced_task(target_counts=(6, 25, 11, 0) if setting == "partial" else (6, 25, 11, 16))
    where = RowIndex(source=task.source_train, target=task.target_train)
    cfg, t, fw, calls, _, m = spied_run(tmp_path, monkeypatch, task, iterations=5, setting=setting, metric=metric,
                                        method="dmp_ent", grassmann_dim=5)
    align = calls["alignment_distance"]
    n_layers = len(cfg["bottleneck_dims"])
    assert len(align) == 5, f"{len(align)} alignment calls in 5 steps, expected one per step"
    for call in align:
        got_metric, hs, ht = call["args"][:3]
        assert got_metric == metric, f"alignment with metric {got_metric!r}, the config says {metric!r}"
        assert call["kwargs"].get("dim") == 5 and call["kwargs"].get("eps") == cfg["le_eps"], \
            f"alignment called with {call['kwargs']}, the config's grassmann_dim = 5 and le_eps = {cfg['le_eps']}"
        hs, ht = per_layer(hs, n_layers, "source features"), per_layer(ht, n_layers, "target features")
        sources = [f for f in fw if f["grad"] and where.of(f["x"])[0] == {"source"}]
        for l, (h_s, h_t) in enumerate(zip(hs, ht)):
            ft, layer = producer(fw, h_t)
            assert ft is not None and ft["grad"] and where.of(ft["x"])[0] == {"target"}, \
                "the alignment's second argument is not the target features"
            assert layer == l, f"the alignment's target layer {l} holds the features of layer {layer}"
            if setting == "vanilla":
                fs, layer_s = producer(fw, h_s)
                assert fs is not None and where.of(fs["x"])[0] == {"source"}, \
                    "the alignment's first argument is not the source features"
                assert layer_s == layer, f"source layer {layer_s} aligned with target layer {layer}"
            else:
                # Eq. WeightedAlignLoss: h^s'_i = w_{y_i} h^s_i with w = the current partial class weights
                w = call["probe"]["anchors"]["weights"]
                hits = [f for f in sources if f["feats"][l].shape == h_s.shape and torch.allclose(
                    f["feats"][l] * w[where.of(f["x"])[1]].unsqueeze(1), h_s, rtol=1e-6, atol=1e-7)]
                assert hits, f"layer {l}: the partial alignment's source rows are not w_{{y_i}} h^s_i of that " \
                             f"layer of a source batch"
                assert not torch.allclose(w, torch.full_like(w, 0.25)), \
                    f"partial class weights {w.tolist()} are uniform (1/c); Eq. ClassWeight gives pi, the mean " \
                    f"target prediction of the last anchor pass (this target lacks class 3)"
        g = call["probe"].get("grad") or [[None] * n_layers] * 3
        assert all(reaches(x) for gs in g[1:3] for x in gs), \
            "the alignment sends no gradient to the source or the target features (of every layer)"
        assert call["grads"] == [pytest.approx(7.0)], \
            f"the alignment enters the loss with weight {call['grads']}, expected lambda2 = 7"
    ent = calls["entropy_loss"]
    assert len(ent) == 5
    for call in ent:
        p = call["args"][0]
        f = next((f for f in fw if f["grad"] and torch.equal(torch.softmax(f["logits"], 1), p)), None)
        assert f is not None and where.of(f["x"])[0] == {"target"}, "the entropy is not of the target predictions"
        assert call["grads"] == [pytest.approx(0.5)], \
            f"the entropy enters the loss with weight {call['grads']}, expected entropy_weight = 0.5"
    if setting == "partial":
        for call in calls["intra_class_loss"]:
            w = call["kwargs"].get("class_weights")
            torch.testing.assert_close(w.cpu(), call["probe"]["anchors"]["weights"], msg="partial intra weights "
                                       "are not the current class weights pi (Eq. WeightedIntraLoss)")
