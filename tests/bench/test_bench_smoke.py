"""The benchmarks in bench/ run end to end at a minimal size (``--quick``), so that they cannot rot.

They run in this process (the imports are already paid); the figures they print are meaningless at this size.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as tdist

from tests.support.launcher import REPO

BENCH = REPO / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    """Import a bench/ script by name, with bench/ on sys.path as when it runs as a script."""
    monkeypatch.syspath_prepend(str(BENCH))
    threads = torch.get_num_threads()
    yield importlib.import_module
    torch.set_num_threads(threads)  # the training benchmarks pin torch to one thread
    for name in [n for n in sys.modules if n.startswith(("bench_", "count_collectives"))]:
        del sys.modules[name]


def test_scheduler_calls_quick(bench, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench("bench_scheduler_calls").main(["--quick"]) == 0
    out = capsys.readouterr().out
    for label in ("warmup_stable_decay (sqrt)", "cosine_with_restarts", "torch_lr_scheduler (OneCycleLR)"):
        assert f"| {label} |" in out
    assert "| reduce_lr_on_plateau (base: WSD) |" in out
    assert "| ChainedScheduler+cosine |" in out


def test_plot_quick(bench, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench("bench_plot").main(["--batches", "5000", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for label in ("warmup_stable_decay", "torch_lr_scheduler CosineAnnealingLR", "reduce_lr_on_plateau + --metrics"):
        assert f"| {label} |" in out


def test_training_quick(bench, demo_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench("bench_training").main(["--quick", "--data", str(demo_data)]) == 0
    out = capsys.readouterr().out
    for name in ("cosine_with_warmup", "warmup_stable_decay", "reduce_lr_on_plateau"):
        assert f"| {name} | 2 |" in out  # 2 evaluations in 6 batches, every 3


def test_quality_quick(bench, demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "quality.png"
    assert bench("bench_quality").main(["--quick", "--data", str(demo_data), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "| cosine_with_warmup |" in out and "| plateau (WSD base) |" in out
    assert png.stat().st_size > 10_000


def test_quality_long_quick(bench, demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "quality-long.png"
    args = ["--scenario", "long", "--quick", "--data", str(demo_data), "--plot", str(png)]
    assert bench("bench_quality").main(args) == 0
    out = capsys.readouterr().out
    assert "| constant_with_warmup | no |" in out and "| plateau recommended (constant base) | no |" in out
    assert "Constant LR over the last third (from batch 6), per seed: slope" in out  # 8 batches: the last third
    assert png.stat().st_size > 10_000


def test_flatness_fits_the_last_third(bench) -> None:
    """The slope and eval noise the long scenario reports: a least-squares line through the last third only."""
    q = bench("bench_quality")
    # steep before batch 600, then a line of slope -1e-5 per batch with +-0.002 around it (+ - - +: no tilt)
    evals = [(b, 5.0 - b / 100) for b in (100, 200, 300, 400)]
    noise = (0.002, -0.002, -0.002, 0.002)
    evals += [(b, 1.0 - 1e-5 * b + e) for b, e in zip((600, 700, 800, 900), noise, strict=True)]
    fit = q.flatness({"evals": evals}, 900)
    assert fit["first"] == 600
    assert fit["slope_per_1000"] == pytest.approx(-0.01)
    assert fit["drop"] == pytest.approx(0.003)
    assert fit["noise"] == pytest.approx(0.002 * (4 / 3) ** 0.5)


def test_tiny_plateau_yaml_ships_the_long_scenarios_recommended_run(bench) -> None:
    """docs/plateau.md recommends the settings measured best in the long scenario: the example YAML is that run."""
    from omegaconf import OmegaConf as om

    q = bench("bench_quality")
    long = q.SCENARIOS["long"]
    cfg = om.to_container(om.load(REPO / "yamls" / "tiny-plateau.yaml"))
    block = cfg["scheduler"]
    assert block.pop("monitor") == "metrics/eval/LanguageCrossEntropy" and block.pop("mode") == "min"
    assert block == q.LONG_CONFIGS["plateau recommended (constant base)"]
    for key, value in long.overrides.items():
        node = cfg
        for part in key.split(".")[:-1]:
            node = node[part]
        assert node[key.split(".")[-1]] == value, key
    assert cfg["max_duration"] == f"{long.batches}ba" and cfg["eval_interval"] == f"{long.eval_interval}ba"
    assert cfg["global_train_batch_size"] == long.batch_size and cfg["eval_subset_num_batches"] == -1


def test_count_collectives_attributes_calls_to_events(bench, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The counting wrapper itself, in a one-process gloo group: outer calls count once, under the current event."""
    cc = bench("count_collectives")
    created = not tdist.is_initialized()
    if created:
        store = tdist.FileStore(str(tmp_path / "store"), 1)
        tdist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        monkeypatch.setattr(cc, "COUNTS", cc.collections.Counter())
        cc.patch(monkeypatch.setattr)
        monkeypatch.setattr(cc, "_event", "eval_after_all")
        tdist.broadcast(torch.zeros(1), src=0)
        monkeypatch.setattr(cc, "_event", "batch_end")
        tdist.all_reduce(torch.zeros(1))
        out: list = [None]
        tdist.all_gather_object(out, 1)  # calls all_gather inside: counted once, as all_gather_object
        assert dict(cc.COUNTS) == {
            ("eval_after_all", "broadcast"): 1,
            ("batch_end", "all_reduce"): 1,
            ("batch_end", "all_gather_object"): 1,
        }
    finally:
        if created:
            # torch 2.7's ~ProcessGroupGloo joins its workers holding the GIL while a worker may still be freeing the
            # last collective's Python tensor (it needs the GIL): destroying right after a collective hung 1 in ~300
            # tries here, never in 1000 after a barrier (tests/support/multirank.py: write_sharded_checkpoint says more)
            tdist.barrier()
            tdist.destroy_process_group()


def test_lr_pipeline_quick(bench, capsys: pytest.CaptureFixture[str]) -> None:
    module = bench("bench_lr_pipeline")
    assert module.main(["--batches", "3000", "--repeat", "1"]) == 0  # exits if the two ways differ by one bit
    out = capsys.readouterr().out
    for label in module.SCHEDULES:
        assert f"| {label} |" in out


@pytest.mark.slow  # five tiny in-process training runs
def test_batch_ramp_quick(bench, demo_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """16,384 tokens each: 4 steps of 32 and 16 of 8, against 8+8+16+32+32+32 (the ramp takes 6 steps for the same
    tokens) and the late ramp's 8 x 8 + 2 x 16 + 32."""
    assert bench("bench_batch_ramp").main(["--quick", "--data", str(demo_data)]) == 0
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in out.splitlines() if line.startswith("| ")}
    assert rows["fixed 32"][1] == "4" and rows["fixed 8"][1] == "16"
    assert rows["ramp 8-16-32, none"][1] == rows["ramp 8-16-32, sqrt"][1] == "6"
    assert rows["late ramp 8-16-32, none"][1] == "11"
    cpu = [float(row[7].removesuffix(" s |")) for name, row in rows.items() if name != "run"]  # fit CPU time
    assert len(cpu) == 5 and min(cpu) > 0
