#!/usr/bin/env bash
# Run the sandbox tests as an ordinary user: the path most users take, which tests run as root never see.
#
# Without root, bubblewrap works in a user namespace: the cells share the harness's uid, mounts inherited
# from outside are locked, and RLIMIT_NPROC counts a user's processes per user namespace. Root-only runs
# cannot show what goes wrong there (uid 0 is even exempt from RLIMIT_NPROC), and a simulation as root
# (tests/sandbox/test_sandbox_forkserver.py's USERNS) covers only the mounts. So this script, run as root,
# makes what an unprivileged uid can use and runs the tests as that uid:
#   1. a copy of this checkout (without .git) and a virtual environment, both in a new folder under /tmp
#      that every user can read, the environment made from a Python that every user can run
#      (UNPRIV_PYTHON, default /usr/bin/python3: pyenv's, under /root, is not);
#   2. `pip install '.[dev]'` there (from the package registry, as any install);
#   3. `python -m pytest tests/sandbox` as UNPRIV_UID (default 60000) with setpriv, HOME in the folder.
#
#   sudo bash scripts/test_unprivileged.sh                   # tests/sandbox
#   sudo bash scripts/test_unprivileged.sh tests/agent -x    # extra args replace the test selection
#
# Exit status: pytest's; 3 when it cannot run here (not root, no setpriv, no usable Python), said why.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${UNPRIV_PYTHON:-/usr/bin/python3}
UID_=${UNPRIV_UID:-60000}
log() { echo "[unprivileged $(date -u +%H:%M:%S)] $*"; }
cannot() { echo "test_unprivileged.sh: $*" >&2; exit 3; }

[ "$(id -u)" = 0 ] || cannot "run it as root: it switches to uid $UID_ to run the tests"
command -v setpriv >/dev/null || cannot "setpriv (util-linux) is not installed"
[ -x "$PY" ] || cannot "$PY is not an executable Python (set UNPRIV_PYTHON)"
"$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null || cannot "$PY is older than 3.11"
"$PY" -m venv --help >/dev/null 2>&1 || cannot "$PY has no venv module (Debian: apt-get install python3-venv)"

WORK=$(mktemp -d /tmp/datadojo-unpriv.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"
log "copy of the checkout and a virtual environment from $PY in $WORK"
mkdir "$WORK/src" "$WORK/home"
tar -C "$ROOT" --exclude=.git --exclude='.venv*' --exclude=venv --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude=.pytest_cache --exclude=build --exclude=dist -cf - . | tar -C "$WORK/src" -xf -
"$PY" -m venv "$WORK/venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$WORK/venv/bin/pip" install -q "$WORK/src[dev]"
chmod -R a+rX "$WORK"
chown "$UID_:$UID_" "$WORK/home"
# a stale pytest tmp folder of this uid (an earlier run) would belong to another owner's view: start clean
rm -rf "/tmp/pytest-of-$(getent passwd "$UID_" | cut -d: -f1 || echo "$UID_")"

args=("$@")
[ ${#args[@]} -gt 0 ] || args=(tests/sandbox)
log "pytest ${args[*]} as uid $UID_"
cd "$WORK/src"
set +e
setpriv --reuid="$UID_" --regid="$UID_" --clear-groups \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$WORK/home" LANG=C.UTF-8 \
    "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider "${args[@]}"
rc=$?
log "pytest exit status $rc"
exit $rc
