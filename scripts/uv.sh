#!/usr/bin/env bash
# Run the project's pinned uv, e.g. `bash scripts/uv.sh lock` (update uv.lock after editing pyproject.toml's
# dependencies; `lock --upgrade` moves every pin to the newest allowed version).
# uv lives in ./.uv, outside .venv: `uv sync` makes .venv exactly what uv.lock says, which would remove a uv
# installed inside it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

UV_VERSION=0.13.9
if [ ! -x .uv/bin/uv ] || [ "$(.uv/bin/uv --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
    python3 -m venv .uv
    .uv/bin/python -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
exec .uv/bin/uv "$@"
