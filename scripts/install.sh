#!/usr/bin/env bash
# Install everything DataDojo needs to run and to be tested, on a Debian-like machine or any machine with pip.
#
#   bash scripts/install.sh            # sandbox tool (if root and apt-get exists), torch (CPU), package + extras (dev, train, ray)
#
# Environment knobs:
#   DATADOJO_TORCH=skip        keep the torch you already have (e.g. a CUDA build you installed yourself)
#   DATADOJO_TORCH_SPEC=...    the torch requirement to install (default: torch==2.13.0, a CPU build)
#   DATADOJO_NO_APT=1          do not try to install Debian packages (bubblewrap for the sandbox)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# Debian packages: bubblewrap (sandbox isolation) and chromium (renders the HTML reports in tests).
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ "${DATADOJO_NO_APT:-0}" != 1 ] && [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[install] installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "[install] not installed and cannot install here: ${missing[*]} (without bubblewrap the sandbox runs" \
         "with reduced isolation; without chromium the report rendering test is skipped)" >&2
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
