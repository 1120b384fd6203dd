#!/usr/bin/env bash
# The own-model runs of docs/OWN_MODEL.md, as they were made (niced; storage outside the repo).
#
#   bash scripts/own_model_runs.sh techniques   # the QK-norm and Muon pairs; diffs; CSVs (~3 core-h)
#   bash scripts/own_model_runs.sh adapters     # litgpt and HF Llama end to end, each in its venv
#   bash scripts/own_model_runs.sh function     # the example training function end to end
#
# DB defaults to sqlite:////work/data/own_model.db (techniques) and own_e2e.db (the rest).
set -euo pipefail
cd "$(dirname "$0")/.."
export SWEEPER_THREADS=1 PYTHONPATH=$PWD
DATA=${OWN_MODEL_DATA:-/work/data}
mkdir -p "$DATA"
T=sqlite:///$DATA/own_model.db
E=sqlite:///$DATA/own_e2e.db
run() { nice -n 10 "$@"; }
case "${1:-}" in
  techniques)
    for s in qknorm_off qknorm_on muon qknorm_off_ext qknorm_on_ext muon_hi; do
      run .venv/bin/sweeper launch studies/$s.toml --storage "$T" --no-progress --max-concurrent 1
      .venv/bin/sweeper trials $s --storage "$T" -o docs/data/$s.csv
    done
    .venv/bin/sweeper diff qknorm_off+qknorm_off_ext qknorm_on+qknorm_on_ext --storage "$T" \
      --json --plot docs/results/own_diff_qknorm.png > docs/data/own_model/diff_qknorm.json
    .venv/bin/sweeper diff qknorm_off+qknorm_off_ext muon+muon_hi --storage "$T" \
      --json --plot docs/results/own_diff_muon.png > docs/data/own_model/diff_muon.json
    ;;
  adapters)
    for pair in own_litgpt:litgpt own_hf_llama:hf; do
      name=${pair%%:*}; venv=${SWEEPER_ADAPTER_VENVS:-.cache/adapter-venvs}/${pair##*:}
      bash scripts/adapter_venvs.sh "${pair##*:}"  # (kept when ready; a half-made one made anew)
      py="$venv/bin/python -m sweeper"
      $py validate studies/adapters/$name.toml
      run $py launch studies/adapters/$name.toml --storage "$E" --no-progress
      $py fit $name --storage "$E" --method parabola  # (3 cells: docs/OWN_MODEL.md says why)
      target=(--width 2048 --depth 24 --heads 16 --vocab 32000 --context 2048
              --parametrization mup --tokens 2e10 --bytes-per-token 4 --force)
      $py recommend $name --storage "$E" "${target[@]}"
      $py export $name --storage "$E" "${target[@]}" --format litgpt -o "$DATA/$name.yaml"
      run $py coord-check studies/adapters/$name.toml --widths 32,64,128,256 --lr 0.01 \
        -o "$DATA/coord_$name"
    done
    ;;
  function)
    run .venv/bin/sweeper launch studies/own_function.toml --storage "$E" --no-progress
    .venv/bin/sweeper status own_function --storage "$E"
    .venv/bin/sweeper fit own_function --storage "$E" --method parabola
    .venv/bin/sweeper recommend own_function --storage "$E" --width 2048 --depth 24 \
      --vocab 32000 --tokens 2e10 --bytes-per-token 4 --force
    ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
