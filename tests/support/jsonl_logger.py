"""A logger for training runs under test: every metric Composer logs, one JSON line each, at full precision.

The console rounds floats to 4 decimals, too coarse to compare learning rates. A run loads this file through its
YAML's ``code_paths`` (llm-foundry imports those before building the Trainer), which registers the logger, and
selects it with ``loggers.jsonl.path=FILE`` (``FILE`` may contain ``{rank}``). Floats go through ``json`` (``repr``),
so values read back compare bitwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from composer.core import State
from composer.loggers import Logger, LoggerDestination
from composer.utils import dist
from llmfoundry.registry import loggers

__all__ = ["JSONLLogger"]


class JSONLLogger(LoggerDestination):
    """Append ``{"step": ..., "name": ..., "value": ...}`` per logged scalar to ``path``."""

    def __init__(self, path: str) -> None:
        super().__init__()
        # ``{rank}`` in the path gives each rank its own file (Composer's format variable, filled here)
        self.path = Path(path.format(rank=dist.get_global_rank()))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a")

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        for name, value in metrics.items():
            try:
                value = float(value.item() if hasattr(value, "item") else value)
            except (TypeError, ValueError, RuntimeError):
                continue  # not a scalar
            self._file.write(json.dumps({"step": step, "name": name, "value": value}) + "\n")
        self._file.flush()

    def close(self, state: State, logger: Logger) -> None:
        del state, logger  # unused
        self._file.close()


if "jsonl" not in loggers:
    loggers.register("jsonl", func=JSONLLogger)
