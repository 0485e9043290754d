"""The one way tests run ``foundry-ext`` in this process: :func:`run_cli`."""

from __future__ import annotations

import contextlib
import io
import os

from foundry_ext.cli import main

__all__ = ["run_cli"]


def run_cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``foundry-ext ARGV`` in this process: its exit status, stdout and stderr.

    argparse's usage errors (``SystemExit``) give their status, as the command would; ``env`` is set for the call
    only, then each variable is restored (or removed).
    """
    out, err = io.StringIO(), io.StringIO()
    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(argv))
            except SystemExit as e:  # argparse's usage errors
                status = e.code if isinstance(e.code, int) else 1
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return status, out.getvalue(), err.getvalue()
