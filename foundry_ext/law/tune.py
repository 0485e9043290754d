"""Rank schedules by the loss a fitted law predicts: a grid of YAML keys (``law tune``).

:func:`parse_grid` reads ``KEY=V1,V2,...`` specs against a train YAML (a key must be one the YAML has or one its
scheduler accepts: did-you-mean otherwise); :func:`rank` predicts the final loss of every combination, best first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from foundry_ext.law.predict import predict

__all__ = ["Candidate", "TuneError", "combinations", "parse_grid", "rank"]


class TuneError(ValueError):
    """A grid that cannot be tuned: one line naming the option, the value and what is allowed."""


@dataclass
class Candidate:
    """One schedule of a grid: its overrides and the predicted loss after its last batch."""

    overrides: list[str]
    final: float


def parse_grid(specs: Sequence[str], config: str, overrides: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``KEY=V1,V2`` specs -> ``(key, values)``; a key must be one the YAML has, or one its scheduler accepts.

    Raises:
        TuneError: a malformed spec or an unknown key (with a did-you-mean).
        ConfigError: the YAML itself is invalid.
    """
    from foundry_ext.catalog.registry import validate_block
    from foundry_ext.config.errors import did_you_mean
    from foundry_ext.config.train_yaml import load_train_config

    cfg = load_train_config(config, list(overrides))
    block = cfg.get("scheduler") if isinstance(cfg.get("scheduler"), dict) else {}
    model = validate_block(block, "scheduler") if block else None
    sched_keys = set(block) | (set(type(model).model_fields) if model is not None else set())
    grid = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise TuneError(f"--grid {spec!r}: expected KEY=V1,V2,... (e.g. scheduler.t_decay=0.1dur,0.2dur)")
        if key.startswith("scheduler."):
            sub = key.removeprefix("scheduler.")
            if sub not in sched_keys:
                options = sorted(f"scheduler.{k}" for k in sched_keys if k != "name")
                raise TuneError(
                    f"--grid {key}: scheduler {block.get('name')!r} has no key {sub!r}{did_you_mean(key, options)}"
                )
        else:
            node = cfg
            for part in key.split("."):
                if not isinstance(node, dict) or part not in node:
                    top = sorted(cfg) + sorted(f"scheduler.{k}" for k in sched_keys)
                    raise TuneError(f"--grid {key}: the YAML has no key {key!r}{did_you_mean(key, top)}")
                node = node[part]
        grid.append((key, [v.strip() for v in values.split(",") if v.strip()]))
    return grid


def combinations(grid: Sequence[tuple[str, Sequence[str]]]) -> list[list[str]]:
    """Every combination of the grid's values, as override lists (``["scheduler.t_decay=0.1dur", ...]``)."""
    return [
        [f"{k}={v}" for (k, _), v in zip(grid, combo, strict=True)]
        for combo in itertools.product(*(values for _, values in grid))
    ]


def rank(
    form: str, params: Sequence[float], lrs_of: Callable[[list[str]], np.ndarray], combos: Sequence[list[str]]
) -> list[Candidate]:
    """The predicted final loss of each combination (``lrs_of(overrides)``: its LR of every batch), best first."""
    rows = []
    for extra in combos:
        lr = lrs_of(extra)
        rows.append(Candidate(extra, float(predict(form, params, lr, np.array([len(lr)]))[0])))
    rows.sort(key=lambda c: c.final)
    return rows
