#!/usr/bin/env bash
# Set up .venv, write the demo data the tests train on, lint, then run the whole test suite (slow tests included).
# `--quick` first: the quick tier, `-m 'not slow'` (no launcher, no training docs block, nothing measured over 2.5 s;
# every module of the package still reached: tests/test_tiers.py). Extra arguments go to pytest, e.g.
# `bash scripts/test.sh -k wsd -x`, `bash scripts/test.sh --quick -x`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Both tiers run on two pytest-xdist workers where the machine has 2 cores or more (docs/contributing.md, "Test
# tiers": on this 2-core machine the full suite took 24-28 min on two workers, 35-54 min in one process). Each worker
# runs in a mount namespace with a /dev/shm of its own (tests/support/own_shm_python: mosaicml-streaming's
# shared-memory names race between runs that start together on one /dev/shm), which needs root or a user allowed to
# unshare; elsewhere one process. FOUNDRY_EXT_TEST_WORKERS=N asks for N (1: one process).
tier=()
workers=()
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc alone reports OMP_NUM_THREADS
most=$((4 * cores))
asked=${FOUNDRY_EXT_TEST_WORKERS:-}  # unset or empty: the default
case "${asked:-1}" in
    *[!0-9]* | 0* | ?????*) ok=false ;;  # not digits, a leading 0, 5 digits or more
    *) [ "${asked:-1}" -le "$most" ] && ok=true || ok=false ;;
esac
if [ "$ok" != true ]; then
    echo "test.sh: error: FOUNDRY_EXT_TEST_WORKERS='$asked': expected a whole number of workers from 1 to $most (4 per core here)" >&2
    exit 2
fi
if [ "${1:-}" = "--quick" ]; then
    shift
    tier=(-m "not slow")
fi
n=${asked:-$((cores >= 2 ? 2 : 1))}
if [ "$n" != 1 ]; then
    if tests/support/own_shm true 2>/dev/null; then
        workers=(--tx "${n}*popen//python=tests/support/own_shm_python" --dist load)
    else
        echo "test.sh: no /dev/shm of its own per worker here (unshare --mount is not permitted): one process" >&2
    fi
fi

bash scripts/setup.sh
# One OpenMP thread per process unless told otherwise, as train.py gives each rank (and torchrun does): the suite keeps
# both cores busy, and the tests that train in their own process (lr-find, the benchmarks' smoke runs) spin-waited
# for a second thread: 183 CPU-s instead of 155 for those files on two workers (docs/contributing.md, "Test tiers")
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Let the suite's ~700 processes write the bytecode of what they import, once (scripts/setup.sh: the rest of the stack)
unset PYTHONDONTWRITEBYTECODE
# tests reuse ./demo-data (tests/conftest.py: demo_data); its marker is written last, so present = complete
[ -f demo-data/.foundry-ext-demo.json ] || .venv/bin/foundry-ext demo-data demo-data
.venv/bin/ruff check .
# the layers of pyproject.toml [tool.importlinter]: no upward import, no circle, no torch at the CLI's start-up
.venv/bin/lint-imports

status=0
.venv/bin/python -m pytest "${tier[@]}" "${workers[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests: that is a failure" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    # failures that come from the machine (a full disk, no memory, too many processes) show here
    echo "test.sh: pytest exit $status; machine: $(df -h . | awk 'NR==2 {print $4 " free on " $6}'), $(df -h /tmp | awk 'NR==2 {print $4 " free on " $6}'), memory $(free -m | awk '/^Mem/ {print $7}') MB available, $(ls /proc | grep -c '^[0-9]') processes, $(ls /dev/shm | wc -l) /dev/shm entries, open files $(ulimit -Sn) soft / $(ulimit -Hn) hard, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
fi
exit "$status"
