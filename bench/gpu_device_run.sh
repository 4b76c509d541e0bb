#!/usr/bin/env bash
# One device call (see bench/gpu_carry.sh): `make gpu-bench` without SmolLM2's weights (too large to
# carry), then the fast suite on CUDA, with every log and the JSON under $OUT.
# BUDGET_S (gpu-bench's budget, default 300) and SUITE_S (the suite's limit, default 170) size it.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/src HF_HUB_OFFLINE=1 RLVER_DATA_DIR=/tmp/rlver-data PYTHONUNBUFFERED=1
[ -d .gpu/data/published_code ] && export RLVER_SHARED_DATA=$PWD/.gpu/data
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/env.txt"
python3 -c "import sys, torch, transformers, peft; print(sys.version.split()[0], torch.__version__, transformers.__version__, peft.__version__)" | tee -a "$OUT/env.txt"
start=$(date +%s)
timeout $(( ${BUDGET_S:-300} + 60 )) python3 bench/gpu_bench.py --tokenizer .gpu/tok --skip smollm2 \
  --budget-s "${BUDGET_S:-300}" --reserve-s 150 2>&1 | tee "$OUT/bench.log"
cp bench/results/gpu_bench.json "$OUT/" 2>/dev/null
echo "bench wall $(( $(date +%s) - start )) s" | tee -a "$OUT/env.txt"
start=$(date +%s)
timeout "${SUITE_S:-170}" python3 -m pytest -v -n 14 --timeout 120 -p no:cacheprovider \
  -m "not slow and not timing and not verl and not realmodel and not browser" tests > "$OUT/suite.log" 2>&1
echo "suite rc $? wall $(( $(date +%s) - start )) s" | tee -a "$OUT/env.txt"
grep -E " (FAILED|ERROR) " "$OUT/suite.log" | head -40
tail -3 "$OUT/suite.log"
