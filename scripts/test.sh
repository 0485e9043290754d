#!/usr/bin/env bash
# Set up .venv, write the demo data the tests train on, lint, then run the whole test suite (slow tests included).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k wsd -x`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
# tests reuse ./demo-data (tests/conftest.py: demo_data); its marker is written last, so present = complete
[ -f demo-data/.foundry-ext-demo.json ] || .venv/bin/foundry-ext demo-data demo-data
.venv/bin/ruff check .

status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$status"
