#!/usr/bin/env bash
# Engine job: load DataDojo's exports in the real training engines and train / call them there.
#
#   bash scripts/engine_tests.sh                 # all engines: trl llamafactory verl verifiers openenv inspect harbor
#   DATADOJO_ENGINES="verl" bash scripts/engine_tests.sh
#   bash scripts/engine_tests.sh --install-only  # only build the cached environments
#
# Each engine gets its own virtual environment with the CPU torch (torch==2.13.0) and the exact package
# versions of tests/engines/requirements/<engine>.txt (the engine's own pins, resolved once and locked, so
# a new release upstream cannot change what CI tests). The environments are cached under
# $DATADOJO_ENGINE_CACHE (default ~/.cache/datadojo-engines), keyed by a hash of the lock file, the Python
# version and the torch spec; pip's own wheel cache is kept too, so a second run installs nothing.
#
# LLaMA-Factory 0.9.5 imports torchaudio unconditionally, and no torchaudio on the package index loads beside
# the CPU torch 2.13.0 (and no torchvision: the index's builds are CUDA builds of other ABIs). Its environment
# therefore takes the matching trio torch 2.11.0 / torchvision 0.26.0 / torchaudio 2.11.0 from the index (the
# set verl's own `cpu` extra pins; CUDA builds, several GB, run on the CPU here) — see docs/training.md.
#
# The environment adapters' engines (verifiers, openenv: DataDojo loaded by verifiers' vf-eval and served to
# openenv-core's client) need no torch: their environments take none (TORCH_FOR maps them to nothing).
# inspect_ai and Harbor are harnesses, not trainers: their environments take no torch. Harbor (0.26) needs
# Python >= 3.12 (its code uses 3.12 syntax and typing.override) while Debian 12's is 3.11: its environment
# is built with $DATADOJO_HARBOR_PYTHON, else the first python3.13 / python3.12 that runs (on PATH, or one
# of pyenv's versions, which this machine image carries); with none, Harbor is NOT TESTED and the job says
# why (the export and its reward are still checked by the unit suite, tests/integrations/
# test_harbor_export.py, which runs the exported tests script without Docker).
#
# Fixtures (tests/engines/make_fixtures.py, run with this Python, which has DataDojo installed): oracle
# Spider trajectories and EnvLunch warm-up tasks + trajectories from ../shared/data/spider, every export
# kind, and a tiny random Qwen2 checkpoint with Qwen2.5's chat template.
#
# Parity: tests/env/test_parity.py (this Python) and each engine's parity case write a reward row file per
# consumer into one folder; scripts/parity_table.py then prints the consumer × task table and fails the job
# when two consumers differ by more than 1e-9 or a consumer that ran wrote no file.
#
# Failure policy: a failing engine test fails the job. An engine whose environment cannot be installed
# (the package index unreachable or a download failing after retries) is reported as NOT TESTED and does
# not fail the job, unless DATADOJO_ENGINES_STRICT=1 — that failure is outside the code under test.
# Without ../shared/data/spider there are no real trajectories to export: the job says so and stops (0).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
CACHE=${DATADOJO_ENGINE_CACHE:-$HOME/.cache/datadojo-engines}
ENGINES=${DATADOJO_ENGINES:-"trl llamafactory verl verifiers openenv inspect harbor"}
TORCH_SPEC=${DATADOJO_ENGINE_TORCH:-torch==2.13.0}
STRICT=${DATADOJO_ENGINES_STRICT:-0}
SPIDER=${DATADOJO_SPIDER:-$ROOT/../shared/data/spider}
# The torch an engine's environment takes when it is not $TORCH_SPEC (see above); "" = none.
declare -A TORCH_FOR=([llamafactory]="torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0" [verifiers]="" [openenv]="" [inspect]="" [harbor]="")

newer_python() {  # the first Python >= 3.12 that runs: on PATH (not a pyenv shim of another version), or pyenv's
  local py
  for py in python3.13 python3.12 "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.1[23]*/bin/python3; do
    if "$py" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then
      command -v "$py"
      return 0
    fi
  done
  return 1
}
# The Python an engine's environment is built with when it is not $PY (see above); "" = none found.
declare -A PYTHON_FOR=([harbor]="${DATADOJO_HARBOR_PYTHON:-$(newer_python || true)}")
declare -A NO_PYTHON_WHY=([harbor]="Harbor needs Python >= 3.12 and there is none here (set DATADOJO_HARBOR_PYTHON)")

log() { echo "[engines $(date -u +%H:%M:%S)] $*"; }

pip_retry() {  # pip with retries on top of pip's own: a dropped connection should not fail CI
  local venv=$1; shift
  local i
  for i in 1 2 3; do
    if "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-compile --retries 10 --timeout 60 "$@"; then
      return 0
    fi
    log "pip install failed (attempt $i of 3): $*"
    sleep $((i * 10))
  done
  return 1
}

python_for() {  # the interpreter engine $1's environment is built with; non-zero when there is none
  local py=${PYTHON_FOR[$1]-$PY}
  [ -n "$py" ] || return 1
  echo "$py"
}

venv_for() {  # prints the cached venv of engine $1, building it when missing; non-zero when it cannot
  local engine=$1 lock="tests/engines/requirements/$1.txt" key dir py
  local torch=${TORCH_FOR[$engine]-$TORCH_SPEC}
  py=$(python_for "$engine") || return 1
  key=$( { cat "$lock"; "$py" -V; echo "$torch"; } | sha256sum | cut -c1-12)
  dir="$CACHE/$engine-$key"
  if [ -f "$dir/.complete" ]; then
    echo "$dir"
    return 0
  fi
  mkdir -p "$CACHE"
  rm -rf "$dir"  # a build that was interrupted (no .complete marker)
  log "building the $engine environment in $dir (cold: a few minutes)" >&2
  # Built at its final path (a venv's scripts record it); .complete is written last.
  "$py" -m venv "$dir" >&2 || return 1
  {
    # shellcheck disable=SC2086  # the torch spec may name several packages
    { [ -z "$torch" ] || pip_retry "$dir" $torch; } && pip_retry "$dir" -r "$lock"
  } >&2 || { rm -rf "$dir"; return 1; }
  touch "$dir/.complete"
  # Older environments of this engine (other keys) are dropped: each is about 1-2 GB.
  find "$CACHE" -maxdepth 1 -name "$engine-*" ! -name "$engine-$key" -exec rm -rf {} + 2>/dev/null || true
  echo "$dir"
}

if [ "${1:-}" = --install-only ]; then  # build (or check) the cached environments, run nothing
  for engine in $ENGINES; do
    t0=$(date +%s)
    if ! python_for "$engine" >/dev/null; then
      log "NOT TESTED: $engine: ${NO_PYTHON_WHY[$engine]}"
      continue
    fi
    venv_for "$engine" >/dev/null || { log "could not install $engine"; exit 1; }
    log "$engine environment ready ($(($(date +%s) - t0)) s)"
  done
  exit 0
fi

if [ ! -d "$SPIDER/database" ]; then
  log "NOT TESTED: $SPIDER is absent (the engine tests export real Spider trajectories); nothing to do"
  exit 0
fi

START=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/datadojo-engines.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
log "fixtures: oracle Spider + EnvLunch warm-up trajectories, exports, tiny Qwen2 checkpoint -> $WORK"
# this checkout's DataDojo, even where another one is installed
PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" tests/engines/make_fixtures.py --spider "$SPIDER" \
  --out "$WORK/fixtures"

declare -A RESULT
failed=0
# Reward parity (docs/environment.md, "Parity"): every consumer writes <consumer>.json into $PARITY; the
# main suite's rows (eval, train rl's rollouts) first, with this Python, then each engine's own.
PARITY="$WORK/parity"
RAN="eval train_rl"
log "parity: the main suite's rows (eval, train rl) -> $PARITY"
if ! DATADOJO_PARITY_DIR="$PARITY" PYTHONPATH="$ROOT/src" "$PY" -m pytest -q -p no:cacheprovider tests/env/test_parity.py; then
  log "parity: the main suite's rows FAILED"
  failed=1
fi
for engine in $ENGINES; do
  t0=$(date +%s)
  if ! python_for "$engine" >/dev/null; then
    RESULT[$engine]="NOT TESTED (${NO_PYTHON_WHY[$engine]})"
    log "${RESULT[$engine]}: $engine"
    [ "$STRICT" = 1 ] && failed=1
    continue
  fi
  if ! venv=$(venv_for "$engine"); then
    RESULT[$engine]="NOT TESTED (environment could not be installed)"
    log "${RESULT[$engine]}: $engine"
    [ "$STRICT" = 1 ] && failed=1
    continue
  fi
  log "$engine: tests in $venv"
  RAN="$RAN $engine"
  if DATADOJO_ENGINE_FIXTURES="$WORK/fixtures" DATADOJO_PARITY_DIR="$PARITY" PYTHONPATH="$ROOT/src" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled DISABLE_VERSION_CHECK=1 TOKENIZERS_PARALLELISM=false \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider --confcutdir=tests/engines -c tests/engines/pytest.ini \
    tests/engines/test_"$engine"*.py; then
    RESULT[$engine]="passed"
  else
    RESULT[$engine]="FAILED"
    failed=1
  fi
  RESULT[$engine]="${RESULT[$engine]} ($(($(date +%s) - t0)) s)"
done

# The table: the consumers datadojo.testing.parity.CONSUMERS lists that ran here must all be present and agree
log "parity table (consumers that ran: $RAN)"
if PYTHONPATH="$ROOT/src" "$PY" scripts/parity_table.py "$PARITY" --ran "$RAN"; then
  RESULT[parity]="passed"
else
  RESULT[parity]="FAILED"
  failed=1
fi

log "summary (total $(($(date +%s) - START)) s):"
for engine in $ENGINES parity; do
  printf '  %-13s %s\n' "$engine" "${RESULT[$engine]}"
done
exit $failed
