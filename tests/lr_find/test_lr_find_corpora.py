"""The range test's default suggestion against a real constant-LR sweep on a benchmark corpus, and what it rests on.

- the corpora of ``bench/corpora.py``: deterministic, and what their docstrings say they are;
- ``bench/lr_sweep.py``'s shared loop: the same initial model and the same train losses, bit for bit, as a real
  Composer ``Trainer`` built by llm-foundry's ``train()`` on the same batches;
- a quick version of ``bench/bench_lr_find.py`` (one corpus, one size, one batch size): the tool's default
  suggestion, trained for the sweep's 200 batches, scores within the sweep's best two half-decade LRs.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import io
import math
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tests.support.launcher import REPO

BENCH = REPO / "bench"


@pytest.fixture(scope="module")
def bench() -> Any:
    """The benchmark's modules, imported from bench/ (not a package)."""
    sys.path.insert(0, str(BENCH))
    try:
        yield SimpleNamespace(
            corpora=importlib.import_module("corpora"),
            lr_sweep=importlib.import_module("lr_sweep"),
            bench_lr_find=importlib.import_module("bench_lr_find"),
        )
    finally:
        sys.path.remove(str(BENCH))
        for name in ("corpora", "lr_sweep", "bench_lr_find", "_common"):
            sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def corpora_root(bench: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpora")


# ---------------------------------------------------------------------------------------------------------------
# The corpora


def _take(stream: Any, n: int) -> list[str]:
    return [next(stream) for _ in range(n)]


def test_corpus_documents_are_what_they_say(bench: Any) -> None:
    corpora = bench.corpora
    assert _take(corpora.copy_documents(17, "train"), 50) == _take(corpora.copy_documents(17, "train"), 50)
    assert _take(corpora.copy_documents(17, "train"), 5) != _take(corpora.copy_documents(17, "val"), 5)
    for doc in _take(corpora.copy_documents(17, "train"), 200):  # "s1 ... sn | s1 ... sn."
        first, second = doc.removesuffix(".").split(" | ")
        assert first == second and 4 <= len(first.split()) <= 16
    for doc in _take(corpora.arithmetic_documents(17, "train"), 200):  # every equation is true
        for equation in doc.removesuffix(".").split(". "):
            a, op, b, eq, c = equation.split()
            assert eq == "=" and {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op] == int(c)
    # zipf: the rank-frequency line of the words has the slope of Zipf's law, -1.1 (measured: -1.10 over ranks
    # 1-100, from 3,000 documents), with most of the 2000 words seen
    import numpy as np

    words = Counter(w for doc in _take(corpora.zipf_documents(17, "train"), 3000) for w in doc.replace(".", "").split())
    counts = [count for _, count in words.most_common(100)]
    slope = np.polyfit(np.log(np.arange(1, 101)), np.log(counts), 1)[0]
    assert len(words) > 1500 and -1.2 < slope < -1.0


def test_written_corpus_is_byte_identical_for_a_seed_and_differs_across_corpora(
    bench: Any, corpora_root: Path, tmp_path: Path
) -> None:
    from foundry_ext.demo_data import read_marker, write_demo_data

    a = bench.corpora.write(corpora_root, "copy")
    b = write_demo_data(tmp_path / "copy", seed=17, corpus=bench.corpora.CORPORA["copy"]).path
    assert (a / "train" / "shard.00000.mds").read_bytes() == (b / "train" / "shard.00000.mds").read_bytes()
    marker = read_marker(a)
    assert marker is not None and marker["corpus"] == "copy" and marker["max_seq_len"] == 64
    assert marker["sequences"] == {"train": 8192, "val": 256}
    # a folder of another corpus is not taken for this one: rewritten, not reused
    other = write_demo_data(tmp_path / "copy", seed=17, corpus=bench.corpora.CORPORA["arithmetic"])
    assert other.created and read_marker(other.path)["corpus"] == "arithmetic"


# ---------------------------------------------------------------------------------------------------------------
# The sweep's loop against a real Trainer


class _Watch:
    """A Composer callback (made lazily: Composer is imported inside the tests) that keeps the initial weights,
    every batch's tensors and every batch's train loss; ``_Watch.last`` is the latest one built."""

    last: Any = None

    @staticmethod
    def register() -> str:
        from composer.core import Callback, Event, State
        from composer.loggers import Logger
        from llmfoundry import registry

        class Watch(Callback):
            def __init__(self) -> None:
                self.init: dict[str, torch.Tensor] = {}
                self.batches: list[dict[str, torch.Tensor]] = []
                self.losses: list[float] = []
                _Watch.last = self

            def run_event(self, event: Event, state: State, logger: Logger) -> None:
                del logger  # unused
                if event == Event.FIT_START:
                    self.init = copy.deepcopy(state.model.state_dict())
                elif event == Event.BATCH_START:
                    # tensors only: the loader's batch also carries a list the model does not read
                    self.batches.append({k: v.clone() for k, v in state.batch.items() if isinstance(v, torch.Tensor)})
                elif event == Event.BATCH_END:
                    self.losses.append(float(state.loss))

        if "test_corpora_watch" not in registry.callbacks.get_all():
            registry.callbacks.register("test_corpora_watch", func=Watch)
        return "test_corpora_watch"


def test_sweep_loop_reproduces_a_real_trainer_run(bench: Any, corpora_root: Path) -> None:
    from llmfoundry.command_utils import train
    from llmfoundry.utils.builders import build_optimizer
    from omegaconf import OmegaConf

    from foundry_ext.streaming_cleanup import streaming_cleanup

    bench.corpora.write(corpora_root, "copy")
    cfg = bench.bench_lr_find.config(corpora_root, bench.bench_lr_find.Cell("copy", "xs", 8), 1e-2, 17)
    cfg.update(max_duration="20ba", callbacks={_Watch.register(): {}}, progress_bar=False, log_to_console=False)
    with streaming_cleanup(), contextlib.redirect_stdout(io.StringIO()):
        train(OmegaConf.create(cfg)).close()
    watch = _Watch.last
    assert len(watch.batches) == 20
    assert set(watch.batches[0]) == {"input_ids", "labels"}  # the tensors the loop's batches have
    assert torch.equal(watch.batches[0]["labels"], watch.batches[0]["input_ids"])

    model = bench.lr_sweep.build_model(cfg, 17)
    initial = model.state_dict()
    assert all(torch.equal(initial[k], v) for k, v in watch.init.items())  # same initialisation as train()'s
    opt_cfg = dict(cfg["optimizer"])
    run = bench.lr_sweep.SweepRun(1e-2, model, build_optimizer(model, opt_cfg.pop("name"), opt_cfg))
    clipping = cfg["algorithms"]["gradient_clipping"]
    losses = [bench.lr_sweep.train_step(run, batch, clipping) for batch in watch.batches]
    assert losses == watch.losses  # bit for bit: same optimizer, clipping and loss as Composer's Trainer


def test_loop_range_test_is_the_tools_on_the_same_batches(bench: Any, corpora_root: Path) -> None:
    """The benchmark's range tests run in the loop; on the tool's batches they record the tool's curve exactly."""
    from foundry_ext.lr_find import lr_find

    bench.corpora.write(corpora_root, "copy")
    cfg = bench.bench_lr_find.config(corpora_root, bench.bench_lr_find.Cell("copy", "xs", 8), 1e-3, 18)
    found = lr_find(cfg, batches=40, progress=False, callbacks={_Watch.register(): {}})
    mine = bench.lr_sweep.range_test(cfg, 18, batches=40, data=_Watch.last.batches)
    assert mine["lrs"] == found.lrs and mine["losses"] == found.losses
    assert mine["stopped_early"] == found.stopped_early


# ---------------------------------------------------------------------------------------------------------------
# The quick benchmark: one corpus, one size, one batch size


QUICK_CELL = ("zipf", "xs", 8)
HALF_DECADES = [10 ** (k / 2) for k in range(-8, -1)]  # 1e-4 ... 0.1


def test_default_suggestion_trains_within_the_sweeps_best_two(bench: Any, corpora_root: Path) -> None:
    """The benchmark's cell zipf/xs/b8, range-test and sweep seed 17: what the tool suggests against a real sweep."""
    from foundry_ext.lr_find import lr_find

    bench.corpora.write(corpora_root, QUICK_CELL[0])
    cell = bench.bench_lr_find.Cell(*QUICK_CELL)
    cfg = bench.bench_lr_find.config(corpora_root, cell, 1e-3, 17)
    from foundry_ext.lr_find.rules import pasted

    found = lr_find(cfg, progress=False)  # the command's defaults: 100 batches, the default ramp and rule
    assert found.suggested_lr is not None
    suggested = pasted(found.suggested_lr)  # what the user trains: the `optimizer.lr=` line
    scores = bench.lr_sweep.sweep(cfg, [*HALF_DECADES, suggested], batches=200, seed=17)
    ranked = sorted(HALF_DECADES, key=lambda lr: scores[lr] if math.isfinite(scores[lr]) else math.inf)
    best, second = ranked[:2]
    assert scores[suggested] <= scores[second], (
        f"suggested {suggested:.3g} scores {scores[suggested]:.4f}; the sweep's best two: {best:g} "
        f"({scores[best]:.4f}), {second:g} ({scores[second]:.4f})"
    )
    low, high = found.suggested_range  # type: ignore[misc]
    assert low * (1 - 1e-9) <= best <= high * (1 + 1e-9), (low, best, high)


def test_benchmark_report_is_the_docs_from_the_recorded_runs(bench: Any, tmp_path: Path) -> None:
    """docs/benchmarks.md section 6's tables are the report of bench/data/lr-find-runs.json (the recorded cache)."""
    out = io.StringIO()
    argv = ["--no-run", "--cache", str(BENCH / "data" / "lr-find-runs.json"), "--data", str(tmp_path / "corpora")]
    with contextlib.redirect_stdout(out):
        assert bench.bench_lr_find.main(argv) == 0
    report = out.getvalue()
    assert "PARTIAL" not in report
    doc = (REPO / "docs" / "benchmarks.md").read_text()
    section = doc[doc.index("## 6. LR range test") : doc.index("## 7.")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ... |")]
    assert len(rows) > 80
    missing = [row for row in rows if row not in report]
    assert not missing, missing[:3]
    assert "The tool's range (d = 0.5, its default candidate): the best LR inside on 72 / 72 instances." in report


def test_benchmark_quick_runs_end_to_end(bench: Any, tmp_path: Path) -> None:
    """bench/bench_lr_find.py --quick (one cell, 30-batch runs): the plumbing, not the figures."""
    out = io.StringIO()
    argv = ["--quick", "--data", str(tmp_path / "corpora"), "--cache", str(tmp_path / "cache.json")]
    with contextlib.redirect_stdout(out):
        assert bench.bench_lr_find.main([*argv, "--jobs", "1"]) == 0
    text = out.getvalue()
    assert "### Leave-one-corpus-out" in text and "| copy/xs/b8 |" in text
    with contextlib.redirect_stdout(io.StringIO()) as again:  # everything is in the cache now: nothing trains
        assert bench.bench_lr_find.main([*argv, "--no-run"]) == 0
    assert "PARTIAL" not in again.getvalue() and "| copy/xs/b8 |" in again.getvalue()
