#!/usr/bin/env bash
# Load every export format with the real framework it targets; print one line per format ×
# framework version (format, framework version, loader, result).
#
#   scripts/check_exports.sh [--setup-only] [--rebuild] [--update-docs] [-j N] [VENV ...]
#
# - One virtualenv per framework version under .cache/export-venvs/ (their pins conflict: litgpt
#   needs transformers < 4.57, torchtitan 0.2 and 0.3 cannot coexist), made once and reused while
#   its spec is unchanged (a stamp file records it); --rebuild makes them anew; VENV names limit
#   the run to those venvs (plus the project-venv checks, "main").
# - torch is not installed into them: each sees the project venv's torch 2.13.0 (and torch's own
#   pure-Python requirements) through a .pth file pointing at .cache/export-venvs/_shared/, a
#   folder of symlinks to just those packages, never the rest of the project venv; a constraint
#   pins torch==2.13.0 so no framework can pull another (CUDA) build. A package a framework wants
#   in another version is installed into its venv, which comes first on sys.path. Without a
#   project venv holding torch 2.13.0, each venv installs torch==2.13.0 itself (slower, larger).
# - Sweeper is not installed into them: the exports are made once per run by the current exporter
#   in the project venv (scripts/export_checks/make_inputs.py -> .cache/export-venvs/_inputs/);
#   its import path needs numpy, pandas and scipy, which would otherwise be installed (and pinned
#   against each framework) in every venv.
# - tests/exports/ then runs inside each venv (SWEEPER_EXPORT_CHECK=<venv> turns it on; each test
#   module pytest.importorskip's its framework); nanoGPT and the recipe JSON run in the project
#   venv ("main"). scripts/export_checks/summary.py prints the lines; --update-docs also rewrites
#   the table in docs/EXPORTS.md.
#
# Exit status: 0 when every check passed, 1 when one failed, 2 when a venv could not be made.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${SWEEPER_EXPORT_VENVS:-$ROOT/.cache/export-venvs}
PY=${PYTHON:-python3}
MAIN=$ROOT/.venv
NICE=${NICE:-nice -n 10}
TORCH_SPEC=torch==2.13.0
JOBS=2

# name | pip requirements | test modules | extra environment for pip
# triton: torchtitan imports it at module level (MoE/async-EP kernels); CUDA torch wheels bring
# it, the CPU wheel does not.
VENVS=(
  "litgpt-0.5.13|litgpt==0.5.13 transformers<4.57|test_litgpt.py|"
  "transformers-5.23.0|transformers==5.23.0 accelerate|test_hf.py|"
  "deepspeed-0.19.8|deepspeed==0.19.8|test_deepspeed.py|DS_BUILD_OPS=0"
  "megatron-core-0.16.1|megatron-core==0.16.1|test_megatron.py|"
  "torchtitan-0.3.0|torchtitan==0.3.0 triton==3.9.0|test_torchtitan.py|"
  "torchtitan-0.2.2|torchtitan==0.2.2 triton==3.9.0|test_torchtitan.py|"
)
MAIN_TESTS="test_nanogpt.py test_json.py"
TEST_DEPS="pytest>=8 pyyaml"
# torch's own requirements, shared with torch (the project venv has them in versions torch accepts)
TORCH_DEPS="torch filelock typing_extensions sympy mpmath networkx jinja2 markupsafe fsspec"

setup_only=0; rebuild=0; update_docs=0; only=()
while [ $# -gt 0 ]; do
  case $1 in
    --setup-only) setup_only=1 ;;
    --rebuild) rebuild=1 ;;
    --update-docs) update_docs=1 ;;
    -j) JOBS=$2; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) only+=("$1") ;;
  esac
  shift
done

mkdir -p "$CACHE/_logs"
RESULTS=$CACHE/_results
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.0f", b - a}'; }
t_start=$(now)

if [ ! -x "$MAIN/bin/python" ]; then
  echo "no project venv at $MAIN: run scripts/setup.sh first" >&2
  exit 2
fi

# --- torch and its requirements shared from the project venv, when it has torch 2.13.0 --------
shared=""
main_torch=$("$MAIN/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ "${main_torch%%+*}" = "2.13.0" ]; then
  shared=$CACHE/_shared
  stamp="$MAIN $main_torch $TORCH_DEPS"
  if [ ! -f "$shared/.stamp" ] || [ "$(cat "$shared/.stamp")" != "$stamp" ]; then
    rm -rf "$shared"; mkdir -p "$shared"
    "$MAIN/bin/python" - "$shared" $TORCH_DEPS <<'PYEOF' || { echo "could not share torch" >&2; rm -rf "$shared"; shared=""; }
import importlib.metadata as md, os, sys, sysconfig
out, names = sys.argv[1], sys.argv[2:]
site = sysconfig.get_paths()["purelib"]
for name in names:
    dist = md.distribution(name)
    tops = {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")}
    for t in sorted(tops):
        src = os.path.join(site, t)
        if t.endswith((".pth",)) or t == "__pycache__" or not os.path.exists(src):
            continue
        dst = os.path.join(out, t)
        if not os.path.lexists(dst):
            os.symlink(src, dst)
PYEOF
    [ -n "$shared" ] && echo "$stamp" > "$shared/.stamp"
  fi
fi
constraints=$CACHE/_constraints.txt
echo "$TORCH_SPEC" > "$constraints"
pyver=$($PY -c 'import sys; print(sys.version.split()[0])')

setup_venv() {  # name reqs env -> 0 when ready; prints one line
  local name=$1 reqs=$2 env=$3 dir=$CACHE/$1
  local stamp="reqs=$reqs env=$env torch=${shared:+shared-}$TORCH_SPEC tests=$TEST_DEPS py=$pyver"
  if [ $rebuild = 0 ] && [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then
    return 0
  fi
  local t0; t0=$(now)
  rm -rf "$dir"
  local log=$CACHE/_logs/$name.setup.log
  {
    $NICE "$PY" -m venv "$dir" &&
    if [ -n "$shared" ]; then
      "$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' |
        { read -r purelib; echo "$shared" > "$purelib/_sweeper_shared_torch.pth"; }
    fi &&
    # shellcheck disable=SC2086
    env $env PIP_DISABLE_PIP_VERSION_CHECK=1 $NICE "$dir/bin/python" -m pip install -q --no-compile \
      -c "$constraints" "$TORCH_SPEC" $reqs $TEST_DEPS
  } >"$log" 2>&1
  local rc=$?
  if [ $rc = 0 ]; then
    echo "$stamp" > "$dir/.stamp"
    echo "venv $name: made in $(elapsed "$t0") s"
  else
    echo "venv $name: FAILED to install (log: $log)"
    grep -E "ERROR|rror:" "$log" | tail -3 | sed 's/^/    /'
    tail -20 "$log" > "$RESULTS/$name.setup-error"
  fi
  return $rc
}

selected=()
for spec in "${VENVS[@]}"; do
  IFS='|' read -r name reqs tests env <<<"$spec"
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
  selected+=("$spec")
done

# make the venvs, JOBS at a time (pip mostly waits on the network and the disk)
running=0
for spec in "${selected[@]}"; do
  IFS='|' read -r name reqs tests env <<<"$spec"
  setup_venv "$name" "$reqs" "$env" &
  running=$((running + 1))
  if [ $running -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait
echo "venvs ready in $(elapsed "$t_start") s"
[ $setup_only = 1 ] && exit 0

# --- the inputs: every format of each case, by the current exporter --------------------------
t_inputs=$(now)
INPUTS=$CACHE/_inputs
rm -rf "$INPUTS"
if ! $NICE "$MAIN/bin/python" scripts/export_checks/make_inputs.py "$INPUTS" > "$CACHE/_logs/inputs.log" 2>&1; then
  echo "could not make the inputs:"; tail -20 "$CACHE/_logs/inputs.log"; exit 2
fi
echo "inputs made in $(elapsed "$t_inputs") s"

# --- the checks -----------------------------------------------------------------------------
run_tests() {  # venv-name python test-files...
  local name=$1 py=$2; shift 2
  local files=()
  for t in "$@"; do files+=("tests/exports/$t"); done
  local t0; t0=$(now)
  SWEEPER_EXPORT_CHECK=$name SWEEPER_EXPORT_INPUTS=$INPUTS SWEEPER_EXPORT_REPORT=$RESULTS/$name.jsonl \
    $NICE "$py" -m pytest -q --tb=short -p no:cacheprovider "${files[@]}" \
    > "$CACHE/_logs/$name.tests.log" 2>&1
  echo "checks in $name: $(tail -1 "$CACHE/_logs/$name.tests.log" | sed 's/=//g; s/^ *//') ($(elapsed "$t0") s)"
}
t_checks=$(now)
# shellcheck disable=SC2086
run_tests main "$MAIN/bin/python" $MAIN_TESTS
for spec in "${selected[@]}"; do
  IFS='|' read -r name reqs tests env <<<"$spec"
  if [ -f "$CACHE/$name/.stamp" ] && [ ! -f "$RESULTS/$name.setup-error" ]; then
    # shellcheck disable=SC2086
    run_tests "$name" "$CACHE/$name/bin/python" $tests
  fi
done
echo "checks ran in $(elapsed "$t_checks") s (total $(elapsed "$t_start") s)"
echo
args=("$RESULTS" --markdown "$RESULTS/table.md")
[ $update_docs = 1 ] && args+=(--update-docs docs/EXPORTS.md)
"$MAIN/bin/python" scripts/export_checks/summary.py "${args[@]}"
rc=$?
ls "$RESULTS"/*.setup-error >/dev/null 2>&1 && exit 2
exit $rc
