"""Count torch.distributed collectives per Composer event in a real multi-process run of ``train.py``.

Run under the Composer launcher, one scheduler per run::

    .venv/bin/composer -n 2 bench/count_collectives.py reduce_lr_on_plateau OUT.json [key=value ...]

``SCHEDULER`` is a key of ``bench/_common.py:SCHEDULERS``; the config is ``yamls/tiny-wsd.yaml`` with that
scheduler, the demo data and ``key=value`` overrides. Every public collective of ``torch.distributed`` (broadcast,
all_reduce, all_gather, barrier, ...) is wrapped before training starts; each call is attributed to the last
Composer event that ran (a callback listed first records it). Nested calls (``all_gather_object`` calling
``all_gather``) count once, as the outer call. DDP's gradient all-reduce runs in C++ (its Reducer) and is not seen
here; it is the same whatever the scheduler. Each rank writes ``OUT.json.rank<N>``; rank 0 prints a summary.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as tdist
import torch.distributed.distributed_c10d as c10d

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common
from composer.core import Callback, Event, State
from composer.loggers import Logger

COLLECTIVES = (
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast_object_list",
    "all_gather_object",
    "gather_object",
    "scatter_object_list",
    "monitored_barrier",
)

_event = "(before fit)"
_depth = 0
COUNTS: collections.Counter[tuple[str, str]] = collections.Counter()


class PhaseTracker(Callback):
    """Remembers the event being run, so that a collective can be attributed to it."""

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        del state, logger  # unused
        global _event
        _event = event.value


def _wrap(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def counted(*args: Any, **kwargs: Any) -> Any:
        global _depth
        if _depth == 0:
            COUNTS[(_event, name)] += 1
        _depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _depth -= 1

    return counted


def patch(set_attr: Any = setattr) -> None:
    """Wrap each collective in ``torch.distributed`` and in ``distributed_c10d`` (where torch calls its own).

    ``set_attr`` is ``setattr`` by default; tests pass ``monkeypatch.setattr`` so that the patch is undone.
    """
    for name in COLLECTIVES:
        original = getattr(c10d, name, None)
        if original is None:
            continue
        counted = _wrap(name, original)
        set_attr(c10d, name, counted)
        if getattr(tdist, name, None) is original:
            set_attr(tdist, name, counted)


def main(argv: list[str]) -> int:
    scheduler, out, *overrides = argv
    torch.set_num_threads(1)
    patch()
    from llmfoundry import registry

    registry.callbacks.register("collective_phase", func=PhaseTracker)
    _common.register_recorder()
    cfg = _common.make_config(_common.ensure_data(), _common.SCHEDULERS[scheduler])
    # The phase tracker first, so that it has seen an event before any other callback of that event runs.
    cfg.callbacks = {"collective_phase": {}, "bench_recorder": {}}
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cfg.device_train_microbatch_size = cfg.global_train_batch_size // world
    from omegaconf import OmegaConf as om

    cfg = om.merge(cfg, om.from_dotlist(overrides))
    recorder = _common.run(cfg)
    rank = int(os.environ.get("RANK", "0"))
    result = {
        "scheduler": scheduler,
        "rank": rank,
        "world_size": world,
        "batches": len(recorder.batch_end),
        "evals": len(recorder.evals),
        "counts": [{"event": e, "op": op, "n": n} for (e, op), n in sorted(COUNTS.items())],
    }
    Path(f"{out}.rank{rank}").write_text(json.dumps(result, indent=1))
    if rank == 0:
        print(json.dumps({k: v for k, v in result.items() if k != "counts"}))
        for (event, op), n in sorted(COUNTS.items()):
            print(f"  {event:28s} {op:24s} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
