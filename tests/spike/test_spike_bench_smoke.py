"""bench/bench_spike_guard.py at a minimal size (160 batches, 1 seed, one burst of 3 bad batches at batch 152).

At the defaults (the loss test alone) a burst is caught once the window has left the first fast fall of the loss
behind: at batch 84 a random-token batch's loss z-score is 3.6-4.0 here, at 150 7.3-8.2 (docs/benchmarks.md, 12).
"""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.support.launcher import REPO

BENCH = REPO / "bench"


@pytest.mark.slow
def test_bench_spike_guard_smoke(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    try:
        bench = importlib.import_module("bench_spike_guard")
        summary = bench.main(["--batches", "160", "--seeds", "1", "--at", "0.95"])
    finally:
        sys.modules.pop("bench_spike_guard", None)
    assert summary["bad_batches"] == [152, 153, 154]
    row = summary["rows"][0]
    assert row["guarded"]["skipped"] == [152, 153, 154]
    assert row["clean"]["skipped"] == []
    assert summary["eval_clean"] < summary["eval_guarded"] < summary["eval_bad"]
    assert "mean eval loss: clean" in capsys.readouterr().out
