#!/usr/bin/env bash
# Run the whole test suite under load, to prove that no verdict depends on the machine's speed.
#
# Starts one busy-looping process per core (two by default), runs `python3 -m pytest -q` three times
# while they spin, stops them, and reports each run's result. Exit status: 0 only if every run passed.
#
#   bash scripts/stress_tests.sh                 # 2 busy loops, 3 runs, the whole suite
#   STRESS_LOAD=4 STRESS_RUNS=1 bash scripts/stress_tests.sh tests/llm   # extra args go to pytest
#
# Logs go to ${STRESS_LOGS:-stress-logs}/run-N.log (the summary table at the end names them).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"  # test this checkout, not an installed copy

load=${STRESS_LOAD:-2}
runs=${STRESS_RUNS:-3}
logs=${STRESS_LOGS:-stress-logs}
mkdir -p "$logs"

busy=()
stop_load() {
    for pid in "${busy[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${busy[@]}"; do
        wait "$pid" 2>/dev/null
    done
    busy=()
}
trap stop_load EXIT INT TERM

for _ in $(seq "$load"); do
    ( while :; do :; done ) &
    busy+=("$!")
done
echo "stress: $load busy-looping processes (${busy[*]}); $runs pytest run(s) of: pytest -q $*"

declare -a results
failed=0
for i in $(seq "$runs"); do
    log="$logs/run-$i.log"
    start=$(date +%s)
    python3 -m pytest -q -p no:cacheprovider "$@" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    tail_line=$(grep -E '(passed|failed|error)' "$log" | tail -1)
    results+=("run $i: exit $rc in ${secs}s: ${tail_line:-no pytest summary} ($log)")
    echo "${results[-1]}"
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
done
stop_load
trap - EXIT INT TERM

echo
echo "stress summary ($load busy loops, $runs runs):"
printf '  %s\n' "${results[@]}"
if [ "$failed" -gt 0 ]; then
    echo "  $failed of $runs run(s) FAILED; failures:"
    grep -h -E '^(FAILED|ERROR) ' "$logs"/run-*.log | sort | uniq -c | sed 's/^/  /'
    exit 1
fi
echo "  all $runs runs passed under load"
