"""The guard in a real Composer Trainer (tiny regression model): bitwise skips, no false skips, stop, resume."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from composer.core import Callback, Event, State
from composer.loggers import Logger
from composer.optim import DecoupledAdamW, DecoupledSGDW

from foundry_ext.trainer.spike_guard.callback import STOP_STATUS, SpikeGuard
from foundry_ext.trainer.spike_guard.inject import InjectBadBatches
from tests.support.trainer_utils import make_trainer

GUARD = {"threshold": 6.0, "window": 16, "min_history": 6}


class Snapshots(Callback):
    """Weights and optimizer state at the start and at the end of each batch (deep copies)."""

    def __init__(self) -> None:
        self.start: dict[int, Any] = {}
        self.end: dict[int, Any] = {}

    def _snap(self, state: State) -> Any:
        params = [p.detach().clone() for p in state.model.parameters()]
        return params, copy.deepcopy(state.optimizers[0].state_dict()["state"])

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        del logger
        if event == Event.BATCH_START:
            self.start[state.timestamp.batch.value] = self._snap(state)
        elif event == Event.BATCH_END:
            self.end[state.timestamp.batch.value - 1] = self._snap(state)


def _bitwise(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_bitwise(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_bitwise(x, y) for x, y in zip(a, b, strict=True))
    return a == b


OPTIMIZERS = {
    "sgd-momentum": lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
    "adamw": lambda m: torch.optim.AdamW(m.parameters(), lr=0.01),
    "adam": lambda m: torch.optim.Adam(m.parameters(), lr=0.01),
    "decoupled_adamw": lambda m: DecoupledAdamW(m.parameters(), lr=0.01),
    "decoupled_sgdw": lambda m: DecoupledSGDW(m.parameters(), lr=0.05, momentum=0.9),
}


@pytest.mark.parametrize("shift", [100.0, float("inf")], ids=["spike", "inf"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_skipped_step_leaves_weights_and_optimizer_state_bitwise(name: str, shift: float) -> None:
    guard, snaps = SpikeGuard(**GUARD), Snapshots()
    trainer, recorder = make_trainer(
        [],
        max_duration="16ba",
        optimizer=OPTIMIZERS[name],
        callbacks=[guard, InjectBadBatches([12], shift=shift), snaps],
    )
    trainer.fit()
    skipped = [b for b, s, _ in guard.decisions if s]
    assert skipped == [12]
    assert _bitwise(snaps.start[12], snaps.end[12])  # weights and optimizer state (moments, step counts)
    assert not _bitwise(snaps.start[11], snaps.end[11])  # an accepted step does change them
    assert not _bitwise(snaps.start[13], snaps.end[13])
    assert trainer.state.timestamp.batch.value == 16  # the batch counter advanced over the skip
    assert len(recorder.lrs) == 16


def test_clean_run_skips_nothing_and_bad_batches_are_skipped() -> None:
    clean = SpikeGuard(**GUARD)
    make_trainer([], max_duration="40ba", callbacks=[clean])[0].fit()
    assert [b for b, s, _ in clean.decisions if s] == []
    assert len(clean.decisions) == 40
    bad = SpikeGuard(**GUARD)
    make_trainer([], max_duration="40ba", callbacks=[bad, InjectBadBatches([10, 25, 33])])[0].fit()
    assert [b for b, s, _ in bad.decisions if s] == [10, 25, 33]
    assert all(z > 6 for b, s, z in bad.decisions if s)


def test_gradient_accumulation_decides_on_the_whole_batch() -> None:
    whole, split = SpikeGuard(**GUARD), SpikeGuard(**GUARD)
    make_trainer([], max_duration="20ba", callbacks=[whole, InjectBadBatches([15])])[0].fit()
    make_trainer([], max_duration="20ba", callbacks=[split, InjectBadBatches([15])], device_train_microbatch_size=1)[
        0
    ].fit()
    assert [b for b, s, _ in split.decisions if s] == [15]
    assert whole.rule.losses == pytest.approx(split.rule.losses, rel=1e-5)


def test_logged_metrics() -> None:
    from composer.loggers import InMemoryLogger

    memory = InMemoryLogger()
    guard = SpikeGuard(**GUARD)
    make_trainer([], max_duration="14ba", callbacks=[guard, InjectBadBatches([8, 12])], loggers=[memory])[0].fit()
    skipped = [int(v) for _, v in memory.data["spike_guard/skipped"]]
    skips = [int(v) for _, v in memory.data["spike_guard/skips"]]
    assert [i for i, v in enumerate(skipped) if v] == [8, 12]
    assert skips == [0] * 8 + [1] * 4 + [2] * 2
    assert len(memory.data["spike_guard/z"]) == 14


def test_burst_stops_with_one_line_and_rollback_names_the_checkpoint_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guard = SpikeGuard(**GUARD, max_skips=3, rollback={"skip_batches": 5})
    trainer, _ = make_trainer(
        [],
        max_duration="40ba",
        callbacks=[guard, InjectBadBatches(range(22, 30))],
        save_folder=str(tmp_path / "ckpt"),
        save_interval="10ba",
        run_name="burst",
    )
    with pytest.raises(SystemExit) as exit_info:
        trainer.fit()
    assert exit_info.value.code == STOP_STATUS
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("spike_guard: stopped")]
    assert len(lines) == 1
    assert "stopped at batch 25: 3 consecutive skips (max_skips 3)" in lines[0]
    # batches 20-24 read since the checkpoint, then skip_batches 5 more, of the loader's 4 samples each
    assert "(batch 20), skipping 10 data batches (40 samples), into" in lines[0], lines[0]
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("ep*.pt")) == ["ep0-ba10-rank0.pt", "ep1-ba20-rank0.pt"]
    written = tmp_path / "spike_guard-rollback-ba20.yaml"
    import yaml

    cont = yaml.safe_load(written.read_text())
    assert cont["load_path"] == str((tmp_path / "ckpt" / "ep1-ba20-rank0.pt").resolve())
    assert cont["save_folder"] == str(tmp_path / "ckpt") + "-rollback-ba20"
    assert cont["run_name"] == "burst-rollback-ba20"
    assert cont["autoresume"] is True
    # batches 20..24 read since the checkpoint, and 5 more
    assert cont["callbacks"]["spike_guard"]["skip_data"] == {"at_batch": 20, "batches": 10}


def test_ceiling_stops_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    guard = SpikeGuard(**GUARD, ceiling=50.0, rollback={})
    trainer, _ = make_trainer(
        [], max_duration="40ba", callbacks=[guard, InjectBadBatches([3])], save_folder=str(tmp_path / "c"),
        save_interval="10ba", run_name="ceil",
    )  # fmt: skip
    with pytest.raises(SystemExit):
        trainer.fit()
    err = capsys.readouterr().err
    assert "spike_guard: stopped at batch 4: loss" in err and "is above ceiling 50" in err
    assert "no checkpoint in" in err and "before batch 4 (the first skip): nothing to roll back to" in err


def test_resume_decides_as_the_uninterrupted_run(tmp_path: Path) -> None:
    bad = [14, 27, 33]
    full = SpikeGuard(**GUARD)
    a, _ = make_trainer([], max_duration="40ba", callbacks=[full, InjectBadBatches(bad)])
    a.fit()
    first = SpikeGuard(**GUARD)
    b, _ = make_trainer(
        [], max_duration="40ba", callbacks=[first, InjectBadBatches(bad)], save_folder=str(tmp_path / "r"),
        save_interval="20ba", run_name="r",
    )  # fmt: skip
    b.fit(duration="20ba")
    b.close()
    second = SpikeGuard(**GUARD)
    c, _ = make_trainer(
        [],
        max_duration="40ba",
        callbacks=[second, InjectBadBatches(bad)],
        load_path=str(tmp_path / "r" / "ep1-ba20-rank0.pt"),
    )
    assert list(second.rule.losses) == list(first.rule.losses)
    c.fit()
    assert second.decisions == full.decisions[20:]
    assert list(second.rule.losses) == list(full.rule.losses)
    for p, q in zip(a.state.model.parameters(), c.state.model.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({"threshold": 0}, "callbacks.spike_guard.threshold: 0 is out of range; expected a number > 0"),
        ({"threshold": -1.5}, "callbacks.spike_guard.threshold: -1.5 is out of range; expected a number > 0"),
        ({"window": 8, "min_history": 9}, "callbacks.spike_guard.window: 8 is smaller than min_history 9"),
        ({"window": 10}, "callbacks.spike_guard.window: 10 is smaller than min_history 64"),
        ({"max_skips": 0}, "callbacks.spike_guard.max_skips: 0 is out of range; expected an integer >= 1"),
        ({"treshold": 3}, "callbacks.spike_guard.treshold: unknown key (did you mean 'threshold'?)"),
        ({"ceiling": "high"}, "callbacks.spike_guard.ceiling:"),
        ({"rollback": {"skip": 3}}, "callbacks.spike_guard.rollback.skip: unknown key"),
        ({"rollback": {"skip_batches": -1}}, "callbacks.spike_guard.rollback.skip_batches: -1 is out of range"),
        # issue 46: validate accepted it and the run crashed (OverflowError) building its deque
        (
            {"window": 2**63, "min_history": 2},
            "callbacks.spike_guard.window: 9223372036854775808 is out of range; expected an integer in [2, 100000]",
        ),
        (
            {"window": 100_001},
            "callbacks.spike_guard.window: 100001 is out of range; expected an integer in [2, 100000]",
        ),
        ({"min_history": 2**64}, "callbacks.spike_guard.min_history: 18446744073709551616 is out of range"),
    ],
)
def test_bad_keys_one_line_exit_2(kwargs: dict[str, Any], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        SpikeGuard(**kwargs)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"foundry-ext: error: {line}")


def test_rollback_without_save_folder_and_guard_twice_exit_2_before_the_first_batch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    snaps = Snapshots()
    trainer, _ = make_trainer([], max_duration="4ba", callbacks=[SpikeGuard(rollback={}), snaps])
    with pytest.raises(SystemExit) as exit_info:
        trainer.fit()
    assert exit_info.value.code == 2 and snaps.start == {}
    assert capsys.readouterr().err.strip() == (
        "foundry-ext: error: callbacks.spike_guard.rollback: the run saves no checkpoints (no save_folder); allowed: "
        "a rollback with save_folder set, or no rollback"
    )
    trainer.close()
    trainer, _ = make_trainer([], max_duration="4ba", callbacks=[SpikeGuard(), SpikeGuard(), snaps])
    with pytest.raises(SystemExit) as exit_info:
        trainer.fit()
    assert exit_info.value.code == 2 and snaps.start == {}
    assert capsys.readouterr().err.strip() == (
        "foundry-ext: error: callbacks.spike_guard: listed 2 times; allowed: once (each would skip on its own)"
    )


@pytest.mark.slow
def test_two_ranks_decide_alike_and_skip_bitwise(tmp_path: Path) -> None:
    """``composer -n 2``: the bad batch is on rank 1 only; both ranks skip it, bitwise, and end with equal weights."""
    import json
    import os
    import subprocess

    from tests.support.launcher import COMPOSER, REPO
    from tests.support.multirank import free_port

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [str(COMPOSER), "-n", "2", "--master_port", str(free_port()), str(REPO / "tests/spike/two_ranks.py")]
    done = subprocess.run([*cmd, str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert ranks[0]["decisions"] == ranks[1]["decisions"]
    assert [b for b, s, _ in ranks[0]["decisions"] if s] == [12]
    assert all(r["bitwise_at_skip"] and r["changed_before"] for r in ranks)
    assert ranks[0]["weights"] == ranks[1]["weights"]
    assert done.stdout.count("spike_guard: skipped batch 13") == 1  # one line, rank 0


def test_a_rollback_names_only_a_checkpoint_that_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46: with save_num_checkpoints_to_keep 1 the rollback named ep0-ba5, which the ba10 save had deleted.

    Composer's ``all_saved_checkpoints_to_timestamp`` keeps listing the checkpoints its rotation deleted.
    """
    guard = SpikeGuard(**GUARD, max_skips=3, rollback={})
    trainer, _ = make_trainer(
        [], max_duration="40ba", callbacks=[guard, InjectBadBatches(range(9, 17))], save_folder=str(tmp_path / "c"),
        save_interval="5ba", run_name="rot", save_num_checkpoints_to_keep=1,
    )  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        trainer.fit()
    assert exit_info.value.code == STOP_STATUS
    assert sorted(p.name for p in (tmp_path / "c").glob("ep*.pt")) == ["ep0-ba10-rank0.pt"]  # ba5 rotated away
    err = capsys.readouterr().err
    assert "stopped at batch 12: 3 consecutive skips" in err, err  # skips 10, 11, 12 (1-indexed); ba10 saved
    assert "no checkpoint in" in err and "before batch 10 (the first skip): nothing to roll back to" in err, err
    assert not list(tmp_path.glob("*.yaml"))


@pytest.mark.parametrize("given", ["{f}", "{f}/", "{f}/./", "{f}/../c", "{p}/{{run_name}}"])
def test_a_rollback_into_the_runs_own_folder_is_one_line_before_the_first_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """Issue 46: the continuation would autoresume from the checkpoint this run wrote after the burst."""
    folder = tmp_path / "c"
    value = given.format(f=folder, p=tmp_path)
    snaps = Snapshots()
    guard = SpikeGuard(rollback={"save_folder": value})
    trainer, _ = make_trainer(
        [], max_duration="4ba", callbacks=[guard, snaps], save_folder=str(tmp_path / "{run_name}"), run_name="c"
    )
    with pytest.raises(SystemExit) as exit_info:
        trainer.fit()
    assert exit_info.value.code == 2 and snaps.start == {}
    assert capsys.readouterr().err.strip() == (
        f"foundry-ext: error: callbacks.spike_guard.rollback.save_folder: {value} is the run's own save_folder "
        f"({folder}): the continuation would autoresume from this run's checkpoints, written after the burst; "
        "allowed: another folder, or null (the run's own + '-rollback-ba<B>')"
    )
    trainer.close()


def test_a_line_break_in_the_run_name_writes_no_key_into_the_rollback_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rollback YAML's header repeats the continuation's command (run_name, folders): escaped, never YAML keys."""
    import yaml

    guard = SpikeGuard(**GUARD, max_skips=3, rollback={})
    trainer, _ = make_trainer(
        [], max_duration="40ba", callbacks=[guard, InjectBadBatches(range(12, 20))], save_folder=str(tmp_path / "c"),
        save_interval="10ba", run_name="r\ncode_paths: [payload.py]\u2028load_weights_only: true #",
    )  # fmt: skip
    with pytest.raises(SystemExit):
        trainer.fit()
    capsys.readouterr()
    text = (tmp_path / "spike_guard-rollback-ba10.yaml").read_text()
    assert set(yaml.safe_load(text)) == {"load_path", "save_folder", "run_name", "autoresume", "callbacks"}, text
    header = text[: text.index("\nload_path:") + 1]
    assert all(line.startswith("#") for line in header.splitlines()) and "\u2028" not in header, header
