#!/usr/bin/env bash
# The adapter virtualenvs: one per framework extra (hf: transformers 5.x; litgpt: litgpt 0.5.13,
# which needs transformers < 4.57), so their pins never meet. Each overlays the main .venv (a .pth
# runs site.addsitedir on its site-packages: torch, ray, optuna and the editable sweeper come from
# there) and adds its framework with torch held at the main venv's version.
#
#   bash scripts/adapter_venvs.sh            # -> .cache/adapter-venvs/{hf,litgpt}
#   .cache/adapter-venvs/hf/bin/sweeper validate studies/adapters/own_hf_llama.toml
#   .cache/adapter-venvs/hf/bin/python -m pytest tests/sweeper/adapters
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MAIN=$ROOT/.venv
[ -x "$MAIN/bin/python" ] || { echo "run scripts/setup.sh first (no .venv)" >&2; exit 1; }
SITE=$("$MAIN/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TORCH=$("$MAIN/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')
DIR=$ROOT/.cache/adapter-venvs
mkdir -p "$DIR"
echo "torch==$TORCH" > "$DIR/constraints.txt"
declare -A PKG=([hf]="transformers==5.23.0" [litgpt]="litgpt==0.5.13")
for name in hf litgpt; do
  [ -x "$DIR/$name/bin/python" ] || "$MAIN/bin/python" -m venv --without-pip "$DIR/$name" 2>/dev/null \
    || python3 -m venv "$DIR/$name"
  [ -x "$DIR/$name/bin/pip" ] || "$DIR/$name/bin/python" -m ensurepip -q
  own=$("$DIR/$name/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "import site; site.addsitedir('$SITE')" > "$own/_main_venv.pth"
  "$DIR/$name/bin/python" -m pip install -q -c "$DIR/constraints.txt" "${PKG[$name]}"
  printf '#!/bin/sh\nexec "%s" -m sweeper "$@"\n' "$DIR/$name/bin/python" > "$DIR/$name/bin/sweeper"
  chmod +x "$DIR/$name/bin/sweeper"
  echo "$name: $("$DIR/$name/bin/python" -c 'import torch; print("torch", torch.__version__)')"
done
