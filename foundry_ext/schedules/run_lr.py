r"""What a schedule does over the whole run, checked before batch 0 (pure Python: no torch, no Composer).

:func:`run_lr_findings` complements :func:`~foundry_ext.schedules.base.run_check` (units, overlaps, Composer's
``t_max`` rule) with what used to train silently or fail mid-run:

* a duration that converts to 0 batches (``t_max: 0.001dur`` of a 40-batch run): an error for the durations a
  formula divides by or needs positive (:data:`POSITIVE_DURATIONS`), a warning for the others (no effect);
* durations of one of Composer's or llm-foundry's warmup schedulers (:data:`SUBTRACTING`) in units that cannot be
  compared with each other (``t_warmup: 4ba`` with ``t_max: 20480tok``): those classes subtract them
  (``Cannot subtract 4ba from 20480tok``);
* for the schedules with a formula here, the multiplier of every batch of the run (at most :data:`MAX_POINTS`,
  evenly spaced): not finite, or above :data:`MAX_MULTIPLIER` (the LR would exceed 1000 x ``optimizer.lr``), is an
  error; exactly 0 for more than :data:`ZERO_SHARE` of the batches is a warning;
* a plateau ``check_interval`` that no batch of the run reaches (longer than the run, or in tokens that are never a
  multiple of the interval at a batch end): the plateau never checks, one warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from foundry_ext.config.durations import Duration, convert, timestamp_of_batch
from foundry_ext.config.errors import Problem, join_path
from foundry_ext.config.train_yaml import RunClock
from foundry_ext.schedules.base import ScheduleModel, run_check

__all__ = [
    "MAX_MULTIPLIER",
    "MAX_POINTS",
    "POSITIVE_DURATIONS",
    "STEPPED_POINTS",
    "ZERO_SHARE",
    "likely_mistakes",
    "plateau_interval_warning",
    "run_lr_findings",
    "setting_warnings",
    "stepped_lr_problem",
]

MAX_MULTIPLIER = 1e3
"""Largest multiplier of ``optimizer.lr`` accepted at any batch (a schedule peaks at 1 unless told otherwise)."""

ZERO_SHARE = 0.1
"""Share of the run's batches above which an LR of exactly 0 is a warning, when that is more than 2 batches (a warmup
from 0 costs two: batches 0 and 1 both train with the multiplier at timestamp 0)."""

MAX_POINTS = 200_000
"""Most batches evaluated (evenly spaced beyond): a few hundred ms for this package's formulas."""

STEPPED_POINTS = 20_000
"""Most batches evaluated for a schedule computed by stepping (torch's classes): ~0.1 s for 20,000."""

SUBTRACTING = frozenset(
    {"constant_with_warmup", "linear_decay_with_warmup", "cosine_with_warmup", "polynomial_with_warmup",
     "inv_sqrt_with_warmup"}
)  # fmt: skip
"""Composer's and llm-foundry's schedulers that subtract ``t_warmup`` from ``t_max`` (and the current time)."""

T_MAX_COVERS = frozenset(
    {"constant_with_warmup", "linear_decay_with_warmup", "cosine_with_warmup", "polynomial_with_warmup"}
)
"""Composer's schedulers that refuse a ``t_max`` (converted) shorter than ``max_duration`` at their first call."""

POSITIVE_DURATIONS = frozenset({"t_max", "step_size", "decay_period", "t_0", "t_timescale", "t_scale", "periods"})
"""Durations a formula divides by (or that must end after the run starts): 0 batches is an error."""


def run_lr_findings(
    model: ScheduleModel, clock: RunClock, path: str = "scheduler"
) -> tuple[list[Problem], list[Problem]]:
    """The errors and warnings of ``model`` over the run of ``clock`` (see the module docstring)."""
    errors: list[Problem] = []
    warnings: list[Problem] = []
    converted = _converted(model, clock)
    if converted is None:  # the run length is not known here; the extreme of Composer's classes needs none
        bad = None if model.has_formula else _alpha_extreme(model)
        if bad is not None:
            errors.append(_sweep_problem(model, bad, path))
        return errors, warnings
    for name, (given, done) in converted.items():
        if given.value > 0 and done.value == 0:
            field = join_path(path, [name])
            text = (
                f"'{given}' converts to 0 {_unit(done.unit)} in this run (max_duration={clock.max_duration}, "
                "truncated as Composer does)"
            )
            if name.split("[")[0] in POSITIVE_DURATIONS:
                errors.append(Problem(field, f"{text}; the schedule needs it positive: give at least 1ba"))
            else:
                warnings.append(Problem(field, f"{text}: it has no effect"))
    if model.name in SUBTRACTING:
        units = {done.unit for _, done in converted.values() if done.value != 0}
        if len(units) > 1:
            given_all = ", ".join(f"{join_path(path, [n])}={g}" for n, (g, _) in converted.items())
            errors.append(
                Problem(
                    path,
                    f"durations in units that cannot be compared: {given_all}; this scheduler subtracts them from "
                    "each other (Composer raises 'Cannot subtract'); give them all in ba/ep/dur, or all in tok",
                )
            )
    if model.name in T_MAX_COVERS and "t_max" in converted and not errors:
        t_max = converted["t_max"][1]
        total = _total(clock, t_max.unit)
        if total is not None and t_max.value < total:
            errors.append(
                Problem(
                    join_path(path, ["t_max"]),
                    f"'{converted['t_max'][0]}' is {int(t_max.value)} {_unit(t_max.unit)}, shorter than the run "
                    f"(max_duration={clock.max_duration}): Composer refuses it at the first batch (the schedule would "
                    "be undefined after t_max); set t_max >= max_duration, or '1dur'",
                )
            )
    if errors or model.name == "torch_lr_scheduler":
        return errors, warnings
    if not model.has_formula:
        bad, zero_share = _composer_sweep(model, converted, clock), 0.0
    else:
        bad, zero_share = _sweep(model, clock, path)
    if bad is not None:
        errors.append(_sweep_problem(model, bad, path))
    elif zero_share > ZERO_SHARE and not _ends_early(model, converted, clock):  # that warning says why
        zeros = [n for n, (g, d) in converted.items() if d.value == 0 and g.value > 0] or [
            k for k in ("alpha_f", "gamma", "scale_min", "peaks") if k in type(model).model_fields
        ]
        fields = ", ".join(join_path(path, [n]) for n in zeros) or path
        warnings.append(
            Problem(
                path,
                f"the LR is exactly 0 for {zero_share:.0%} of the run's batches (more than {ZERO_SHARE:.0%}); "
                f"check {fields}",
            )
        )
    return errors, warnings


def _ends_early(model: ScheduleModel, converted: Mapping[str, tuple[Duration, Duration]], clock: RunClock) -> bool:
    """Whether a ``t_max`` before the run's end (warned of by ``run_check``) explains a share of zero LR."""
    if "t_max" not in converted or "alpha_f" not in type(model).model_fields:
        return False
    t_max = converted["t_max"][1]
    total = _total(clock, t_max.unit)
    return total is not None and t_max.value < total


_LOWER_IS_BETTER = ("loss", "crossentropy", "perplexity", "calibrationerror")


def setting_warnings(model: ScheduleModel, path: str = "scheduler") -> list[Problem]:
    """Valid settings that need no run length and work against the schedule's intent: warnings.

    An exponential decay whose ``gamma`` grows the LR (Composer's ``exponential``, torch's ``ExponentialLR``: the LR
    is multiplied by gamma every period, or every batch), and a plateau whose ``mode`` looks for the wrong direction
    of its monitor (``mode: max`` on a loss waits for the loss to stop rising).
    """
    found = []
    gamma = getattr(model, "gamma", None)
    exponential = model.name == "exponential" or getattr(model, "type", None) == "ExponentialLR"
    if exponential and isinstance(gamma, (int, float)) and gamma > 1:
        every = "every batch" if model.name == "torch_lr_scheduler" else f"every {getattr(model, 'decay_period', '')}"
        found.append(
            Problem(
                join_path(path, ["gamma"]),
                f"{gamma:g} > 1 grows the LR {every} instead of decaying it; an exponential decay takes gamma in "
                "(0, 1), e.g. 0.99",
            )
        )
    monitor, mode = getattr(model, "monitor", None), getattr(model, "mode", None)
    if isinstance(monitor, str) and mode in ("min", "max"):
        lower = any(
            word in monitor.rpartition("/")[2].lower() or monitor.startswith("loss/") for word in _LOWER_IS_BETTER
        )
        higher = "accuracy" in monitor.rpartition("/")[2].lower()
        if (lower and mode == "max") or (higher and mode == "min"):
            better = "lower" if lower else "higher"
            found.append(
                Problem(
                    join_path(path, ["mode"]),
                    f"{mode!r} on {monitor!r}, for which {better} is better: the plateau waits for it to stop "
                    f"{'rising' if mode == 'max' else 'falling'} and cuts the LR while it improves; use mode: "
                    f"{'min' if lower else 'max'}",
                )
            )
    return found


def likely_mistakes(model: ScheduleModel, path: str = "scheduler") -> list[Problem]:
    """Valid configurations (Composer's own tests build them) that are probably not what was meant: notes."""
    found = []
    if model.name in ("multistep", "multistep_with_warmup") and not getattr(model, "milestones", None):
        found.append(
            Problem(
                join_path(path, ["milestones"]),
                "[] has no milestone: gamma never applies and the LR stays at its peak for the whole run (valid in "
                "Composer; use constant_with_warmup if that is the intent)",
            )
        )
    return found


def plateau_interval_warning(
    interval: Duration, clock: RunClock, path: str = "scheduler.check_interval"
) -> Problem | None:
    """A warning when no batch end of the run closes ``interval`` (the plateau then never checks), else None."""
    try:
        done = convert(interval, clock.max_duration, clock.batches_per_epoch)
        total = clock.total_batches
    except Exception:  # epochs without a known epoch length, tokens without a known batch: not decidable here
        return None
    per = clock.per_batch(done.unit)
    if done.value <= 0:
        return Problem(
            path,
            f"'{interval}' converts to 0 {_unit(done.unit)} in this run (max_duration={clock.max_duration}): the "
            "plateau never checks its monitor and never cuts the LR; give at least 1ba",
        )
    if per is None:
        return None
    first = int(done.value) // math.gcd(int(done.value), per)  # first batch count b with b * per % interval == 0
    if first <= total:
        return None
    reason = "is longer than the run" if done.value > total * per else f"is never a multiple of {per} {done.unit}"
    return Problem(
        path,
        f"'{interval}' {reason} (max_duration={clock.max_duration}, one batch = {per} {done.unit}): the plateau "
        "never checks its monitor and never cuts the LR in this run",
    )


def _total(clock: RunClock, unit: str) -> int | None:
    """The run's length in ``unit`` (None when it cannot be told from the YAML)."""
    try:
        total = convert(Duration(1.0, "dur"), clock.max_duration, clock.batches_per_epoch)
    except Exception:
        return None
    if total.unit == unit:
        return int(total.value)
    per = clock.per_batch(unit)
    return clock.total_batches * per if per and total.unit == "ba" else None


def _composer_sweep(
    model: ScheduleModel, converted: Mapping[str, tuple[Duration, Duration]], clock: RunClock
) -> tuple[int, float] | None:
    """Composer's and llm-foundry's classes: their extreme multiplier over the run, exactly.

    Each of their formulas moves between 1 and its ``alpha*`` values (``alpha``, ``alpha_i``, ``alpha_f``, ...: a
    linear, cosine or polynomial path, or a constant), times ``gamma`` to the number of decays for the gamma schedules
    (step, multistep, exponential); the extreme is the largest of those.
    """
    bad = _alpha_extreme(model)
    if bad is not None:
        return bad
    gamma = getattr(model, "gamma", None)
    if model.name not in ("step", "multistep", "multistep_with_warmup", "exponential") or gamma is None:
        return None
    if model.name == "step":
        size = converted["step_size"][1]
        steps = (_total(clock, size.unit) or 0) // int(size.value) if size.value else 0
    elif model.name == "exponential":
        period = converted.get("decay_period", (None, Duration(1.0, "ba")))[1]
        steps = (_total(clock, period.unit) or 0) / period.value if period.value else 0
    else:
        steps = len(getattr(model, "milestones", []))
    try:
        worst = float(gamma) ** steps
    except OverflowError:
        worst = math.inf
    if not math.isfinite(worst) or worst > MAX_MULTIPLIER:
        return -1, worst  # -1: not one batch (the first such batch is not computed)
    return None


def _alpha_extreme(model: ScheduleModel) -> tuple[int, float] | None:
    """The largest ``alpha*`` value of a Composer or llm-foundry class if it is out of bounds, else None.

    Returned with batch -1: the value is approached where the formula reaches it, not at one batch computed here.
    """
    alphas = [
        float(value)
        for name in type(model).model_fields
        if name.startswith("alpha")
        and isinstance(value := getattr(model, name, None), (int, float))
        and not isinstance(value, bool)
    ]
    largest = max(alphas, default=1.0)
    return (-1, largest) if not math.isfinite(largest) or largest > MAX_MULTIPLIER else None


def _converted(model: ScheduleModel, clock: RunClock) -> dict[str, tuple[Duration, Duration]] | None:
    try:
        return {
            name: (given, convert(given, clock.max_duration, clock.batches_per_epoch))
            for name, given in model.durations().items()
        }
    except Exception:  # epochs without a known epoch length: run_check's note covers it
        return None


def _batches(total: int, max_points: int = MAX_POINTS) -> Iterator[int]:
    step = max(1, math.ceil(total / max_points))
    yield from range(0, total, step)
    if (total - 1) % step:
        yield total - 1


def _sweep_batches(
    multiplier: Callable[[int], float], total: int, max_points: int = MAX_POINTS
) -> tuple[tuple[int, float] | None, float]:
    """The first batch whose multiplier is out of bounds, with its value; and the share of batches at exactly 0.

    Out of bounds: not finite, or above :data:`MAX_MULTIPLIER` in magnitude. Of the batches ``0 .. total - 1``, at
    most ``max_points`` are evaluated, evenly spaced, the last included. ``multiplier(batch)`` is the multiplier
    batch ``batch`` trains with; one that raises an arithmetic error counts as not finite. The share of zeros is 0.0
    when at most 2 batches are at 0 (a warmup from 0).
    """
    zeros = points = 0
    for batch in _batches(total, max_points):
        try:
            value = float(multiplier(batch))
        except (OverflowError, ZeroDivisionError, ValueError):
            value = math.inf
        if not math.isfinite(value) or abs(value) > MAX_MULTIPLIER:
            return (batch, value), 0.0
        points += 1
        zeros += value == 0
    return None, zeros / points if zeros > 2 else 0.0


def _sweep_problem(model: ScheduleModel, bad: tuple[int, float], path: str) -> Problem:
    """The error line of a multiplier found out of bounds, naming the fields that can cause it."""
    batch, value = bad
    fields = ", ".join(_large_fields(model, path) or _torch_arguments(model, path)) or path
    where = f"the LR of batch {batch}" if batch >= 0 else "the LR"
    how = (
        "is not finite" if not math.isfinite(value) else f"is {value:g} x optimizer.lr (more than {MAX_MULTIPLIER:g}x)"
    )
    return Problem(path, f"{where} {how}; check {fields}")


def stepped_lr_problem(
    model: ScheduleModel, multiplier: Callable[[int], float], total: int, path: str = "scheduler"
) -> Problem | None:
    """The error of a schedule computed by stepping (torch's classes) whose LR leaves the bounds in the run, or None.

    ``multiplier(batch)`` is the multiplier 0-indexed ``batch`` trains with; at most :data:`STEPPED_POINTS` of the
    ``total`` batches are evaluated. ``validate``, the torch config transform and the Trainer's first call share it.
    """
    bad, _ = _sweep_batches(multiplier, total, STEPPED_POINTS)
    return None if bad is None else _sweep_problem(model, bad, path)


def _sweep(model: ScheduleModel, clock: RunClock, path: str) -> tuple[tuple[int, float] | None, float]:
    """The first batch whose multiplier is not finite or too large, and the share of batches at exactly 0."""
    try:
        check = run_check(model, clock.max_duration, clock.batches_per_epoch, 1.0, path)
        total = clock.total_batches
    except Exception:  # the run length is not known here (epochs, tokens): checked at FIT_START instead
        return None, 0.0
    if check.errors or check.resolved is None or total <= 0:
        return None, 0.0
    d, unit = check.resolved.values, check.resolved.unit
    return _sweep_batches(lambda batch: model.multiplier(clock.now(timestamp_of_batch(batch), unit), d), total)


def _large_fields(model: ScheduleModel, path: str) -> list[str]:
    """The numeric fields of ``model`` that are not finite or larger than :data:`MAX_MULTIPLIER` in magnitude."""
    found: list[str] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            if not math.isfinite(value) or abs(value) > MAX_MULTIPLIER:
                found.append(where)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{where}.{key}")

    for name in type(model).model_fields:
        walk(getattr(model, name, None), join_path(path, [name]))
    return found


def _torch_arguments(model: ScheduleModel, path: str) -> list[str]:
    """The numeric arguments of a torch class (its model's extra keys): a growth factor of any size can cause it."""
    extra = model.model_extra or {}
    return [join_path(path, [k]) for k, v in extra.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _unit(unit: str) -> str:
    return {"ba": "batches", "tok": "tokens", "sp": "samples"}.get(unit, unit)
