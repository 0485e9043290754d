"""bench/bench_spike_guard.py at a minimal size (120 batches, 1 seed, one burst of 3 bad batches at batch 84)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
def test_bench_spike_guard_smoke(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    try:
        summary = importlib.import_module("bench_spike_guard").main(["--batches", "120", "--seeds", "1", "--at", "0.7"])
    finally:
        sys.modules.pop("bench_spike_guard", None)
    assert summary["bad_batches"] == [84, 85, 86]
    row = summary["rows"][0]
    assert row["guarded"]["skipped"] == [84, 85, 86]  # by the gradient norm: the loss z is ~3.3 this early
    assert row["clean"]["skipped"] == []
    assert summary["eval_clean"] < summary["eval_guarded"] < summary["eval_bad"]
    assert "mean eval loss: clean" in capsys.readouterr().out
