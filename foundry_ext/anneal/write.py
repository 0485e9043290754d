"""Write a planned branch: its train YAML (a header escaped, then the config) and its kept source, or nothing."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from foundry_ext.anneal.keep import keep_source
from foundry_ext.anneal.options import AnnealError
from foundry_ext.text import one_line

if TYPE_CHECKING:
    from foundry_ext.anneal.branch import Branch

__all__ = ["write_branch"]


def write_branch(branch: Branch, out: str) -> str:
    """Write the branch's YAML to ``out`` and keep its source (:func:`keep_source`); return the line about the source.

    The YAML is written to a temporary file first (an ``--out`` that cannot be written leaves nothing, not even the
    kept source), renamed once the source is kept: a reader never sees half of it.
    """
    import yaml

    tmp = f"{out}.{os.getpid()}.tmp"
    # The comment names the stable run and --out, text from a checkpoint and an option: escaped, a line break in
    # either would start a line of YAML keys (code_paths: a file the branch imports when trained).
    header = (
        f"# A branch of {one_line(branch.source.run_name or 'the stable run')} from batch {branch.source.batch}, "
        f"written by foundry-ext anneal: {branch.shape} decay over {branch.length} batches to {branch.floor:g} x the "
        "peak LR.\n"
        f"# Run it (and relaunch it, after a kill, with the same command): composer train.py {one_line(out)}\n"
    )
    try:  # the YAML first: an --out that cannot be written leaves nothing behind, not even the kept source
        with open(tmp, "w") as f:
            f.write(header)
            yaml.safe_dump(branch.config, f, sort_keys=False, default_flow_style=False)
    except OSError as e:  # a name over the file system's limit, no permission, a full disk: one line, not a traceback
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise AnnealError(f"--out {out}: cannot write: {e.strerror}") from None
    try:
        kept = keep_source(branch)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # gone after the rename; left only when keeping the source failed
    return kept
