#!/usr/bin/env bash
# The GPU checks of docs/benchmarks.md in one script (a benchmark: prints figures, asserts nothing).
#
#   OUT=gpu-figures bash benchmarks/gpu_session.sh
#
# Writes into $OUT (default ./gpu-figures): env.txt (GPU, driver, torch), throughput_fp32.json / _bf16.json and
# throughput.log (benchmarks/throughput.py at the paper's image sizes, fp32 and bf16 + cudnn.benchmark), and
# demo.log + demo_tables.tar.gz (the demo's six tables, trained with device=cuda into results/demo_cuda).
# Each part has its own time limit, so one that fails leaves the others' figures. Needs a python with torch,
# torchvision and the project's dependencies (snakemake for the demo part); the project itself is imported from
# the checkout (PYTHONPATH=.). Set PYTHON to pick the interpreter, PARTS to run a subset ("throughput demo").
set -u
OUT=${OUT:-gpu-figures}
PYTHON=${PYTHON:-python3}
PARTS=${PARTS:-"throughput demo"}
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

if [[ " $PARTS " == *" throughput "* ]]; then
  for precision in fp32 bf16; do
    extra=""
    [[ $precision == bf16 ]] && extra="--precision bf16 --cudnn-benchmark"
    echo "== throughput $precision $extra" | tee -a "$OUT/throughput.log"
    timeout 240 "$PYTHON" benchmarks/throughput.py --device cuda --size real $extra \
      --json "$OUT/throughput_$precision.json" 2>&1 | tee -a "$OUT/throughput.log"
  done
fi

if [[ " $PARTS " == *" demo "* ]]; then
  start=$(date +%s)
  timeout 300 "$PYTHON" -m snakemake --cores "$(nproc)" all_tables --configfile config/demo.yaml \
    --config 'train={"device":"cuda"}' results=results/demo_cuda data_dir=results/demo_cuda/data \
    > "$OUT/demo.log" 2>&1
  echo "demo rc=$? wall_s=$(( $(date +%s) - start ))" | tee -a "$OUT/demo.log"
  tail -5 "$OUT/demo.log"
  tar czf "$OUT/demo_tables.tar.gz" results/demo_cuda/tables $(ls results/demo_cuda/runs/*/*/*/*/*/*/*/metrics.json \
    2>/dev/null) 2>/dev/null
  cat results/demo_cuda/tables/vanilla.md results/demo_cuda/tables/partial.md results/demo_cuda/tables/time.md \
    2>/dev/null
fi
