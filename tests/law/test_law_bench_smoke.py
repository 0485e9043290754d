"""``bench/bench_law.py --quick`` keeps working (the full run is the benchmark, docs/benchmarks.md section 9)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_bench_law_quick(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        bench = importlib.import_module("bench_law")
    finally:
        sys.path.remove(str(BENCH))
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "fit, multi-power law, 3 curves of 24,000 steps" in out and "predict a 100,000-batch WSD" in out
