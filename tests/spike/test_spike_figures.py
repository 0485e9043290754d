"""docs/benchmarks.md section 12 and the spike guard's defaults: the recorded JSON files' figures, re-reported."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from foundry_ext.catalog.callbacks import SpikeGuardConfig
from tests.support.launcher import REPO

DATA = REPO / "bench" / "data"


def _json(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.fixture(scope="module")
def bench(request: pytest.FixtureRequest):
    sys.path.insert(0, str(REPO / "bench"))
    request.addfinalizer(lambda: (sys.path.remove(str(REPO / "bench")), sys.modules.pop("bench_spike_guard", None)))
    return importlib.import_module("bench_spike_guard")


def test_section_12_tables_are_the_recorded_runs(bench) -> None:
    main = _json("spike-guard-600ba.json")
    studies = [_json("spike-guard-study-600ba.json"), _json("spike-guard-study-1500ba.json")]
    doc = (REPO / "docs" / "benchmarks.md").read_text()
    section = doc[doc.index("## 12. Spike guard") : doc.index("## Not done")]
    for line in bench.report(main, studies, _json("spike-guard-overhead.json")):
        assert line in section, line


def test_the_defaults_are_the_measured_ones() -> None:
    """At the defaults: no false skip on the clean runs; every bad batch skipped, every burst's first caught."""
    config = SpikeGuardConfig()
    assert (config.threshold, config.window, config.min_history, config.grad_norm) == (6.0, 128, 64, False)
    main = _json("spike-guard-600ba.json")
    assert main["seeds"] == 8 and main["false_skips"] == 0 and main["guarded_skips_exact"]
    assert all(r["guarded"]["skipped"] == main["bad_batches"] and r["clean"]["skipped"] == [] for r in main["rows"])
    # guarded: within the seed noise of the clean runs; unguarded: further off than the noise, in every seed
    noise = main["seed_noise"]
    assert 0 < main["eval_guarded"] - main["eval_clean"] < 0.5 * noise < main["eval_bad"] - main["eval_clean"]
    assert all(r["guarded"]["eval"] - r["clean"]["eval"] < 0.5 * main["seed_noise"] for r in main["rows"])
    assert all(r["bad"]["eval"] - r["clean"]["eval"] > main["seed_noise"] for r in main["rows"])
    for name in ("spike-guard-study-600ba.json", "spike-guard-study-1500ba.json"):
        row = _json(name)["rules"]["loss only, threshold 6"]
        assert row["false_skips"] == [] and row["caught_first_of_burst"] == row["bursts"], name
        assert _json(name)["rules"]["loss and grad norm, threshold 6"]["false_skips"], name  # why not the default
