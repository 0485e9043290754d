"""``foundry-ext lr-find``: the ramp, the smoothing and the rules by hand; real range tests on the demo data.

The end-to-end runs train the demo MPT through llm-foundry's ``train()`` for a few dozen batches each (CPU).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from composer.core import Callback, Event, State, Timestamp
from composer.devices import DeviceCPU
from composer.loggers import Logger

from foundry_ext.cli import main
from foundry_ext.config.train_yaml import load_train_config
from foundry_ext.lr_find import (
    ExponentialRampConfig,
    ExponentialRampScheduler,
    LRFindRecorder,
    TrainLoaderTooShortError,
    lr_find,
    ramp_for_batches,
    ramp_lr,
    smooth,
)
from foundry_ext.lr_find.rules import minimum, should_stop, smooth_lr, steepest, steepest_linear, valley
from foundry_ext.lr_find.runner import FSDP_ONE_PROCESS, derive_config, fsdp_unused
from tests.support.launcher import COMPOSER, REPO
from tests.support.trainer_utils import loader as tiny_loader
from tests.support.trainer_utils import make_trainer

TINY = REPO / "yamls" / "tiny-wsd.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------------------------
# The ramp: hand-checkable multipliers and Composer's timing


def state_at(batch: int) -> State:
    state = State(
        model=torch.nn.Linear(1, 1), rank_zero_seed=0, run_name="t", device=DeviceCPU(), max_duration="1000ba"
    )
    state.timestamp = Timestamp(batch=batch)
    return state


@pytest.mark.parametrize(
    "scheduler,batches,expected",
    [
        # alpha(t) = alpha_i ** (1 - min(t, T) / T): one decade per batch here
        pytest.param(
            ExponentialRampScheduler(alpha_i=1e-4, t_max=4),
            [0, 1, 2, 3, 4, 5, 100],
            [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1.0, 1.0],
            id="4-decades",
        ),
        pytest.param(ExponentialRampScheduler(alpha_i=0.25, t_max="2ba"), [0, 1, 2], [0.25, 0.5, 1.0], id="ba-string"),
        pytest.param(ExponentialRampScheduler(alpha_i=1.0, t_max=3), [0, 2, 9], [1.0, 1.0, 1.0], id="flat"),
    ],
)
def test_ramp_multipliers(scheduler: ExponentialRampScheduler, batches: list[int], expected: list[float]) -> None:
    assert [scheduler(state_at(b)) for b in batches] == pytest.approx(expected, rel=1e-12)


def test_ramp_for_batches_puts_lr_min_first_and_lr_max_last() -> None:
    # batch b trains with alpha(max(b - 1, 0)): batches 0 and 1 at lr_min, batch N - 1 at lr_max
    ramp = ramp_for_batches(1e-6, 1e-2, 10)
    assert (ramp.alpha_i, ramp.t_max) == (pytest.approx(1e-4), 8)
    lrs = [ramp_lr(1e-2, ramp.alpha_i, ramp.t_max, b) for b in range(10)]
    assert lrs[0] == lrs[1] == pytest.approx(1e-6, rel=1e-12)
    assert lrs[5] == pytest.approx(1e-4, rel=1e-12)  # half-way in log: timestamp 4 of 8
    assert lrs[9] == pytest.approx(1e-2, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"alpha_i": 0.0, "t_max": 5}, r"scheduler\.alpha_i: 0\.0 is out of range; expected a number in \(0, 1\]"),
        ({"alpha_i": 1.5, "t_max": 5}, r"scheduler\.alpha_i: 1\.5 is out of range; expected a number in \(0, 1\]"),
        ({"alpha_i": math.nan, "t_max": 5}, r"scheduler\.alpha_i: nan is not a finite number"),
        ({"alpha_i": 0.1, "t_max": 0}, r"scheduler\.t_max: 0 is out of range; expected an integer >= 1"),
        ({"alpha_i": 0.1, "t_max": "2ep"}, r"scheduler\.t_max: .*number of batches such as 98 or '98ba'"),
    ],
)
def test_ramp_rejects_bad_keys(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ExponentialRampScheduler(**kwargs)


def test_ramp_config_forbids_unknown_keys() -> None:
    with pytest.raises(ValueError, match="alpha_f"):
        ExponentialRampConfig.model_validate({"alpha_i": 0.1, "t_max": 5, "alpha_f": 1.0})


# ---------------------------------------------------------------------------------------------------------------
# Smoothing, the stop test and the rules, on hand-made curves


def test_smooth_is_the_bias_corrected_ema() -> None:
    # beta 0.5: avg = 0.5, 1.25, 2.125; divided by 1 - 0.5 ** (i + 1) = 0.5, 0.75, 0.875
    assert smooth([1.0, 2.0, 3.0], beta=0.5) == pytest.approx([1.0, 1.25 / 0.75, 2.125 / 0.875], rel=1e-15)
    assert smooth([4.0, 4.0, 4.0], beta=0.98) == pytest.approx([4.0, 4.0, 4.0], rel=1e-12)  # no bias toward 0
    assert math.isnan(smooth([1.0, math.nan, 1.0], beta=0.9)[2])


def test_smooth_lr_averages_ln_lr_with_the_same_weights() -> None:
    # beta 0.5, point 1: weights 0.5 / 0.75 = 2/3 on lr_1, 0.25 / 0.75 = 1/3 on lr_0: a weighted geometric mean
    assert smooth_lr([1.0, 100.0], beta=0.5) == pytest.approx([1.0, 100.0 ** (2 / 3)], rel=1e-12)


def test_smooth_lr_on_a_ramp_is_the_lr_of_the_weights_centre() -> None:
    # On lr_i = q ** i the lag-matched LR of point i is q ** (i - lag_i), lag_i = sum_k k w_k, the EMA weights'
    # centre: a smoothed loss is read where the batches it averages trained, on average.
    beta, q = 0.9, 1.2
    lrs = [q**i for i in range(60)]
    for i, value in enumerate(smooth_lr(lrs, beta)):
        weights = [(1 - beta) * beta**k / (1 - beta ** (i + 1)) for k in range(i + 1)]
        lag = sum(k * w for k, w in enumerate(weights))
        assert value == pytest.approx(q ** (i - lag), rel=1e-9)


@pytest.mark.parametrize(
    "smoothed,stop",
    [
        ([3.0, 2.0, 8.0], False),  # 8 is not above 4 x 2
        ([3.0, 2.0, 8.01], True),
        ([3.0, math.inf], True),
        ([3.0, math.nan], True),
    ],
)
def test_should_stop(smoothed: list[float], stop: bool) -> None:
    assert should_stop(smoothed) is stop


def test_valley_is_fastais() -> None:
    # Longest decreasing run 9, 8, 7, 6, 5, 4, 3 ends at index 8, length 7; fastai takes start = 8 - 7 = 1 and
    # the point 1 + int(7 / 3) + int(7 / 6) = 4. batches 9 -> no point skipped at the start; the last 5 are dropped.
    smoothed = [9.0, 8.0, 10.0, 7.0, 6.0, 5.0, 11.0, 4.0, 3.0, 12.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    lrs = [float(10**i) for i in range(len(smoothed))]
    result = valley(lrs, smoothed, batches=9)
    assert (result.batch, result.lr) == (4, 1e4)
    low = minimum(lrs, smoothed, batches=9)  # the 0.0s are in the dropped tail: the minimum is 3 at index 8
    assert (low.batch, low.lr) == (8, 1e7)


def test_steepest_rules() -> None:
    # A slow decline, then a drop of 1 per point at indices 13-15; lrs half a decade apart (1e-9 ... 1). The window
    # skips 10 points at the start and 1 at the end: indices 10-17. Against the index (= ln lr), central differences
    # are -0.1, -0.1, -0.1, -0.55, -1.0, -0.55, -0.05, 0: the steepest is index 14.
    smoothed = [5.0] * 10 + [5.0, 4.9, 4.8, 4.7, 3.7, 2.7, 2.6, 2.6, 2.6]
    lrs = [1e-9 * 10 ** (i / 2) for i in range(len(smoothed))]
    assert steepest(lrs, smoothed).batch == 14
    # Against the LR itself, the slow decline at the smallest LRs wins: -0.1 per ~1e-4 of LR at index 10 against
    # -1 per ~1e-2 at index 14; Lightning >= 2.5.4 would suggest 1e-4 here
    assert steepest_linear(lrs, smoothed).batch == 10


def test_rules_say_when_their_point_is_the_last_of_their_window() -> None:
    # A loss that falls to the end of the ramp: the minimum the rules read is the window's last point (index 14 of
    # 20: batches 20 skips 2 at the start, the last 5 are dropped), so the real minimum may lie above the ramp's end
    falling = [10.0 - i for i in range(20)]
    lrs = [1e-6 * 10 ** (i / 4) for i in range(20)]
    low = minimum(lrs, falling, batches=20)
    assert (low.batch, low.at_window_end) == (14, True)
    assert valley(lrs, falling, batches=20).at_window_end
    assert steepest(lrs, [10.0 - i * i / 10 for i in range(20)]).at_window_end  # steeper and steeper to the end
    # The same curve turning up after index 9: the minimum lies inside the window
    turning = falling[:10] + [1.0 + i for i in range(10)]
    low = minimum(lrs, turning, batches=20)
    assert (low.batch, low.at_window_end) == (9, False)
    assert not valley(lrs, turning, batches=20).at_window_end
    assert not steepest(lrs, [5.0] * 12 + [4.0, 2.0, 1.0] + [1.0] * 5).at_window_end


def test_suggested_range_is_half_a_decade_either_side_of_what_the_user_pastes() -> None:
    from foundry_ext.lr_find.rules import RANGE_DECADES, paste_value, pasted, suggested_range

    assert paste_value(0.010007) == "1.0e-02" and pasted(0.010007) == 0.01  # the value of the pasted text
    assert pasted(0.0084879) == float(paste_value(0.0084879)) == 0.0085
    assert RANGE_DECADES == 0.5
    low, high = suggested_range(0.010007)
    assert (low, high) == (0.01 * 10**-0.5, 0.01 * 10**0.5)
    assert low < 10**-2.5 * (1 + 1e-12) and high > 10**-1.5 * (1 - 1e-12)  # the half-decade grid's neighbours


def test_rules_without_enough_points_say_none() -> None:
    assert steepest([1e-3] * 11, [1.0] * 11).lr is None  # skip 10 at the start and 1 at the end: nothing left
    assert valley([1e-3, 1e-2] * 3, [1.0] * 6, batches=10).lr is None  # 6 points, 1 skipped + 5 dropped


# ---------------------------------------------------------------------------------------------------------------
# The recorder in a tiny real Trainer: the train-loader checks


class _NoLenDataset(torch.utils.data.IterableDataset):
    """32 samples of the regression task, without ``__len__``: Composer cannot know the epoch length."""

    def __iter__(self) -> Any:
        loader = tiny_loader(32, batch_size=1)
        for x, y in loader:
            yield x[0], y[0]


def tiny_trainer(train_dataloader: Any, batches: int) -> tuple[Any, LRFindRecorder]:
    recorder = LRFindRecorder(batches=batches, progress=False)
    trainer, _ = make_trainer(
        [ramp_for_batches(1e-3, 0.1, batches)],
        max_duration=f"{batches}ba",
        train_dataloader=train_dataloader,
        callbacks=[recorder],
        eval_interval=1,
    )
    return trainer, recorder


def test_recorder_refuses_a_loader_shorter_than_the_test_before_training() -> None:
    trainer, recorder = tiny_trainer(tiny_loader(32, batch_size=4), batches=12)  # 8 batches per epoch
    with pytest.raises(TrainLoaderTooShortError, match="yields only 8 batches per epoch here"):
        trainer.fit()
    assert recorder.losses == [] and trainer.state.timestamp.batch.value == 0


def test_recorder_catches_a_loader_without_length_that_ends_early() -> None:
    loader = torch.utils.data.DataLoader(_NoLenDataset(), batch_size=4)
    trainer, recorder = tiny_trainer(loader, batches=12)
    with pytest.raises(TrainLoaderTooShortError, match="the train loader ended after 8 batches"):
        trainer.fit()
    assert len(recorder.losses) == 8


def test_recorder_on_a_long_enough_loader_records_every_batch() -> None:
    trainer, recorder = tiny_trainer(tiny_loader(64, batch_size=4), batches=12)  # 16 batches per epoch
    trainer.fit()
    ramp = ramp_for_batches(1e-3, 0.1, 12)
    assert recorder.lrs == [ramp_lr(0.1, ramp.alpha_i, ramp.t_max, b) for b in range(12)]
    assert len(recorder.losses) == 12 and recorder.smoothed == smooth(recorder.losses, recorder.beta)


# ---------------------------------------------------------------------------------------------------------------
# Real range tests on the demo data


def tree(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``roots`` with its size and mtime (ns); bytecode caches excluded (the import system's)."""
    out: dict[str, tuple[int, int]] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in [*files, *dirs]:
                path = Path(folder) / name
                st = path.lstat()
                out[str(path)] = (st.st_size if path.is_file() else 0, st.st_mtime_ns if path.is_file() else 0)
    return out


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def cli_run(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real ``foundry-ext lr-find`` in this process, in a fresh cwd, with the YAML's run folders, a logger,
    ``load_path`` and ``autoresume`` all set: none of them may be touched."""
    root = tmp_path_factory.mktemp("lrfind")
    cwd, out = root / "cwd", root / "out"
    cwd.mkdir()
    out.mkdir()
    yaml_path = root / "cfg" / "tiny.yaml"
    yaml_path.parent.mkdir()
    yaml_path.write_text(TINY.read_text())
    before = tree(root, demo_data)
    argv = [
        "lr-find",
        str(yaml_path),
        f"variables.data_local={demo_data}",
        f"save_folder={root}/runs/ckpt",
        f"loggers.mlflow.tracking_uri=file://{root}/mlruns",
        f"load_path={root}/runs/none.pt",
        "autoresume=true",
        "save_overwrite=false",
        # FSDP, as large runs set it: one process has nothing to shard over, so the range test trains unsharded
        "fsdp_config.state_dict_type=sharded",
        "fsdp_config.mixed_precision=FULL",
        "--min=1e-5",
        "--max=0.5",
        "--batches=30",
        f"--out={out}/lr.png",
        f"--csv={out}/lr.csv",
        f"--json={out}/lr.json",
    ]
    old, threads = os.getcwd(), torch.get_num_threads()
    os.chdir(cwd)
    try:
        stdout, stderr = io.StringIO(), io.StringIO()
        with (
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            code = retry_shm_race(main, argv)
    finally:
        os.chdir(old)
    after = tree(root, demo_data)
    assert torch.get_num_threads() == threads  # the command trains on 1 thread and puts the count back
    return {
        "code": code,
        "stdout": stdout.getvalue(),
        "stderr": stderr.getvalue(),
        "out": out,
        "before": before,
        "after": after,
        "warnings": [str(w.message) for w in caught],
    }


def test_cli_writes_png_csv_json_and_suggests_an_lr_in_range(cli_run: dict[str, Any]) -> None:
    assert cli_run["code"] == 0, cli_run["stderr"][-2000:]
    out: Path = cli_run["out"]
    assert (out / "lr.png").read_bytes()[:8] == PNG_MAGIC and (out / "lr.png").stat().st_size > 20_000
    summary = json.loads((out / "lr.json").read_text())
    for key in ("suggested_lr", "rule", "min_loss_lr", "stopped_early", "batches_run", "suggestions"):
        assert key in summary
    assert set(summary["suggestions"]) == {"valley", "minimum", "steepest", "steepest_linear"}
    suggested = summary["suggested_lr"]
    assert math.isfinite(suggested) and 1e-5 <= suggested <= 0.5
    assert summary["suggestions"][summary["rule"]]["lr"] == suggested
    with open(out / "lr.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["batch", "lr", "loss", "smoothed", "read_lr"]
    assert len(rows) - 1 == summary["batches_run"]
    assert [int(r[0]) for r in rows[1:]] == list(range(summary["batches_run"]))
    lrs = [float(r[1]) for r in rows[1:]]
    assert lrs[0] == pytest.approx(1e-5, rel=1e-9) and lrs == sorted(lrs)
    assert [float(r[3]) for r in rows[1:]] == smooth([float(r[2]) for r in rows[1:]], beta=summary["beta"])
    assert summary["reading"] == "lag-matched"
    assert [float(r[4]) for r in rows[1:]] == smooth_lr(lrs, beta=summary["beta"])
    # the rules read the points at read_lr: the default rule's suggestion is a tenth of one of them
    read = {float(r[4]) for r in rows[1:]}
    assert summary["rule"] == "minimum" and any(math.isclose(suggested * 10, r, rel_tol=1e-12) for r in read)
    # the last console line is the override to paste, then the YAML's LR for comparison
    line = last_line(cli_run["stdout"])
    assert line.startswith("optimizer.lr=") and "the YAML has optimizer.lr=0.003" in line
    pasted = float(line.split()[0].split("=")[1])
    assert pasted == pytest.approx(suggested, rel=0.05)
    assert (
        "ignored from the YAML" in cli_run["stdout"]
        and "save_folder, load_path, autoresume, loggers" in (cli_run["stdout"])
    )
    assert "lr-find: batch 30/30" in cli_run["stdout"]  # the progress line


def test_cli_says_in_one_line_that_one_process_does_not_use_fsdp_config(cli_run: dict[str, Any]) -> None:
    assert cli_run["code"] == 0
    assert cli_run["stdout"].splitlines().count(FSDP_ONE_PROCESS) == 1
    # the derived config has no fsdp_config: llm-foundry's own warning ("Reverting to DDP") is not raised
    assert not [w for w in cli_run["warnings"] if "FSDP" in w], cli_run["warnings"]


@pytest.mark.parametrize(("world_size", "kept"), [(1, False), (2, True)])
def test_derive_config_drops_fsdp_config_in_one_process_only(demo_data: Path, world_size: int, kept: bool) -> None:
    cfg = tiny_config(demo_data, "fsdp_config.state_dict_type=sharded")
    derived, _ = derive_config(cfg, 1e-5, 1.0, 10, world_size=world_size)
    assert ("fsdp_config" in derived) is kept and fsdp_unused(cfg, world_size) is not kept
    assert not fsdp_unused(tiny_config(demo_data), 1)


def test_cli_writes_nothing_but_the_named_outputs(cli_run: dict[str, Any]) -> None:
    assert cli_run["code"] == 0
    before, after = cli_run["before"], cli_run["after"]
    out = str(cli_run["out"])
    added = sorted(set(after) - set(before))
    assert added == [f"{out}/lr.csv", f"{out}/lr.json", f"{out}/lr.png"]
    changed = [p for p in before if p in after and before[p] != after[p] and not p.startswith(out)]
    assert changed == []
    assert sorted(set(before) - set(after)) == []


class LRWatch(Callback):
    """Registered as ``test_lr_watch``: the LR of the optimizer's group 0 right after backward, before ``step()``."""

    last: LRWatch | None = None

    def __init__(self) -> None:
        self.lrs: dict[int, float] = {}
        LRWatch.last = self

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        del logger
        if event == Event.AFTER_BACKWARD:
            self.lrs[state.timestamp.batch.value] = state.optimizers[0].param_groups[0]["lr"]


@pytest.fixture
def lr_watch() -> Any:
    from llmfoundry import registry

    if "test_lr_watch" not in registry.callbacks.get_all():
        registry.callbacks.register("test_lr_watch", func=LRWatch)
    return {"test_lr_watch": {}}


def tiny_config(demo_data: Path, *overrides: str) -> dict[str, Any]:
    return load_train_config(str(TINY), [f"variables.data_local={demo_data}", *overrides])


def retry_shm_race(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, started again (at most twice) when StreamingDataset lost its /dev/shm name race.

    mosaicml-streaming names its shared memory by scanning /dev/shm for a free prefix: another job on the machine
    starting a dataset at the same moment can take it first (FileExistsError). Starting again picks a new prefix.
    """
    for attempt in range(3):
        try:
            return fn(*args, **kwargs)
        except FileExistsError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def test_recorded_lr_is_the_lr_the_optimizer_used(demo_data: Path, lr_watch: Any) -> None:
    from llmfoundry import registry

    names = {"schedulers": set(registry.schedulers.get_all()), "callbacks": set(registry.callbacks.get_all())}
    # A narrow range that cannot diverge: the run goes to the end.
    result = retry_shm_race(
        lr_find, tiny_config(demo_data), lr_min=1e-6, lr_max=1e-4, batches=20, progress=False, callbacks=lr_watch
    )
    # the ramp and the recorder were registered for the run only: this process's registry is as it was
    assert {"schedulers": set(registry.schedulers.get_all()), "callbacks": set(registry.callbacks.get_all())} == names
    watched = LRWatch.last
    assert watched is not None
    assert result.batches_run == 20 and not result.stopped_early
    assert result.lrs == [watched.lrs[b] for b in range(20)]
    ramp = ramp_for_batches(1e-6, 1e-4, 20)
    assert result.lrs == [ramp_lr(1e-4, ramp.alpha_i, ramp.t_max, b) for b in range(20)]  # the documented formula
    assert result.lrs[0] == result.lrs[1] == pytest.approx(1e-6, rel=1e-12)
    assert result.lrs[-1] == pytest.approx(1e-4, rel=1e-12)
    assert result.to_json()["stopped_early"] is False
    assert result.smoothed == smooth(result.losses, result.beta)


def _open_shm_files() -> set[str]:
    """The /dev/shm files this process has open."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("/dev/shm/"):
                out.add(target)
    return out


def test_huge_max_diverges_and_stops_early(demo_data: Path) -> None:
    before, shm_before = set(threading.enumerate()), _open_shm_files()
    result = retry_shm_race(lr_find, tiny_config(demo_data), lr_min=1e-4, lr_max=1e4, batches=60, progress=False)
    assert result.stopped_early and result.batches_run < 60
    # stopped mid-epoch: the StreamingDatasets' download and ready threads were ended, not left polling, and their
    # /dev/shm blocks closed (streaming would hold them open until the process exits: 12 files per range test)
    assert set(threading.enumerate()) <= before, [t.name for t in set(threading.enumerate()) - before]
    assert _open_shm_files() <= shm_before, sorted(_open_shm_files() - shm_before)
    last = result.smoothed[-1]
    assert not math.isfinite(last) or last > 4 * min(result.smoothed)
    assert all(math.isfinite(s) and s <= 4 * min(result.smoothed[: i + 1]) for i, s in enumerate(result.smoothed[:-1]))
    assert result.suggested_lr is not None and 1e-4 <= result.suggested_lr <= result.lrs[-1]


def test_suggestion_moves_down_for_a_model_that_is_harder_to_train(demo_data: Path) -> None:
    # 4x deeper (8 layers instead of 2): a deeper transformer needs a lower LR. Measured here: 7.2e-3 -> 2.2e-3.
    kwargs: dict[str, Any] = {"lr_min": 1e-5, "lr_max": 1.0, "batches": 50, "progress": False}
    easy = retry_shm_race(lr_find, tiny_config(demo_data), **kwargs)
    hard = retry_shm_race(lr_find, tiny_config(demo_data, "model.n_layers=8"), **kwargs)
    assert easy.suggested_lr is not None and hard.suggested_lr is not None
    assert hard.suggested_lr < easy.suggested_lr / 2


# ---------------------------------------------------------------------------------------------------------------
# Bad input: one line, exit 2


@pytest.mark.parametrize(
    "options,message",
    [
        (["--min", "0"], "--min 0: must be a finite LR > 0"),
        (["--min=-1e-3"], "--min -1e-3: must be a finite LR > 0"),
        (["--max", "inf"], "--max inf: must be a finite LR > 0"),
        (["--min", "nan"], "--min nan: must be a finite LR > 0"),
        (["--min", "abc"], "--min abc: not a number"),
        (["--min", "1e-2", "--max", "1e-3"], "--min 1e-2 --max 1e-3: --min must be below --max"),
        (["--min", "1e-3", "--max", "1e-3"], "--min must be below --max"),
        (["--batches", "9"], "--batches 9: too few for a range test; at least 10"),
        (["--batches", "ten"], "--batches ten: not an integer"),
        (["--beta", "1"], "--beta 1: must be a number in [0, 1)"),
        (["--rule", "fastest"], "--rule fastest: unknown; one of minimum, valley, steepest, steepest_linear"),
        (["--reading", "lagged"], "--reading lagged: unknown; one of lag-matched, batch-lr"),
        (["--out", "/nonexistent-dir/x.png"], "--out /nonexistent-dir/x.png: the folder /nonexistent-dir does not"),
    ],
)
def test_bad_options_get_one_line(options: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lr-find", str(TINY), *options]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("foundry-ext lr-find: error: ") and message in err


def test_declaring_the_options_imports_nothing_heavy() -> None:
    # `foundry-ext --help` declares every subcommand's options: lr-find's must not pull in torch, Composer or
    # llm-foundry (they load in run()). Measured in a fresh interpreter, after the package itself is imported.
    code = (
        "import sys, argparse, foundry_ext.cli\n"
        "before = set(sys.modules)\n"
        "import foundry_ext.cli.lr_find as m\n"
        "m.add_arguments(argparse.ArgumentParser())\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['foundry_ext.cli.lr_find']"


def test_help_states_the_defaults_the_code_uses() -> None:
    # add_arguments cannot import the rules module (it imports Composer): its help text repeats the defaults
    import argparse

    from foundry_ext.cli import lr_find as cli
    from foundry_ext.lr_find import DEFAULT_BETA, DEFAULT_RULE
    from foundry_ext.lr_find.rules import DEFAULT_LR_MAX, DEFAULT_LR_MIN

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    helps = {a.dest: a.help for a in parser._actions}
    assert f"default: {DEFAULT_BETA})" in helps["beta"]
    assert f"{DEFAULT_RULE} (default" in helps["rule"]
    assert "lag-matched (default" in helps["reading"]
    assert f"(default: {DEFAULT_LR_MIN:g})" in helps["min"] and f"(default: {DEFAULT_LR_MAX:g})" in helps["max"]


def test_missing_file_gets_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lr-find", str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err
    assert err == f"foundry-ext lr-find: error: {tmp_path / 'nope.yaml'}: no such file\n"


def test_too_short_train_loader_gets_one_line_before_training(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 4096 training sequences / 16 per batch = 256 batches per epoch; the check runs at FIT_START, before batch 0
    argv = ["lr-find", str(TINY), f"variables.data_local={demo_data}", "--batches", "300", "--out", f"{tmp_path}/x.png"]
    assert retry_shm_race(main, argv) == 2
    captured = capsys.readouterr()
    assert last_line(captured.err) == (
        "foundry-ext lr-find: error: --batches 300: the train loader yields only 256 batches per epoch here (world "
        "size 1); lower --batches to at most 256 or use more train data"
    )
    assert "lr-find: batch" not in captured.out and "Traceback" not in captured.err
    assert not (tmp_path / "x.png").exists()


def test_no_suggestion_says_so_and_exits_1(demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # From lr 1e3 the loss explodes after the first step: the run stops at batch 1, and the minimum rule's window
    # (skip 1 at the start, 5 at the end) is empty
    argv = ["lr-find", str(TINY), f"variables.data_local={demo_data}", "--min", "1e3", "--max", "1e6",
            "--out", f"{tmp_path}/x.png", "--json", f"{tmp_path}/x.json"]  # fmt: skip
    assert retry_shm_race(main, argv) == 1
    out = capsys.readouterr().out
    assert last_line(out).startswith("no suggestion: the minimum rule had too few points (2 batches run)")
    summary = json.loads((tmp_path / "x.json").read_text())
    assert summary["suggested_lr"] is None and summary["stopped_early"] is True and summary["batches_run"] == 2


def test_a_ramp_that_ends_before_the_minimum_is_said(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1e-7 -> 1e-4 in 30 batches: the demo model's loss still falls at the end, so `minimum` reads the last point of
    # its window (batch 24: the last 5 are dropped) and the ramp's end, not a minimum, sets the suggestion
    argv = ["lr-find", str(TINY), f"variables.data_local={demo_data}", "--batches", "30", "--max", "1e-4",
            "--out", f"{tmp_path}/x.png", "--json", f"{tmp_path}/x.json"]  # fmt: skip
    assert retry_shm_race(main, argv) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "x.json").read_text())
    assert summary["suggestions"]["minimum"]["batch"] == 24 and summary["suggestions"]["minimum"]["at_window_end"]
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: the minimum rule's point is the last of its window (batch 24, lr "
        f"{summary['suggested_lr'] * 10:.3e}): the loss had not turned up yet, so --max 0.0001 set this suggestion "
        "(docs/cli.md: 'When the ramp ends first')"
    ]
    low, high = summary["suggested_range"]
    pasted = float(f"{summary['suggested_lr']:.1e}")
    assert low == pytest.approx(pasted / 10**0.5, rel=1e-12) and high == pytest.approx(pasted * 10**0.5, rel=1e-12)
    assert last_line(out).startswith(f"optimizer.lr={pasted:.1e}  # minimum rule, range {low:.3g} to {high:.3g}; ")
    # (with the default ramp the demo model's minimum lies inside the window, at batch 93: docs/cli.md's example, run
    # and compared line by line by tests/docs, shows no note)


# ---------------------------------------------------------------------------------------------------------------
# Two ranks through Composer's launcher


@pytest.mark.slow
def test_two_ranks_through_the_launcher_agree(demo_data: Path, tmp_path: Path) -> None:
    foundry_ext = Path(sys.executable).with_name("foundry-ext")
    cmd = [
        str(COMPOSER), "-n", "2",
        "--stdout", f"{tmp_path}/rank{{rank}}.out", "--stderr", f"{tmp_path}/rank{{rank}}.err",
        str(foundry_ext), "lr-find", str(TINY), f"variables.data_local={demo_data}", "--batches", "30",
        "--min", "1e-5", "--max", "1.0", "--json", f"{tmp_path}/lr.json", "--out", f"{tmp_path}/lr.png",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for _ in range(3):  # started again if a rank lost StreamingDataset's /dev/shm name race (see retry_shm_race)
        for f in tmp_path.glob("rank*"):
            f.unlink()
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        logs = "".join(f.read_text() for f in tmp_path.glob("rank*"))
        if proc.returncode == 0 or "FileExistsError" not in proc.stdout + proc.stderr + logs:
            break
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the launcher adds its own closing line ("Waiting up to 30 seconds ..."): take each rank's answer line
    rank0 = [line for line in proc.stdout.splitlines() if line.startswith("optimizer.lr=")]
    rank1 = [line for line in (tmp_path / "rank1.out").read_text().splitlines() if line.startswith("optimizer.lr=")]
    assert len(rank0) == len(rank1) == 1 and rank0 == rank1
    rank0 = rank0[0]
    summary = json.loads((tmp_path / "lr.json").read_text())
    assert summary["world_size"] == 2 and summary["batches_run"] == 30
    assert rank0.split()[0] == f"optimizer.lr={summary['suggested_lr']:.1e}"
    assert "lr-find: batch" in proc.stdout and "lr-find: batch" not in (tmp_path / "rank1.out").read_text()
