#!/usr/bin/env bash
# One device call (see bench/gpu_carry.sh), each part with its own time limit and its log under $OUT:
#   1. bench/engine_check.py on CUDA: the transformers engine on the token seam (parity, batch
#      invariance, release/resume, compiled decode, bf16);                      ENGINE_S (default 120)
#   2. bench/cuda_mutants.py: the CPU-untestable mutants against tests/train/test_batch_cuda_only.py;
#                                                                                MUTANTS_S (default 150)
#   3. `make gpu-bench` without SmolLM2's weights (too large to carry): decode at BATCHES (default
#      "8 32 128"), the GRPO LoRA step, compiled decode (SKIP="step" leaves a part out); BUDGET_S
#      (default 300), RESERVE_S (what eager decode leaves for the rest, default 150)
#   4. the fast suite on CUDA;                                                   SUITE_S (default 170)
# A part whose limit is 0 is skipped.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/src HF_HUB_OFFLINE=1 RLVER_DATA_DIR=/tmp/rlver-data PYTHONUNBUFFERED=1
[ -d .gpu/data/published_code ] && export RLVER_SHARED_DATA=$PWD/.gpu/data
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/env.txt"
python3 -c "import sys, torch, transformers, peft; print(sys.version.split()[0], torch.__version__, transformers.__version__, peft.__version__)" | tee -a "$OUT/env.txt"

part() {  # part NAME LIMIT_S COMMAND...: run it under its limit, log to $OUT/NAME.log, say rc and wall
  local name=$1 limit=$2 start
  shift 2
  [ "$limit" -gt 0 ] || { echo "$name: skipped (limit 0)" | tee -a "$OUT/env.txt"; return; }
  start=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc $? wall $(( $(date +%s) - start )) s" | tee -a "$OUT/env.txt"
}

part engine "${ENGINE_S:-120}" python3 bench/engine_check.py --device cuda
tail -c 3000 "$OUT/engine.log"
part mutants "${MUTANTS_S:-150}" python3 bench/cuda_mutants.py
grep -E "killed|SURVIVED|unchanged|error" "$OUT/mutants.log" | tail -20
# shellcheck disable=SC2086
part bench "$(( ${BUDGET_S:-300} + 60 ))" python3 bench/gpu_bench.py --tokenizer .gpu/tok --skip smollm2 ${SKIP:-} \
  --batches ${BATCHES:-8 32 128} --budget-s "${BUDGET_S:-300}" --reserve-s "${RESERVE_S:-150}"
cp bench/results/gpu_bench.json "$OUT/" 2>/dev/null
tail -40 "$OUT/bench.log"
part suite "${SUITE_S:-170}" python3 -m pytest -v -n 14 --timeout 120 -p no:cacheprovider \
  -m "not slow and not timing and not verl and not realmodel and not browser" tests
grep -E " (FAILED|ERROR) " "$OUT/suite.log" | head -40
tail -3 "$OUT/suite.log"
