"""Test callbacks for FSDP2 runs of the guard (``tests/spike/test_spike_fsdp.py``), loaded through ``code_paths:``.

* ``spike_test_fsdp_probe: {out: DIR, watch: [B, ...]}``: each rank writes ``DIR/rank<r>.json`` at the end of the run,
  or at the end of the batch where the guard stops it (list this before the guard): the guard's decisions; per batch,
  the whole model's gradient norm as torch computes it for DTensors (``torch.nn.utils.get_total_norm`` of the
  gradients, then ``full_tensor``: every shard's squares reduced over the ranks), after the last backward pass and
  before any clipping; for each watched batch (0-indexed), whether this rank's shard of every parameter and of every
  optimizer state tensor at the batch's end equals, bitwise, the one at its start; whether the gradients were
  DTensors (sharded); ``avg_factor``: what ``reduce_scatter_tensor(op=AVG)`` of ones gives, 1.0 where it averages,
  the world size where the backend sums instead (gloo in torch 2.7, pytorch/pytorch#162338: FSDP2's gradients on CPU
  are then the world size times DDP's).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from composer.core import Callback, State
from composer.loggers import Logger
from llmfoundry.registry import callbacks
from torch.distributed.tensor import DTensor

from foundry_ext.trainer.spike_guard.callback import SpikeGuard


def _local(t: torch.Tensor) -> torch.Tensor:
    return (t.to_local() if isinstance(t, DTensor) else t).detach().clone()


def _snapshot(state: State) -> list[torch.Tensor]:
    tensors = [_local(p) for p in state.model.parameters()]
    for opt in state.optimizers:
        for s in opt.state.values():
            tensors += [_local(v) for _, v in sorted(s.items()) if isinstance(v, torch.Tensor)]
    return tensors


class FSDPProbe(Callback):
    def __init__(self, out: str, watch: list[int] | None = None) -> None:
        self.out = Path(out)
        self.watch = set(watch or [])
        self.norms: dict[int, float] = {}
        self.unchanged: dict[int, bool] = {}
        self.sharded = False
        self.avg_factor = 1.0
        self._start: list[torch.Tensor] | None = None

    def fit_start(self, state: State, logger: Logger) -> None:
        del state, logger
        import torch.distributed as tdist

        if tdist.is_initialized() and tdist.get_world_size() > 1:  # what a reduce-scatter with AVG gives ranks of ones
            out = torch.empty(1)
            tdist.reduce_scatter_tensor(out, torch.ones(tdist.get_world_size()), op=tdist.ReduceOp.AVG)
            self.avg_factor = float(out)  # 1.0: an average; the world size: the backend sums (gloo, pytorch#162338)

    def before_train_batch(self, state: State, logger: Logger) -> None:
        del logger
        batch = state.timestamp.batch.value
        self._start = _snapshot(state) if batch in self.watch else None

    def after_backward(self, state: State, logger: Logger) -> None:
        del logger
        grads = [p.grad for p in state.model.parameters() if p.grad is not None]
        self.sharded = any(isinstance(g, DTensor) for g in grads)
        norm = torch.nn.utils.get_total_norm(grads, norm_type=2.0)
        norm = norm.full_tensor() if isinstance(norm, DTensor) else norm
        self.norms[state.timestamp.batch.value] = float(norm)  # the last micro-batch's wins: the whole batch's

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        batch = state.timestamp.batch.value - 1
        if self._start is not None:
            end = _snapshot(state)
            self.unchanged[batch] = len(end) == len(self._start) and all(
                a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
                for a, b in zip(self._start, end, strict=True)
            )
        guard = next(cb for cb in state.callbacks if isinstance(cb, SpikeGuard))
        if guard._stop is not None or state.timestamp.batch == state.max_duration:
            self._write(guard)  # the guard, listed after this, exits at this batch's end when it stops the run

    def fit_end(self, state: State, logger: Logger) -> None:
        del logger
        self._write(next(cb for cb in state.callbacks if isinstance(cb, SpikeGuard)))

    def _write(self, guard: SpikeGuard) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        result: dict[str, Any] = {
            "sharded": self.sharded,
            "avg_factor": self.avg_factor,
            "decisions": guard.decisions,
            "norms": self.norms,
            "unchanged": self.unchanged,
        }
        (self.out / f"rank{os.environ.get('RANK', '0')}.json").write_text(json.dumps(result))


callbacks.register("spike_test_fsdp_probe", func=FSDPProbe)
