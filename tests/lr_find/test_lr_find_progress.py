"""lr-find's progress: one tqdm bar on a terminal (ETA, current LR, smoothed loss), one closing line, rank 0 only."""

from __future__ import annotations

import io
import sys

import pytest

import foundry_ext.lr_find.recorder as recorder_module
from foundry_ext.lr_find.recorder import LRFindRecorder
from tests.support.trainer_utils import make_trainer

BATCHES = 8


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(monkeypatch: pytest.MonkeyPatch, out: io.StringIO, rank: int = 0) -> LRFindRecorder:
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(recorder_module.dist, "get_global_rank", lambda: rank)
    recorder = LRFindRecorder(batches=BATCHES)
    trainer, _ = make_trainer([], max_duration=f"{BATCHES}ba", callbacks=[recorder])
    trainer.fit()
    trainer.close()
    return recorder


def test_a_terminal_gets_one_bar_with_eta_lr_and_smoothed_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Terminal()
    recorder = _run(monkeypatch, out)
    text = out.getvalue()
    frames = text.split("\r")
    last_bar = [f for f in frames if f.startswith("lr-find:") and "|" in f][-1]
    assert f"{BATCHES}/{BATCHES}" in last_bar and "100%" in last_bar
    assert "<00:00" in last_bar  # the ETA (time left) of tqdm's format
    assert f"lr={recorder.lrs[-1]:.3e}" in last_bar and f"smoothed={recorder.smoothed[-1]:.4f}" in last_bar
    assert text.count("\n") == 2  # the bar's own line, then the closing line
    closing = text.rstrip("\n").splitlines()[-1]
    assert closing.startswith(f"lr-find: batch {BATCHES}/{BATCHES}  lr {recorder.lrs[-1]:.3e}")


def test_not_a_terminal_prints_only_the_closing_line(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    recorder = _run(monkeypatch, out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith(f"lr-find: batch {BATCHES}/{BATCHES}  lr {recorder.lrs[-1]:.3e}  loss ")
    assert "\r" not in out.getvalue() and "%|" not in out.getvalue()


def test_other_ranks_print_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Terminal()
    _run(monkeypatch, out, rank=1)
    assert out.getvalue() == ""
