#!/usr/bin/env bash
# Install everything DataDojo needs to run and to be tested, on a Debian-like machine or any machine with pip.
#
#   bash scripts/install.sh            # bubblewrap (if root and apt-get exists), torch (CPU), package + extras (dev, train, sci, ray)
#
# Environment knobs:
#   DATADOJO_TORCH=skip        keep the torch you already have (e.g. a CUDA build you installed yourself)
#   DATADOJO_TORCH_SPEC=...    the torch requirement to install (default: torch==2.13.0, a CPU build)
#   DATADOJO_NO_APT=1          do not try to install Debian packages (bubblewrap for the sandbox)
#   DATADOJO_CHROMIUM=1        also install chromium: only the test that renders the HTML reports in a browser
#                              uses it (it is skipped, with that reason, without it); nothing else does
#   DATADOJO_APT_TRIES=N       how often to try an apt command that finds apt's lock held (default 6)
#   DATADOJO_APT_RETRY_S=S     seconds between those tries (default 20), on top of apt's own 120 s lock wait
#
# The Debian packages are optional: a package that cannot be installed (no root, no apt, apt's lock held past
# the retries, a package missing from the mirror) is skipped with one line naming it and how to add it later;
# the Python packages are what the script must install, and it stops on their failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
APT_TRIES=${DATADOJO_APT_TRIES:-6}
APT_RETRY_S=${DATADOJO_APT_RETRY_S:-20}

# apt_run ARGS...: apt-get ARGS, waiting for apt's lock (held by unattended-upgrades or cloud-init on a fresh
# machine): apt itself waits up to 120 s (DPkg::Lock::Timeout, apt >= 1.9.11; older apt ignores the option),
# then the command is tried again, up to APT_TRIES times. Returns apt's status; never exits the script.
apt_run() {
  local try out status
  for ((try = 1; try <= APT_TRIES; try++)); do
    status=0
    out=$(DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 "$@" 2>&1) || status=$?
    if [ "$status" = 0 ]; then
      return 0
    fi
    if ! grep -qiE "could not get lock|unable to acquire the dpkg frontend lock|unable to lock" <<<"$out"; then
      APT_ERROR=$(grep -v '^\s*$' <<<"$out" | tail -n 1)
      return "$status"
    fi
    if [ "$try" -lt "$APT_TRIES" ]; then
      echo "[install] apt is busy (another apt or dpkg holds its lock); trying again in ${APT_RETRY_S} s" \
           "(try $try of $APT_TRIES)" >&2
      sleep "$APT_RETRY_S"
    fi
  done
  APT_ERROR="apt's lock was still held after $APT_TRIES tries"
  return 1
}

# skipped PACKAGE WHY CONSEQUENCE: the one line for an optional package that is not installed.
skipped() {
  echo "[install] skipped $1 ($2): $3; add it later with: sudo apt-get install $1" >&2
}

declare -A WHY=(
  [bubblewrap]="without it the sandbox runs with reduced isolation (docs/sandbox.md)"
  [chromium]="without it the test that renders the HTML reports in a browser is skipped"
)
wanted=()
command -v bwrap >/dev/null 2>&1 || wanted+=(bubblewrap)
if [ "${DATADOJO_CHROMIUM:-0}" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || wanted+=(chromium)
fi
if [ ${#wanted[@]} -gt 0 ]; then
  if [ "${DATADOJO_NO_APT:-0}" = 1 ]; then
    for p in "${wanted[@]}"; do skipped "$p" "DATADOJO_NO_APT=1" "${WHY[$p]}"; done
  elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    for p in "${wanted[@]}"; do skipped "$p" "needs root and apt-get" "${WHY[$p]}"; done
  else
    echo "[install] installing Debian packages: ${wanted[*]}"
    APT_ERROR=""
    if ! apt_run update -qq; then
      echo "[install] apt-get update failed ($APT_ERROR); trying the install with the package lists as they are" >&2
    fi
    for p in "${wanted[@]}"; do  # one at a time: a package the mirror lacks does not cost the others
      APT_ERROR=""
      apt_run install -y -qq --no-install-recommends "$p" || skipped "$p" "apt-get: $APT_ERROR" "${WHY[$p]}"
    done
  fi
fi

if [ "${DATADOJO_TORCH:-}" != skip ]; then
  # Installed first and pinned, so the 'train' extra below is satisfied without pulling a multi-GB CUDA build.
  "$PY" -m pip install -q "${DATADOJO_TORCH_SPEC:-torch==2.13.0}"
fi
# sci: the readers of scientific formats (h5py, netCDF4, xarray) the corpus profiler and the sandbox of
# `datadojo eval scidata` use; their tests skip, visibly, without them. ray: --executor ray (docs/scaling.md).
"$PY" -m pip install -q -e ".[dev,train,sci,ray]"
echo "[install] done: $("$PY" -c 'import datadojo; print("datadojo", datadojo.__version__)')"
if ! command -v datadojo >/dev/null 2>&1; then
  echo "[install] the datadojo command is not on PATH: add $("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')" \
       "(or $("$PY" -m site --user-base)/bin for a --user install) to PATH" >&2
fi
