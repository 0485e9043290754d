#!/usr/bin/env bash
# Create the project-local .venv and install this package with its test extras into it.
# Idempotent: once installed, it only reinstalls when pyproject.toml or uv.lock changes (a few seconds then).
# uv, not pip: pip's resolver backtracks for many minutes on this stack; uv's cache (~/.cache/uv) makes reinstalls fast.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# uv.lock pins every package (240, torch 2.7.0 included): two machines a month apart install the same versions.
# `uv sync --locked` fails if pyproject.toml changed without `bash scripts/uv.sh lock`.
stamp=.venv/.foundry-ext-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ uv.lock -nt "$stamp" ]; then
    echo "setup: installing foundry-ext[test] from uv.lock into .venv (the first time downloads torch 2.7.0 with CUDA: ~3 GB)"
    UV_PROJECT_ENVIRONMENT=.venv bash scripts/uv.sh sync --locked --extra test --python python3
    touch "$stamp"
fi

# yaml-language-server (the YAML editors' schema engine), for tests/catalog/test_schema_editor.py: the JSON Schema of
# `foundry-ext schema` is checked in the engine editors use, not only with Python's jsonschema. npm's registry only.
yls=.venv/yaml-language-server
if [ ! -x "$yls/node_modules/.bin/yaml-language-server" ] && command -v npm > /dev/null; then
    echo "setup: installing yaml-language-server 1.25.0 into $yls (npm, ~15 s)"
    npm install --silent --no-fund --no-audit --prefix "$yls" yaml-language-server@1.25.0 > /dev/null
fi

# Bytecode. uv installs without .pyc files, and where PYTHONDONTWRITEBYTECODE is set Python never writes them, so every
# start would recompile composer, transformers and torch (~20 s more per process). One import of what `composer
# train.py` imports writes the .pyc files of those ~6,500 modules once (~18 s of CPU); compiling all ~40,000 files of
# site-packages, most never imported, took 90 s of CPU (~50 s on 2 cores). The few hundred modules a run imports later
# (the model's transformers modules) are written by the first process that imports them where scripts/test.sh and
# scripts/demo.sh run (they let Python write bytecode); elsewhere, with the variable set, they cost ~0.5 s a process.
bytecode=.venv/.foundry-ext-bytecode
if [ ! -f "$bytecode" ] || [ "$stamp" -nt "$bytecode" ]; then
    echo "setup: writing the bytecode of the modules a training run imports (once, ~20 s)"
    env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "import composer.cli.launcher, llmfoundry.command_utils"
    touch "$bytecode"
fi
