"""Test callbacks for ``composer train.py`` runs, registered in llm-foundry's registry through ``code_paths:``.

* ``spike_test_overflow: {at: [...], ranks: [...]}``: the training loss of those batches (0-indexed) times inf, as an
  fp overflow makes it, on the ranks listed (default: every rank) (listed before ``spike_guard`` in the YAML, so the
  guard reads the spoilt loss);
* ``spike_test_probe: {}``: at each batch end, one line ``spike_test: batch B guard X composer Y``: the loss of the
  guard's last accepted step (its window's newest) beside Composer's ``loss/train/total`` (reduced over the ranks);
* ``$SPIKE_TEST_SLOW_RANK0=S``: rank 0 sleeps ``S`` seconds when this file is imported (before llm-foundry reads the
  config), so that rank 1 meets a refusal first;
* ``spike_test_kill: {}``: SIGKILL of this rank's own process at the end of batch ``$SPIKE_TEST_KILL_AT`` (unset:
  never).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

from composer.core import Callback, State
from composer.loggers import Logger
from llmfoundry.registry import callbacks

from foundry_ext.trainer.spike_guard.callback import SpikeGuard


class Overflow(Callback):
    def __init__(self, at: Iterable[int] = (), ranks: Iterable[int] | None = None) -> None:
        self.at = {int(b) for b in at}
        self.here = ranks is None or int(os.environ.get("RANK", "0")) in {int(r) for r in ranks}

    def after_loss(self, state: State, logger: Logger) -> None:
        del logger
        if self.here and state.timestamp.batch.value in self.at:
            state.loss = state.loss * float("inf")  # type: ignore[operator]


class Probe(Callback):
    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        guard = next(cb for cb in state.callbacks if isinstance(cb, SpikeGuard))
        if guard.skipped_batch == state.timestamp.batch.value - 1 or not guard.rule.losses:
            return
        composer = state.total_loss_dict["loss/train/total"]
        print(f"spike_test: batch {state.timestamp.batch.value} guard {guard.rule.losses[-1]!r} composer {composer!r}")


class Kill(Callback):
    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        if os.environ.get("SPIKE_TEST_KILL_AT") == str(state.timestamp.batch.value):
            os.kill(os.getpid(), signal.SIGKILL)


if os.environ.get("RANK", "0") == "0":
    time.sleep(float(os.environ.get("SPIKE_TEST_SLOW_RANK0", "0")))

callbacks.register("spike_test_overflow", func=Overflow)
callbacks.register("spike_test_probe", func=Probe)
callbacks.register("spike_test_kill", func=Kill)
