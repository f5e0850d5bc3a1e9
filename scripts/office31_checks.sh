#!/usr/bin/env bash
# Checks of the Office-31 tables (config/office31_lite_t128.yaml), on the same stored trunk, tasks, seeds and preset, one
# setting changed:
#   pada_ce_code: partial, PADA with the official code's weighted cross-entropy (pada_ce=code) beside the suite's
#                 PADA (pada_ce=paper, the paper's objective);
#   momentum_0.9: partial, DMP with the class weights' mean prediction averaged across refreshes
#                 (mean_prediction_momentum=0.9, the demo's stabiliser) beside the paper's weights (0);
#   sgd_protocol: vanilla, source-only, DANN, CDAN+E and DMP trained with the optimiser of the papers the paper's
#                 ResNet-50, DANN and CDAN+E rows cite (SGD, momentum 0.9, weight decay 5e-4, lr 0.01 annealed as
#                 lr / (1 + 10 p)^0.75, the backbone at 0.1x) instead of the paper's Adam 2e-4 for DMP.
# Runs under results/office31_lite/checks/<check>/<task>/<method>/seed<k>/ (metrics.json: config, seed, git commit,
# dataset version), tabled by scripts/office31_report.py in docs/evidence.md.
# Usage: [SEEDS="0"] [CHECKS="pada_ce_code momentum_0.9 sgd_protocol"] [METHODS="source_only dann cdan_e dmp"]
#        scripts/office31_checks.sh [JOBS]
#   (JOBS trainings side by side, 1 thread each; METHODS: the methods of sgd_protocol)
# A finished run is skipped, an interrupted one resumes from its checkpoint (dmp train's own rule).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-2}
PY=${PY:-.venv/bin/python}
OUT=results/office31_lite/checks
PARTIAL="setting=partial source_split=full target_split=partial"
SGD="optimizer=sgd lr=0.01 momentum=0.9 weight_decay=5e-4 lr_schedule=anneal"
jobs=()
for seed in ${SEEDS:-0}; do
  for task in amazon:webcam dslr:webcam webcam:dslr amazon:dslr dslr:amazon webcam:amazon; do
    for check in ${CHECKS:-pada_ce_code momentum_0.9}; do
      case $check in
        pada_ce_code) jobs+=("pada_ce_code ${task%:*} ${task#*:} seed=$seed method=pada $PARTIAL pada_ce=code");;
        momentum_0.9) jobs+=("momentum_0.9 ${task%:*} ${task#*:} seed=$seed method=dmp $PARTIAL mean_prediction_momentum=0.9");;
        sgd_protocol)
          for method in ${METHODS:-source_only dann cdan_e dmp}; do
            jobs+=("sgd_protocol ${task%:*} ${task#*:} seed=$seed method=$method setting=vanilla $SGD")
          done;;
        *) echo "unknown check: $check (pada_ce_code, momentum_0.9, sgd_protocol)" >&2; exit 2;;
      esac
    done
  done
done
run() {
  set -- $1
  local name=$1 src=$2 tgt=$3; shift 3
  local seed=${1#seed=} method=${2#method=}
  local short="${src:0:1}-${tgt:0:1}"
  local out=$OUT/$name/${short^^}/$method/seed$seed
  [ -f "$out/metrics.json" ] && return 0
  "$PY" -m dmp train --out "$out" dataset=office31_lite0_t128 source=$src target=$tgt metric=G device=cpu threads=1 \
    "$@" > "/tmp/office31_check_${name}_${short}_${method}_${seed}.log" 2>&1 && echo "$out: done"
}
export -f run; export OUT PY
printf '%s\n' "${jobs[@]}" | xargs -P "$JOBS" -I{} bash -c 'run "$@"' _ {}
