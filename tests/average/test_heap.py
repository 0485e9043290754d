"""``release_freed_memory``: what the sharded average calls after each chunk, so that its memory stays a few chunks."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest
import torch

from foundry_ext.average.heap import release_freed_memory

CHUNK = 4 * 2**20


def _anon_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:")) * 1024


def _growth_after_saves(tmp_path: Path, release: bool) -> int:
    """Resident anonymous memory gained by writing 8 chunks of 4 MiB with ``torch.save``, as the average does."""
    enabled = gc.isenabled()
    gc.disable()  # the average's loop may run long between automatic collections; here none runs at all
    try:
        gc.collect()
        before = _anon_bytes()
        with open(tmp_path / "records", "wb") as out:
            for i in range(8):
                torch.save(torch.full((CHUNK // 4,), float(i)), out)
                if release:
                    release_freed_memory()
        return _anon_bytes() - before
    finally:
        if enabled:
            gc.enable()
        gc.collect()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_saved_chunks_are_freed_before_the_next(tmp_path: Path) -> None:
    freed = _growth_after_saves(tmp_path, release=True)
    kept = _growth_after_saves(tmp_path, release=False)
    print(f"RssAnon gained over 8 saves of 4 MiB: {kept / 2**20:.1f} MiB kept, {freed / 2**20:.1f} MiB released")
    assert kept > 6 * CHUNK  # torch.save's cycles hold each chunk: the cause, still there in this torch
    assert freed < 3 * CHUNK
