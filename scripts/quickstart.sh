#!/usr/bin/env bash
# The main job, end to end on this machine: install, sweep the quickstart ladder on local Ray with
# the built-in corpus and the SQLite default, fit the scaling laws, validate the transfer on the
# largest cell, recommend and export a litgpt config for an example 1B-parameter target, and write
# the report. Everything lands in ./quickstart/ (database, exports, report).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bash "$repo/scripts/setup.sh"
sweeper="$repo/.venv/bin/sweeper"
out="${SWEEPER_QUICKSTART_DIR:-$PWD/quickstart}"
mkdir -p "$out"
export SWEEPER_STORAGE="${SWEEPER_STORAGE:-sqlite:///$out/sweeper.db}"

echo "== 1/6 sweep the ladder (studies/quickstart.toml) into $SWEEPER_STORAGE"
"$sweeper" launch "$repo/studies/quickstart.toml"
echo "== 2/6 fit the optimal LR against scale"
"$sweeper" fit quickstart
echo "== 3/6 hold out the largest cell, predict it from the others, train it at the prediction"
"$sweeper" validate-transfer quickstart --holdout largest --seeds 3
echo "== 4/6 recommend a recipe for a 1B-parameter model on 20B tokens (8 x 80 GB GPUs)"
# The proxies train on bytes; the target's 50304-entry vocab is a GPT-2-style BPE, about 4 bytes of
# English text a token (OpenAI's rule of thumb): --bytes-per-token converts D and the batch.
"$sweeper" recommend quickstart --width 2048 --depth 20 --vocab 50304 --context 2048 \
  --tokens 2e10 --gpus 8 --gpu-memory-gb 80 --micro-batch 8 --precision bf16 \
  --peak-tflops 989 --mfu 0.4 --bytes-per-token 4 | tee "$out/recipe.txt"
echo "== 5/6 export it for litgpt"
"$sweeper" export quickstart --width 2048 --depth 20 --vocab 50304 --context 2048 \
  --tokens 2e10 --gpus 8 --gpu-memory-gb 80 --micro-batch 8 --precision bf16 \
  --peak-tflops 989 --mfu 0.4 --bytes-per-token 4 --format litgpt -o "$out/litgpt.yaml"
"$sweeper" export quickstart --width 2048 --depth 20 --vocab 50304 --context 2048 \
  --tokens 2e10 --gpus 8 --gpu-memory-gb 80 --micro-batch 8 --precision bf16 \
  --peak-tflops 989 --mfu 0.4 --bytes-per-token 4 --format json -o "$out/recipe.json" 2>/dev/null
echo "== 6/6 write the report"
"$sweeper" report quickstart -o "$out/report" --recipe-json "$out/recipe.json"
echo "done: open $out/report/index.html"
