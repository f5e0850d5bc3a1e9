#!/usr/bin/env bash
# The departures of config/office31_lite_t128.yaml from the paper's protocol, each measured on A->W with source-only and
# DMP (3 seeds): runs under results/office31_lite/departures/<departure>/A-W/<method>/seed<k>/ (metrics.json: config,
# seed, git commit, dataset version), tabled by scripts/office31_report.py in docs/evidence.md.
# Needs the trunk datasets of the study (config/office31_lite_t128.yaml's header) and, for no_views_224:
#   python -m dmp data extract-features office31 --out-name office31_lite0_t224 --backbone efficientnet_lite0 \
#       --resize 256 --crop 224 --trunk
# and, for stages_5_on (the trunk stored before stage 5 of the blocks, whose stages 5-6 are fine-tuned with the head):
#   python -m dmp data extract-features office31 --out-name office31_lite0_s5_t128 --backbone efficientnet_lite0 \
#       --resize 146 --crop 128 --views 4 --trunk-stage 5
# and, for stages_5_on_v20 (the same with 20 stored crops per image, each drawn about twice in 40 epochs; its runs go
# where the suite puts them, results/office31_lite/runs/office31_lite0_s5v20_t128/, as config/office31_lite_t128.yaml
# tables this form too):
#   python -m dmp data extract-features office31 --out-name office31_lite0_s5v20_t128 --backbone efficientnet_lite0 \
#       --resize 146 --crop 128 --views 20 --trunk-stage 5
# stages_5_on_v20_sgd is stages_5_on_v20 with the optimiser of the papers the paper's ResNet-50, DANN and CDAN+E rows
# cite (SGD; scripts/office31_checks.sh, check sgd_protocol, has it for the head-only form); stages_5_on_v20_lr0 is it
# with the backbone's weights held (backbone_lr_mult = 0) while its BatchNorm layers still track the source's
# statistics in training mode: what the statistics alone do; stages_5_on_v20_bnfrozen keeps the backbone's BatchNorm
# layers on their ImageNet statistics (backbone_bn = frozen) while the weights fine-tune.
# stages_5_on_v20_mean_one is stages_5_on_v20 with the vanilla intra-class term's class weights at c times the
# printed 1/c (weight_norm = mean_one: the unweighted Eq. IntraLoss&Truncated, 31 times stronger on Office-31): what
# the scale of the discriminative term does where DMP's share over DMP (No DS) is far below the paper's (METHODS=dmp).
# all_layers is the paper's protocol but for the crop size: every layer of EfficientNet-Lite0 fine-tuned (0.1x lr),
# read from the images with the paper's augmentation at 128 px crops of 146 px (about 3 s per source batch on one
# core, so for the short tasks: TASKS="D-A"); it needs the decoded images cached once:
#   python -m dmp data cache office31 --resize 146
# all_layers_bnfrozen is it with the backbone's BatchNorm layers on their ImageNet statistics.
# Usage: [SEEDS="0 1 2"] [ONLY="stages_5_on ..."] [METHODS="source_only dmp"] [TASKS="A-W"] [EXTRA="key=value ..."]
#        scripts/office31_departures.sh [JOBS]
#   (JOBS trainings side by side, 1 thread each; default 2; ONLY: the departures to run, default all; METHODS: also
#   source_only_bn, source-only whose BatchNorm statistics also see the target batches, or any registered method;
#   TASKS: the Office-31 tasks, A-W by default, "A-W D-W W-D A-D D-A W-A" for all six; EXTRA: overrides that leave
#   the training as it is, e.g. log_accuracy_every=50 for the target-accuracy curve)
# A finished run is skipped, an interrupted one resumes from its checkpoint (dmp train's own rule).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-2}
PY=${PY:-.venv/bin/python}
OUT=results/office31_lite/departures
RUNS=results/office31_lite/runs
ALL="dataset=office31 backbone=efficientnet_lite0 resize=146 crop=128 input_cache=on"  # every layer, from the images
SGD="optimizer=sgd lr=0.01 momentum=0.9 weight_decay=5e-4 lr_schedule=anneal"  # the optimiser of the paper's cited rows
jobs=()
for seed in ${SEEDS:-0 1 2}; do
  for task in ${TASKS:-A-W}; do
    for method in ${METHODS:-source_only dmp}; do
      jobs+=("no_views $task dataset=office31_lite0_t128_noviews method=$method seed=$seed")
      jobs+=("head_frozen $task dataset=office31_lite0_t128 backbone_lr_mult=0 method=$method seed=$seed")
      jobs+=("no_views_224 $task dataset=office31_lite0_t224 method=$method seed=$seed")
      jobs+=("stages_5_on $task dataset=office31_lite0_s5_t128 method=$method seed=$seed")
      jobs+=("stages_5_on_v20 $task dataset=office31_lite0_s5v20_t128 method=$method seed=$seed")
      jobs+=("stages_5_on_v20_sgd $task dataset=office31_lite0_s5v20_t128 $SGD method=$method seed=$seed")
      jobs+=("stages_5_on_v20_lr0 $task dataset=office31_lite0_s5v20_t128 backbone_lr_mult=0 method=$method seed=$seed")
      jobs+=("stages_5_on_v20_bnfrozen $task dataset=office31_lite0_s5v20_t128 backbone_bn=frozen method=$method seed=$seed")
      jobs+=("stages_5_on_v20_mean_one $task dataset=office31_lite0_s5v20_t128 weight_norm=mean_one method=$method seed=$seed")
      jobs+=("all_layers $task $ALL method=$method seed=$seed")
      jobs+=("all_layers_bnfrozen $task $ALL backbone_bn=frozen method=$method seed=$seed")
    done
  done
done
domain() { case $1 in A) echo amazon;; D) echo dslr;; W) echo webcam;; *) echo "unknown domain $1 (A, D or W)" >&2; return 1;; esac; }
run() {
  set -- $1
  local name=$1 task=$2; shift 2
  [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]] && return 0
  local method seed
  for kv in "$@"; do case $kv in method=*) method=${kv#method=};; seed=*) seed=${kv#seed=};; esac; done
  local out=$OUT/$name/$task/$method/seed$seed
  # the deeper form is the second block of config/office31_lite_t128.yaml's vanilla table: its runs are the suite's
  [ "$name" = stages_5_on_v20 ] && out=$RUNS/office31_lite0_s5v20_t128/vanilla/$task/$method/G/full-full/seed$seed
  [ -f "$out/metrics.json" ] && return 0
  "$PY" -m dmp train --out "$out" source="$(domain "${task%-*}")" target="$(domain "${task#*-}")" setting=vanilla \
    metric=G device=cpu threads=1 "$@" ${EXTRA:-} > "/tmp/office31_departure_${name}_${task}_${method}_${seed}.log" 2>&1 \
    && echo "$out: done"
}
export -f run domain; export OUT RUNS PY ONLY EXTRA
printf '%s\n' "${jobs[@]}" | xargs -P "$JOBS" -I{} bash -c 'run "$@"' _ {}
