"""One pipeline from a train YAML and its overrides to the LR of every batch (``plot``, ``validate``, ``law``).

``anneal`` can start it from a resumed batch (:meth:`LRPipeline.lrs` with ``start``).

The steps, in order (each error raised before the first LR is computed):

1. the YAML as ``train.py`` loads it, overrides merged (:func:`~foundry_ext.config.train_yaml.load_train_config`);
2. the run's clock: ``max_duration``, batches per epoch, samples and tokens per batch
   (:func:`~foundry_ext.config.train_yaml.run_clock`; options override what the YAML says);
3. the ``scheduler`` block: a registered name, then its :class:`~foundry_ext.preview.schedule.Schedule` by the
   cheapest exact route (:func:`~foundry_ext.preview.schedule.build_schedule`: this package's formulas without
   Composer);
4. for ``reduce_lr_on_plateau`` with the monitored metric of a past run, the cuts the rule makes
   (:func:`~foundry_ext.preview.schedule.simulate_plateau`);
5. the LR of 0-indexed batch ``b``: ``lr * multiplier(max(b - 1, 0)) * scale(b)`` (Composer's order:
   :func:`~foundry_ext.config.durations.timestamp_of_batch`), with ``lr`` the optimizer's (1 when the YAML has none:
   the multiplier).

Step 5 runs on whole arrays: each schedule's ``multipliers(ts, d)`` is the per-batch formula written with numpy,
bitwise equal to it (``tests/schedules/test_multipliers.py``), so a 1,000,000-batch run takes a fraction of a second
rather than ~40 s (docs/benchmarks.md). Schedules without such a formula (torch's, Composer's, other packages')
are evaluated batch by batch, as before.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from foundry_ext.config.durations import UnknownBatchesPerEpoch, timestamp_of_batch

if TYPE_CHECKING:
    from foundry_ext.config.train_yaml import RunClock
    from foundry_ext.preview.schedule import Mark, PlateauCut, Schedule

__all__ = ["BatchesPerEpochNeeded", "LRPipeline", "Metrics", "ScheduleError"]

#: ``(timestamp, value)`` rows of a monitored metric, or a reader of them given the scheduler's ``monitor``.
Metrics = Sequence[tuple[int, float]] | Callable[[str | None], Sequence[tuple[int, float]]]


class BatchesPerEpochNeeded(UnknownBatchesPerEpoch):
    """A duration is in epochs and neither the YAML (a local MDS index) nor the caller says how long one is."""


class ScheduleError(Exception):
    """A scheduler this package does not model failed to build or to evaluate; ``str()`` is one line.

    Attributes:
        name: ``scheduler.name``.
        cause: the scheduler's own exception.
        batch: the 0-indexed batch it failed at (None: while it was built).
    """

    def __init__(self, name: str, cause: BaseException, batch: int | None = None) -> None:
        from foundry_ext.config.train_yaml import error_message

        self.name, self.cause, self.batch = name, cause, batch
        where = "" if batch is None else f" failed at batch {batch}"
        super().__init__(f"scheduler ({name}){where}: {type(cause).__name__}: {error_message(cause)}")


@dataclass
class LRPipeline:
    """A train YAML's schedule, ready to give the LR of any batch of the run.

    Build it with :meth:`from_yaml` (a file and overrides) or :meth:`from_config` (a loaded config and its clock).

    Attributes:
        cfg: the resolved train config.
        clock: the run's clock; ``total`` is its length in batches.
        block: the ``scheduler`` block; ``name`` its ``name``.
        lr: the optimizer's LR, or None when the YAML sets none (``base_lr`` is then 1: LRs are multipliers).
        schedule: the scheduler's :class:`~foundry_ext.preview.schedule.Schedule`.
        cuts: the simulated plateau cuts (:meth:`with_metrics`); ``skipped`` evaluations fell in warmup, ``ignored``
            at or after the end of the run; ``metrics`` the rows kept.
    """

    cfg: Mapping[str, Any]
    clock: RunClock
    block: Mapping[str, Any]
    lr: float | None
    schedule: Schedule
    cuts: list[PlateauCut] = field(default_factory=list)
    metrics: list[tuple[int, float]] | None = None
    skipped: int = 0
    ignored: int = 0

    @classmethod
    def from_yaml(
        cls,
        config: str,
        overrides: Sequence[str] = (),
        *,
        batches_per_epoch: int | None = None,
        tokens_per_batch: int | None = None,
        samples_per_batch: int | None = None,
        metrics: Metrics | None = None,
        require_lr: bool = False,
    ) -> LRPipeline:
        """Load ``config`` with ``overrides`` (``key=value``, as for train.py) and build its schedule.

        ``metrics``: replay ``reduce_lr_on_plateau``'s cuts (:meth:`with_metrics`); a callable is given the
        scheduler's ``monitor`` and returns the rows. ``require_lr``: the YAML must set ``optimizer.lr``.

        Raises:
            ConfigError: the YAML or its schedule is invalid (one problem per field).
            BatchesPerEpochNeeded: a duration is in ``ep`` and ``batches_per_epoch`` is needed.
            ScheduleError: a scheduler of another package failed to build.
        """
        from foundry_ext.config.train_yaml import load_train_config, run_clock

        cfg = load_train_config(config, list(overrides))
        try:
            clock = run_clock(
                cfg,
                batches_per_epoch=batches_per_epoch,
                samples_per_batch=samples_per_batch,
                tokens_per_batch=tokens_per_batch,
            )
        except UnknownBatchesPerEpoch as e:
            raise BatchesPerEpochNeeded(str(e)) from None
        return cls.from_config(cfg, clock, metrics=metrics, require_lr=require_lr)

    @classmethod
    def from_config(
        cls,
        cfg: Mapping[str, Any],
        clock: RunClock,
        *,
        metrics: Metrics | None = None,
        require_lr: bool = False,
        check_name: bool = True,
        read_lr: bool = True,
    ) -> LRPipeline:
        """Build the schedule of a loaded config for ``clock`` (see :meth:`from_yaml`).

        ``check_name=False``: the caller has checked ``scheduler.name``; ``read_lr=False``: multipliers only (the
        optimizer's LR is not read).
        """
        from foundry_ext.config.errors import ConfigError
        from foundry_ext.config.train_yaml import optimizer_lr
        from foundry_ext.preview.schedule import build_schedule

        block = cfg.get("scheduler")
        if not isinstance(block, Mapping) or not block.get("name"):
            raise ConfigError(
                "scheduler.name", "missing; expected a block with a name, e.g. {name: cosine_with_warmup}"
            )
        if check_name:
            _check_name(block["name"])
        lr = optimizer_lr(cfg) if read_lr else None
        if require_lr and lr is None:
            raise ConfigError("optimizer.lr", "missing; the law needs the LR itself, not the multiplier")
        try:
            clock.total_batches  # noqa: B018 - raises when the run is in epochs of unknown length
            schedule = build_schedule(block, clock)
        except UnknownBatchesPerEpoch as e:
            raise BatchesPerEpochNeeded(str(e)) from None
        except ConfigError:
            raise
        except Exception as e:  # a scheduler of another package failing to build
            raise ScheduleError(str(block.get("name")), e) from None
        pipeline = cls(cfg, clock, block, lr, schedule)
        if metrics is not None:
            rows = metrics(block.get("monitor")) if callable(metrics) else metrics
            pipeline = pipeline.with_metrics(rows)
        return pipeline

    @property
    def name(self) -> str:
        return str(self.block["name"])

    @property
    def total(self) -> int:
        """Batches the run trains: ``0 .. total - 1``."""
        return self.clock.total_batches

    @property
    def base_lr(self) -> float:
        return 1.0 if self.lr is None else self.lr

    @property
    def plateau(self) -> bool:
        """Whether the schedule is ``reduce_lr_on_plateau`` (cuts can be simulated)."""
        from foundry_ext.preview.schedule import PlateauPreview

        return isinstance(self.schedule, PlateauPreview)

    @property
    def warnings(self) -> list[Any]:
        return list(getattr(self.schedule, "warnings", []))

    def with_metrics(self, metrics: Sequence[tuple[int, float]]) -> LRPipeline:
        """The same run with ``reduce_lr_on_plateau``'s cuts replayed from ``metrics`` (``(timestamp, value)``).

        Rows at or after the end of the run are ignored (counted in ``ignored``).

        Raises:
            ConfigError: the schedule is not ``reduce_lr_on_plateau``.
        """
        import dataclasses

        from foundry_ext.config.errors import ConfigError
        from foundry_ext.preview.schedule import simulate_plateau

        if not self.plateau:
            raise ConfigError("scheduler.name", f"--metrics is only for reduce_lr_on_plateau, not {self.name!r}")
        total = self.total
        kept = [(b, v) for b, v in metrics if b < total]
        cuts, skipped = simulate_plateau(self.schedule, kept, [self.base_lr])  # type: ignore[arg-type]
        return dataclasses.replace(self, cuts=cuts, metrics=kept, skipped=skipped, ignored=len(metrics) - len(kept))

    def marks(self) -> list[Mark]:
        """Named points inside the run (warmup end, milestones, ...) and one per simulated cut, by batch."""
        from foundry_ext.preview.schedule import Mark

        marks = [m for m in self.schedule.marks() if 0 < m.batch < self.total]
        marks += [
            Mark(f"cut {i + 1} (x{c.cut.new_scale / c.cut.old_scale:g})", c.batch) for i, c in enumerate(self.cuts)
        ]
        return sorted(marks, key=lambda m: m.batch)

    def scale(self, batch: int) -> float:
        """The plateau scale in effect for 0-indexed ``batch`` (1 without cuts)."""
        scales = [1.0] + [c.cut.new_scale for c in self.cuts]
        return scales[bisect.bisect_right([c.batch for c in self.cuts], batch)]

    def multiplier(self, batch: int) -> float:
        """The multiplier 0-indexed ``batch`` trains with (plateau scale included), computed for that batch alone."""
        from foundry_ext.config.errors import ConfigError

        try:
            return self.schedule.multiplier(timestamp_of_batch(batch)) * self.scale(batch)
        except ConfigError:
            raise
        except Exception as e:
            raise ScheduleError(self.name, e, batch) from None

    def lr_of(self, batch: int) -> float:
        """The LR 0-indexed ``batch`` trains with, computed for that batch alone."""
        return self.base_lr * self.multiplier(batch)

    def multipliers_at(self, batches: Sequence[int] | np.ndarray, *, cuts: bool = True) -> np.ndarray:
        """The multiplier of each 0-indexed batch of ``batches`` (``cuts=False``: the time part alone, no scale)."""
        b = np.asarray(batches, dtype=np.int64)
        ts = timestamp_of_batch(b)
        values = self._time_multipliers(ts, b)
        if cuts and self.cuts:
            scales = np.asarray([1.0] + [c.cut.new_scale for c in self.cuts])
            values = values * scales[np.searchsorted([c.batch for c in self.cuts], b, side="right")]
        return values

    def lrs_at(self, batches: Sequence[int] | np.ndarray, *, cuts: bool = True) -> np.ndarray:
        """The LR each 0-indexed batch of ``batches`` trains with (float64), bitwise the per-batch value.

        That is ``lr * (multiplier(timestamp_of_batch(b)) * scale(b))``, as :meth:`lr_of` computes it.
        """
        return self.base_lr * self.multipliers_at(batches, cuts=cuts)

    def lrs(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The LR of batches ``start .. stop - 1`` (``stop`` None: the end of the run); from a resumed batch too."""
        stop = self.total if stop is None else stop
        return self.lrs_at(np.arange(start, stop, dtype=np.int64))

    def _time_multipliers(self, ts: np.ndarray, batches: np.ndarray) -> np.ndarray:
        from foundry_ext.config.errors import ConfigError
        from foundry_ext.preview.schedule import multipliers_of

        try:
            return multipliers_of(self.schedule, ts)
        except ConfigError:
            raise
        except Exception as e:  # find the first batch that fails, for the message
            for batch, t in zip(batches.tolist(), ts.tolist(), strict=True):
                try:
                    self.schedule.multiplier(t)
                except Exception as at:
                    raise ScheduleError(self.name, at, batch) from None
            raise ScheduleError(self.name, e) from None


def _check_name(name: Any) -> None:
    from foundry_ext.catalog.preflight import known_scheduler_names
    from foundry_ext.config.errors import ConfigError, not_a_scheduler

    names = known_scheduler_names()
    if name not in names:
        raise ConfigError("scheduler.name", not_a_scheduler(name, names))
