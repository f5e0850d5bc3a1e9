#!/usr/bin/env bash
# The GPU checks of docs/benchmarks.md in one window of a lent GPU (a runner of the benchmarks/ scripts: prints
# figures, asserts nothing).
#
#   OUT=gpu-figures bash workflow/gpu/gpu_session.sh
#
# Writes into $OUT (default ./gpu-figures): env.txt (GPU, driver, torch); probe.log (benchmarks/cuda_probe.py: host
# synchronisations of a DMP step, cuSOLVER against host eigh); step.log (benchmarks/step_overhead.py per compile mode,
# fp32 and bf16); throughput_*.json and throughput.log (benchmarks/throughput.py at the paper's image sizes, with and
# without the input cache, fp32 and bf16 + cudnn.benchmark); equivalence.log (benchmarks/compile_equivalence.py:
# compile step against off on CUDA, cold and warm, TF32 off, the perturbed yardstick); fullrun.log (a whole demo DMP
# run with compile off and step); with PARTS including demo, demo.log +
# demo_tables.tar.gz (the demo's six tables, trained with device=cuda into results/demo_cuda).
# Each part has its own time limit, so one that fails leaves the others' figures. Needs a python with torch,
# torchvision and the project's dependencies (snakemake for the demo part); the project itself is imported from
# the checkout (PYTHONPATH=.). Set PYTHON to pick the interpreter, PARTS to run a subset ("probe step throughput demo").
# SESSION_S caps the whole script (seconds, default 3600): a part never runs past it, so a lease's last minutes still
# return the figures already taken. STEP_RUNS and THROUGHPUT_RUNS pick the runs of those parts (see below).
set -u
SESSION_END=$(( $(date +%s) + ${SESSION_S:-3600} ))
left() {  # the smaller of $1 seconds and the time left before SESSION_END (at least 1)
  local rest=$(( SESSION_END - $(date +%s) ))
  (( rest < 1 )) && rest=1
  echo $(( $1 < rest ? $1 : rest ))
}
OUT=${OUT:-gpu-figures}
PYTHON=${PYTHON:-python3}
PARTS=${PARTS:-"probe equivalence fullrun step throughput"}
mkdir -p "$OUT"
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PYTHON" -c 'import sys, torch, torchvision; print("python", sys.version.split()[0], "torch", torch.__version__,
"torchvision", torchvision.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
"|", torch.cuda.get_device_name(0))'
  nproc
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [[ " $PARTS " == *" probe "* ]]; then
  # What in a DMP step waits for the host; cuSOLVER's eigh against the host's (benchmarks/cuda_probe.py).
  timeout "$(left 90)" "$PYTHON" benchmarks/cuda_probe.py --parts "${PROBE_PARTS:-sync,eigh}" 2>&1 | grep -v -i warn | tee "$OUT/probe.log"
fi

if [[ " $PARTS " == *" equivalence "* ]]; then
  # compile: step (CUDA graphs) against off, 20 steps from the same weights; twice: a cold and a warm compilation.
  # Then TF32 off in both (the H200 run of 2026-11-27 differed by 1e-3 relative at the first step: is it TF32's?),
  # and the yardstick: eager against eager with its weights moved by one float32 rounding, TF32 on and off.
  for pass in cold:default:compiled warm:default:compiled warm:off:compiled -:default:perturbed -:off:perturbed; do
    IFS=: read -r cache tf32 against <<< "$pass"
    echo "== compile_equivalence (against $against, $cache inductor cache, tf32 $tf32)" | tee -a "$OUT/equivalence.log"
    timeout "$(left 200)" "$PYTHON" benchmarks/compile_equivalence.py --device cuda --compile step --steps 20 \
      --tf32 "$tf32" --against "$against" 2>&1 | grep -v -i warn | tee -a "$OUT/equivalence.log"
  done
fi

if [[ " $PARTS " == *" fullrun "* ]]; then
  # A whole DMP run (the demo's S->O, random init) with compile off and step on CUDA: evaluation, anchor passes,
  # checkpoints and the intra-class switch between compiled steps; accuracy and wall time from metrics.json.
  data=$(mktemp -d)
  DMP_DATA_DIR=$data "$PYTHON" -m dmp data demo --no-lists > /dev/null 2>&1
  for mode in off step; do
    echo "== full demo run, compile $mode" | tee -a "$OUT/fullrun.log"
    DMP_DATA_DIR=$data timeout "$(left 240)" "$PYTHON" -m dmp train --quiet --out "$data/run_$mode" dataset=demo \
      source=solid target=outline method=dmp pretrained=false device=${FULLRUN_DEVICE:-cuda} compile=$mode 2>&1 | grep -v -i warn \
      | tee -a "$OUT/fullrun.log"
    "$PYTHON" -c 'import json, sys; m = json.load(open(sys.argv[1])); print({k: m.get(k) for k in ("accuracy",
"wall_seconds", "train_seconds", "anchor_seconds")})' "$data/run_$mode/metrics.json" 2>&1 | tee -a "$OUT/fullrun.log"
  done
fi

if [[ " $PARTS " == *" step "* ]]; then
  # The step's cost per compile mode and precision (benchmarks/step_overhead.py: tensors already on the GPU).
  for run in ${STEP_RUNS:-"fp32:off" "fp32:loss" "bf16:off" "bf16:loss" "fp32:step"}; do  # precision:compile
    set -- ${run/:/ }
    echo "== step_overhead precision=$1 compile=$2" | tee -a "$OUT/step.log"
    limit=${STEP_TIMEOUT:-100}
    [[ $2 == step ]] && limit=${STEP_COMPILE_TIMEOUT:-300}  # a cold inductor compilation of the ResNet-50 step
    timeout "$(left "$limit")" "$PYTHON" benchmarks/step_overhead.py --device cuda --size 224 --batch 50 \
      --repeats 20 --precision "$1" --compile "$2" 2>&1 | grep -v -i warn | tee -a "$OUT/step.log"
  done
fi

if [[ " $PARTS " == *" throughput "* ]]; then
  for run in ${THROUGHPUT_RUNS:-"fp32:cache" "fp32:" "bf16:cache"}; do  # precision:[cache][:compile mode]
    IFS=: read -r precision cache mode <<< "$run"
    extra=""
    [[ $precision == bf16 ]] && extra="--precision bf16 --cudnn-benchmark"
    [[ $cache == cache ]] && extra="$extra --input-cache"
    [[ -n $mode ]] && extra="$extra --compile $mode"
    name="throughput_${precision}${cache:+_$cache}${mode:+_$mode}"
    echo "== throughput $precision $extra" | tee -a "$OUT/throughput.log"
    timeout "$(left "${THROUGHPUT_TIMEOUT:-150}")" "$PYTHON" benchmarks/throughput.py --device cuda --size real $extra \
      ${THROUGHPUT_ARGS:-} --json "$OUT/$name.json" 2>&1 | grep -v -i warn | tee -a "$OUT/throughput.log"
  done
fi

if [[ " $PARTS " == *" demo "* ]]; then
  start=$(date +%s)
  timeout "$(left 300)" "$PYTHON" -m snakemake --cores "$(nproc)" all_tables --configfile config/demo.yaml \
    --config 'train={"device":"cuda"}' results=results/demo_cuda data_dir=results/demo_cuda/data \
    > "$OUT/demo.log" 2>&1
  echo "demo rc=$? wall_s=$(( $(date +%s) - start ))" | tee -a "$OUT/demo.log"
  tail -5 "$OUT/demo.log"
  tar czf "$OUT/demo_tables.tar.gz" results/demo_cuda/tables $(ls results/demo_cuda/runs/*/*/*/*/*/*/*/metrics.json \
    2>/dev/null) 2>/dev/null
  cat results/demo_cuda/tables/vanilla.md results/demo_cuda/tables/partial.md results/demo_cuda/tables/time.md \
    2>/dev/null
fi
