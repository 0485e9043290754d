r"""Rank schedules by the loss a fitted law predicts: a grid of YAML keys, or anneal branches (``law tune``).

:func:`parse_grid` reads ``KEY=V1,V2,...`` specs against a train YAML (a key must be one the YAML has or one its
scheduler accepts: did-you-mean otherwise); :func:`rank` predicts the final loss of every candidate with its band,
best first; :func:`unresolved` counts the candidates whose band overlaps the best's (the law cannot tell them apart).

**Branches** (:func:`branch_lr`): a cooldown branched from batch ``s`` of a stable run trains the stable run's LR for
batches ``0 .. s - 1``, then the LR of the branch ``foundry-ext anneal`` writes: ``warmup_stable_decay`` with
``t_decay_start: {s}ba``, ``decay_type`` the shape :math:`d`, ``alpha_f`` the floor :math:`\phi` and
``max_duration: {s + D}ba``, from the YAML's ``optimizer.lr`` :math:`\eta_{max}` (the stable phase's LR), computed
by the LR pipeline as ``plot`` computes the branch's YAML. In Composer's order (batch ``b`` at timestamp ``b - 1``):

.. math::
    \eta_{s + j} = \eta_{max} \left(\phi + (1 - \phi)\, d\!\left(\max(j - 1, 0) / D\right)\right),
    \qquad j = 0 .. D - 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from foundry_ext.law.predict import predict

if TYPE_CHECKING:
    from foundry_ext.preview.pipeline import LRPipeline

__all__ = [
    "MAX_CANDIDATES",
    "Candidate",
    "TuneError",
    "branch_lr",
    "combinations",
    "parse_grid",
    "rank",
    "unresolved",
]

MAX_CANDIDATES = 500  # a grid's combinations (each a whole schedule to compute): more is a mistake, or a job


class TuneError(ValueError):
    """A grid that cannot be tuned: one line naming the option, the value and what is allowed."""


@dataclass
class Candidate:
    """One candidate schedule: its label (overrides), predicted loss after its last batch, band and warnings."""

    overrides: list[str]
    final: float
    low: float | None = None
    high: float | None = None
    warnings: list[str] | None = None


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
        parts = [v.strip() for v in values.split(",")]
        if any(not v for v in parts):
            raise TuneError(f"--grid {spec!r}: an empty value; expected KEY=V1,V2,... with no empty item")
        grid.append((key, parts))
    n = 1
    for _, values in grid:
        n *= len(values)
    if n > MAX_CANDIDATES:
        raise TuneError(f"--grid: {n} combinations; at most {MAX_CANDIDATES} (each is a whole schedule to compute)")
    if n < 2:
        raise TuneError("--grid: 1 combination, nothing to rank; give two or more values (or use `law predict`)")
    return grid


def combinations(grid: Sequence[tuple[str, Sequence[str]]]) -> list[list[str]]:
    """Every combination of the grid's values, as override lists (``["scheduler.t_decay=0.1dur", ...]``)."""
    return [
        [f"{k}={v}" for (k, _), v in zip(grid, combo, strict=True)]
        for combo in itertools.product(*(values for _, values in grid))
    ]


def rank(law: Any, lrs_of: Callable[[list[str]], np.ndarray], combos: Sequence[list[str]]) -> list[Candidate]:
    """Each candidate's predicted final loss and band (``lrs_of(label)``: its LR of every batch), best first.

    ``law`` is a :class:`~foundry_ext.law.lawfile.Law`. Raises ``TuneError`` for a candidate the law cannot predict.
    """
    from foundry_ext.law.reliability import band, extrapolation, refuse_reason

    rows = []
    for extra in combos:
        lr = lrs_of(extra)
        end = np.array([len(lr)])
        pred = predict(law.form, law.params, lr, end)
        why = refuse_reason(law.form, law.params, end, pred)
        if why:
            raise TuneError(f"{' '.join(extra)}: {why}")
        c = Candidate(extra, float(pred[0]), warnings=extrapolation(law.domain, lr))
        b = band(law.form, law.params, law.subfits, law.model_error, law.domain, lr, end, pred)
        if b is not None:
            c.low, c.high = float(b[0][0]), float(b[1][0])
        rows.append(c)
    rows.sort(key=lambda c: c.final)
    return rows


def unresolved(rows: Sequence[Candidate]) -> int:
    """How many candidates after the best have a band overlapping the best's (0: the best is resolved)."""
    best = rows[0]
    if best.high is None:
        return 0
    return sum(1 for c in rows[1:] if c.low is not None and c.low <= best.high)


def branch_lr(stable: LRPipeline, start: int, decay: int, shape: str, floor: float) -> np.ndarray:
    """The LR of every batch of a cooldown branched at batch ``start`` of the stable run ``stable`` (module doc).

    Raises:
        ConfigError: the branch's schedule is invalid (a ``shape`` or ``floor`` the schedule refuses).
    """
    import dataclasses

    from foundry_ext.config.durations import Duration

    end = start + decay
    block = {"name": "warmup_stable_decay", "t_decay_start": f"{start}ba", "decay_type": shape, "alpha_f": floor}
    branch = type(stable).from_config(
        {**stable.cfg, "max_duration": f"{end}ba", "scheduler": block},
        dataclasses.replace(stable.clock, max_duration=Duration(end, "ba")),
        check_name=False,
    )
    return np.concatenate([stable.lrs(0, start), branch.lrs(start)])
