#!/usr/bin/env bash
# The main demo: set up .venv, write the offline demo data, train the tiny model with WSD through `composer train.py`.
# Extra arguments are llm-foundry overrides, e.g. `bash scripts/demo.sh max_duration=100ba`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
# the marker is written last, so its presence means complete data (skips ~20 s of imports when it is there)
[ -f demo-data/.foundry-ext-demo.json ] || .venv/bin/foundry-ext demo-data demo-data
.venv/bin/composer train.py yamls/tiny-wsd.yaml "$@"
