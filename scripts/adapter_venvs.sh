#!/usr/bin/env bash
# The adapter virtualenvs: one per framework extra (hf: transformers 5.x; litgpt: litgpt 0.5.13,
# which needs transformers < 4.57), so their pins never meet. Each overlays the main .venv (a .pth
# runs site.addsitedir on its site-packages: torch, ray, optuna, pip and the editable sweeper come
# from there) and adds its framework with torch held at the main venv's version.
#
#   bash scripts/adapter_venvs.sh [hf] [litgpt]   # -> .cache/adapter-venvs/{hf,litgpt}
#   .cache/adapter-venvs/hf/bin/sweeper validate studies/adapters/own_hf_llama.toml
#   .cache/adapter-venvs/hf/bin/python -m pytest tests/sweeper/adapters
#
# $SWEEPER_ADAPTER_VENVS moves the folder. A venv is ready once its stamp (the framework pin,
# torch's version, the main venv, Python's version) is written, last; a rerun keeps a ready venv
# and makes anew one whose stamp is missing or differs (a half-made venv, a changed pin).
# Exit status: 0 when every venv named is ready; 2 when one could not be made because the
# registry could not be reached or holds no such version (its pip log's tail is printed; CI
# reports it and goes on); 1 for any other failure (the pins in conflict, torch or sweeper not
# importable in the venv: CI fails), or without a main .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MAIN=$ROOT/.venv
[ -x "$MAIN/bin/python" ] || { echo "run scripts/setup.sh first (no .venv)" >&2; exit 1; }
SITE=$("$MAIN/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TORCH=$("$MAIN/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')
PYVER=$("$MAIN/bin/python" -c 'import sys; print(sys.version.split()[0])')
DIR=${SWEEPER_ADAPTER_VENVS:-$ROOT/.cache/adapter-venvs}
mkdir -p "$DIR"
echo "torch==$TORCH" > "$DIR/constraints.txt"
declare -A PKG=([hf]="transformers==5.23.0" [litgpt]="litgpt==0.5.13")
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(hf litgpt)
failed=0
# pip's words for a registry it could not reach; with other sources configured (find-links, an
# extra index) an unreachable index reads only "No matching distribution found", as a pin gone
# from the registry does, so that counts as unreachable too (a resolver conflict does not)
UNREACHABLE="NewConnectionError|Max retries exceeded|Temporary failure in name resolution"
UNREACHABLE+="|Network is unreachable|Could not fetch URL|connection (refused|reset|timed out)"
UNREACHABLE+="|No matching distribution found"
for name in "${names[@]}"; do
  [ -n "${PKG[$name]:-}" ] || { echo "unknown adapter venv '$name' (hf, litgpt)" >&2; exit 1; }
  venv=$DIR/$name
  stamp="pkg=${PKG[$name]} torch=$TORCH main=$MAIN py=$PYVER"
  if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$stamp" ]; then
    echo "$name: ready ($venv)"
    continue
  fi
  t0=$SECONDS
  rm -rf "$venv"
  # no pip of its own: the main venv's pip, on the path through the .pth, installs into this
  # venv's prefix (the one running it), so no ensurepip (absent from some system Pythons)
  "$MAIN/bin/python" -m venv --without-pip "$venv"
  own=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "import site; site.addsitedir('$SITE')" > "$own/_main_venv.pth"
  log=$DIR/$name.setup.log
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q --no-compile \
      -c "$DIR/constraints.txt" "${PKG[$name]}" > "$log" 2>&1; then
    echo "$name: FAILED to install ${PKG[$name]} (log: $log)" >&2
    tail -5 "$log" | sed 's/^/    /' >&2
    # (unreachable: no connection, or no index answered; anything else is the venv's own fault)
    if grep -qiE "$UNREACHABLE" "$log"; then
      [ $failed = 1 ] || failed=2
    else
      failed=1
    fi
    continue
  fi
  printf '#!/bin/sh\nexec "%s" -m sweeper "$@"\n' "$venv/bin/python" > "$venv/bin/sweeper"
  chmod +x "$venv/bin/sweeper"
  "$venv/bin/python" -c 'import torch, sweeper' \
    || { echo "$name: torch or sweeper not importable" >&2; failed=1; continue; }
  echo "$stamp" > "$venv/.stamp"
  echo "$name: made in $((SECONDS - t0)) s ($venv)"
done
exit $failed
