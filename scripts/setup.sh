#!/usr/bin/env bash
# Create the project-local .venv and install this package with its test extras into it.
# Idempotent: once installed, it only reinstalls when pyproject.toml changes (a few seconds then).
# uv, not pip: pip's resolver backtracks for many minutes on this stack; uv's cache (~/.cache/uv) makes reinstalls fast.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $(python3 --version)"
    python3 -m venv .venv
fi
if [ ! -x .venv/bin/uv ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check uv
fi

stamp=.venv/.foundry-ext-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing foundry-ext[test] into .venv (the first time downloads torch 2.7.0 with CUDA: ~3 GB)"
    .venv/bin/uv pip install --python .venv/bin/python -e ".[test]"
    touch "$stamp"
fi

# Compile site-packages to bytecode once. uv installs without .pyc files, and where PYTHONDONTWRITEBYTECODE is set
# Python never writes them, so every start would recompile composer, transformers and torch (~20 s more per process).
bytecode=.venv/.foundry-ext-bytecode
if [ ! -f "$bytecode" ] || [ "$stamp" -nt "$bytecode" ]; then
    echo "setup: compiling .venv to bytecode (once, a few minutes on 2 cores)"
    .venv/bin/python -m compileall -q -j 0 .venv/lib/python*/site-packages > /dev/null || true
    touch "$bytecode"
fi
