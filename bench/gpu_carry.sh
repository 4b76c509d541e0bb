#!/usr/bin/env bash
# Prepare what one device call needs beside the tree, into .gpu/ (git-ignored, so name it in the
# call's carry): the wheels the GPU image lacks, SmolLM2's tokenizer files (3.5 MB) and the
# published prompts the grpo-think step reads. Then, on the device, from the repo root:
#   bash bench/gpu_device_run.sh        (carry .gpu; it runs gpu-bench, then the suite on CUDA)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${RLVER_SHARED_DATA:-../shared/data}
models=${RLVER_DATA_DIR:-$HOME/.cache/rlver/data}/models/smollm2-135m-instruct
mkdir -p .gpu/whl .gpu/tok .gpu/data
bash ../shared/gpu/fetch-wheels.sh .gpu/whl >/dev/null
# the report's charts: pygal (a core dependency the GPU image lacks) and what it imports, pure Python,
# at the versions this machine's venv holds
for pkg in pygal importlib_metadata zipp lazy-importer; do
  version=$("${PY:-.venv/bin/python}" -c "import importlib.metadata as m; print(m.version('$pkg'))")
  pip download -q --no-deps -d .gpu/whl "$pkg==$version"
done
for f in tokenizer.json tokenizer_config.json special_tokens_map.json chat_template.jinja generation_config.json; do
  if [ -f "$models/$f" ]; then cp "$models/$f" .gpu/tok/; fi
done
[ -f .gpu/tok/tokenizer.json ] || { echo "error: no SmolLM2 tokenizer in $models; run: rlver models fetch smollm2-135m-instruct" >&2; exit 2; }
if [ -d "$shared/published_code" ]; then
  cp -r "$shared/published_code" .gpu/data/
else
  echo "warning: no $shared/published_code: the gpu-bench step will be skipped" >&2
fi
du -sh .gpu
