"""``bench/bench_law.py --quick`` keeps working (the full run is the benchmark, docs/benchmarks.md section 9)."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

from tests.support.launcher import REPO

BENCH = REPO / "bench"


def _bench(name: str) -> ModuleType:
    """A benchmark script of bench/ as a module (they import their neighbours by name)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def test_bench_law_quick(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench("bench_law")
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "fit, multi-power law, 3 curves of 24,000 steps" in out and "predict a 100,000-batch WSD" in out


def test_bench_law_tiny_reports_the_recorded_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/benchmarks.md section 9's tiny-model tables come from bench/data/law-tiny-1000ba.json, re-reported here."""
    bench = _bench("bench_law_tiny")
    assert bench.main(["--from-json", str(BENCH / "data" / "law-tiny-1000ba.json")]) == 0
    out = capsys.readouterr().out
    # the measured column is the recorded runs'; the law's figures are refitted here and match the doc's table
    assert "| wsd linear 20% | 1.2877 | 0.0017 | 1.2296 | 0.0581 | 0.0721 |" in out, out
    assert "equal: False" in out
    assert "law's best: grid: 0.1dur linear (measured 1.2913); grid's best: grid: 0.4dur linear (1.2862)" in out


def test_bench_law_reliability_reports_the_recorded_fits(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/law.md's verdict and band calibration come from bench/data/law-reliability.json, re-reported here."""
    bench = _bench("bench_law_reliability")
    assert bench.main(["--from-json", str(BENCH / "data" / "law-reliability.json")]) == 0
    out = capsys.readouterr().out
    assert "174 three-run fits (87 to choose, 87 to confirm)" in out
    assert "thresholds chosen: good_train 0.0015, good_held_out 0.008, poor_train 0.004, poor_held_out 0.01" in out
    assert "band chosen: k 1, m 0, f 0.002, c 0.005" in out
    assert "| confirm | 25M | 42 | 98% | 1 | 39/3/0 | 38/4/0 |" in out
    assert "| confirm | tiny | 45 | 100% | 0 | 0/0/45 | 0/0/45 |" in out
    # the band before (k 1, c 0.01, e = training error) and the chosen one, on the confirm half's held-out finals
    assert "| confirm | 25M | 42 | 77% of 184 | 0.66% | 81% | 96% of 68 | 2.50% | 37% |" in out
    assert "| confirm | 25M | 42 | 89% of 184 | 0.93% | 78% | 100% of 68 | 1.95% | 51% |" in out
    assert "| confirm | tiny | 45 | 91% of 372 | 6.98% | 0% | 77% of 123 | 7.00% | 0% |" in out
    assert "| 25M | chosen | 6 of 6 | 0.52% to 3.64% | -0.23% to +0.49% |" in out
    # what the package ships is what was chosen
    assert "band {'k': 1.0, 'm': 0.0, 'f': 0.002, 'c': 0.005}: on the confirm half verdict = truth 99%" in out


def test_bench_law_variants_reports_the_recorded_fits(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/law.md's 'Fitting from later points' table comes from bench/data/law-variants.json, re-reported here."""
    bench = _bench("bench_law_variants")
    assert bench.main(["--from-json", str(BENCH / "data" / "law-variants.json")]) == 0
    out = capsys.readouterr().out
    assert "| 25M | 0 | 24 | 144 | 0.152% | 0.250% |" in out, out
    assert "| 25M | 0.1 | 24 | 144 | 0.304% | 0.445% |" in out
    assert "| 25M | 0.25 | 24 | 144 | 0.251% | 0.264% |" in out
    assert "| tiny | 0 | 24 | 264 | 1.770% | 1.508% |" in out
    assert "| tiny | 0.25 | 24 | 264 | 2.133% | 0.611% |" in out
    # the law as shipped (skip 0) is the best on the paper's curves, held out: no variant ships
    s = bench.summary(__import__("json").loads((BENCH / "data" / "law-variants.json").read_text()))
    assert min(s["25M"], key=lambda k: s["25M"][k]["mean_rel"]) == "0"
    assert min(s["25M"], key=lambda k: s["25M"][k]["final_rel"]) == "0"
