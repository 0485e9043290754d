"""Composer durations without importing Composer: parsing, and the conversion rules its schedulers use.

Importing Composer takes seconds, and ``foundry-ext validate``, ``schema`` and ``schedulers`` must not wait for it.
This module repeats exactly two pieces of Composer 0.32 (``tests/config/test_durations.py`` checks both against it):

* :func:`parse`: ``Time.from_timestring`` (``'100ba'``, ``'3e4tok'``, ``'0.2dur'``; every unit but ``dur`` must be
  a whole number), restricted to the units a schedule can use;
* :func:`convert`: ``composer.optim.scheduler._convert_time``: ``dur`` becomes a fraction of ``max_duration`` (which
  the Trainer has already scaled by ssr), ``ep`` becomes batches through the dataloader length, and everything but
  ``dur`` is multiplied by ``ssr`` and truncated.

Schedulers store :class:`Duration` values as given and convert them when they are called (``max_duration`` is only
known then), memoised per ``(max_duration, dataloader_len, ssr)`` by :func:`resolve`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from foundry_ext.config.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SCHEDULE_UNITS",
    "Duration",
    "DurationError",
    "Resolved",
    "UnknownBatchesPerEpoch",
    "convert",
    "dur_length",
    "now",
    "parse",
    "resolve",
    "timestamp_of_batch",
]

#: Units a schedule duration may use, and their timestamp attribute.
SCHEDULE_UNITS = {"ba": "batch", "ep": "epoch", "sp": "sample", "tok": "token", "dur": "duration"}
_NAMES = {"ba": "batches", "ep": "epochs", "sp": "samples", "tok": "tokens", "dur": "fractions of max_duration"}
# Composer's _TIME_STR_REGEX: anything, then a unit (case-insensitive), at the end
_TIME_RE = re.compile(r"^(.+)(iter|ep|ba|sp|tok|dur|sec)$", re.IGNORECASE)
_WALL_CLOCK_RE = re.compile(r"^(\d+h)?(\d+m)?(\d+s)?$")  # Composer's verify_wct: '1h30m' is seconds
EXAMPLES = "'100ba', '0.2dur', '1ep', '2000000tok' or '512sp'"


class DurationError(ValueError):
    """A value is not a schedule duration; the message says why and what is allowed (no field name)."""


class UnknownBatchesPerEpoch(RuntimeError):
    """A duration in ``ep`` (or ``dur`` of a run measured in ``ep``) needs the number of batches per epoch."""


@dataclass(frozen=True, slots=True)
class Duration:
    """A Composer duration: ``value`` in ``unit`` (``ba``, ``ep``, ``sp``, ``tok``, ``dur``).

    ``value`` is an int for every unit but ``dur`` (a float), as in Composer's ``Time``.
    """

    value: int | float
    unit: str

    def __str__(self) -> str:
        if isinstance(self.value, int):
            return f"{self.value}{self.unit}"
        short = f"{self.value:g}"
        return f"{short if float(short) == self.value else repr(self.value)}{self.unit}"

    def __repr__(self) -> str:
        return f"Duration('{self}')"

    @classmethod
    def of(cls, value: Any) -> Duration:
        """A :class:`Duration` from a time string, a Duration, or a Composer ``Time`` (read without importing it)."""
        if isinstance(value, Duration):
            return value
        if isinstance(value, str):
            return parse(value)
        unit = getattr(getattr(value, "unit", None), "value", None)
        if isinstance(unit, str) and isinstance(getattr(value, "value", None), (int, float)):
            return _checked(value.value, unit.lower(), repr(value))  # a composer.core.Time
        raise DurationError(
            f"{value!r} ({type(value).__name__}) is not a duration; expected a string such as {EXAMPLES}"
        )

    def to_time(self) -> Any:
        """This duration as a Composer ``Time`` (imports Composer)."""
        from composer.core import Time

        return Time(self.value, self.unit)


def parse(text: str) -> Duration:
    """Parse a Composer time string as ``Time.from_timestring`` does, refusing units a schedule cannot use.

    Raises:
        DurationError: not a time string, a unit other than ``ba``/``ep``/``sp``/``tok``/``dur``, or a fraction of a
            batch, epoch, sample or token (``'2.5ba'``).
    """
    stripped = text  # not stripped: Composer refuses ' 100ba ', and llm-foundry's own schedulers parse it themselves
    if stripped and _WALL_CLOCK_RE.match(stripped):
        raise DurationError(f"{text!r} is wall-clock time, which cannot drive a schedule; expected e.g. {EXAMPLES}")
    match = _TIME_RE.findall(stripped)
    if len(match) != 1:
        raise DurationError(f"{text!r} is not a duration; expected a number and a unit, e.g. {EXAMPLES}")
    number, unit = match[0]
    unit = unit.lower()
    try:
        value = float(number)
    except ValueError:
        raise DurationError(f"{text!r} is not a duration; expected a number and a unit, e.g. {EXAMPLES}") from None
    return _checked(value, unit, repr(text))


def _checked(value: float, unit: str, shown: str) -> Duration:
    if unit == "sec":
        raise DurationError(f"{shown} is wall-clock time, which cannot drive a schedule; expected e.g. {EXAMPLES}")
    if unit not in SCHEDULE_UNITS:
        raise DurationError(f"{shown}: unit {unit!r} is not allowed; use one of {', '.join(SCHEDULE_UNITS)}")
    if not math.isfinite(value):
        raise DurationError(f"{shown} is not a finite duration; expected e.g. {EXAMPLES}")
    if unit == "dur":
        return Duration(float(value), unit)
    if int(value) != value:
        raise DurationError(
            f"{shown}: {_NAMES[unit]} must be a whole number (Composer counts {_NAMES[unit]} in integers); "
            f"write e.g. '{math.ceil(value)}{unit}', or a fraction of the run such as '0.1dur'"
        )
    if abs(value) > MAX_COUNT:  # Composer keeps time in int64 counters; numpy and plots need exact floats
        raise DurationError(f"{shown} is too large; expected at most 2**53 ({MAX_COUNT}) {_NAMES[unit]}")
    return Duration(int(value), unit)


MAX_COUNT = 2**53
"""Largest count of batches, epochs, samples or tokens in a duration: every count below is exact as a float."""


def convert(time: Duration, max_duration: Duration, dataloader_len: int | None, ssr: float = 1.0) -> Duration:
    """Convert ``time`` exactly as ``composer.optim.scheduler._convert_time`` does.

    Raises:
        UnknownBatchesPerEpoch: ``time`` (or ``max_duration``, for ``dur``) is in epochs and ``dataloader_len`` is
            not known.
    """
    if time.unit == "dur":
        if max_duration.unit == "ep":
            if dataloader_len is None:
                raise UnknownBatchesPerEpoch(f"{time} of max_duration={max_duration} needs the batches per epoch")
            return Duration(int(time.value * int(dataloader_len) * max_duration.value), "ba")
        return Duration(int(time.value * max_duration.value), max_duration.unit)
    if time.unit == "ep":
        if dataloader_len is None:
            raise UnknownBatchesPerEpoch(f"{time} needs the batches per epoch")
        time = Duration(time.value * int(dataloader_len), "ba")
    return Duration(int(time.value * ssr), time.unit)


@dataclass(frozen=True, slots=True)
class Resolved:
    """Durations of one schedule converted to one common unit.

    Attributes:
        unit: the common unit (``ba`` unless every field is in tokens or samples).
        values: field name -> integer value in ``unit``.
    """

    unit: str
    values: Mapping[str, int]


def resolve(
    durations: Mapping[str, Duration],
    max_duration: Duration,
    dataloader_len: int | None,
    ssr: float = 1.0,
    unscaled: frozenset[str] = frozenset(),
    prefix: str = "scheduler",
) -> Resolved:
    """Convert ``durations`` to one unit (:func:`convert`; fields in ``unscaled`` ignore ``ssr``).

    Raises:
        ConfigError: when fields end up in units Composer cannot convert between (e.g. ``tok`` and ``ba``).
        UnknownBatchesPerEpoch: see :func:`convert`.
    """
    converted = {
        name: convert(t, max_duration, dataloader_len, 1.0 if name in unscaled else ssr)
        for name, t in durations.items()
    }
    # a zero length is 0 in every unit: a default '0ba' warmup must not clash with durations in tokens
    units = {t.unit for t in converted.values() if t.value != 0}
    if len(units) > 1:
        given = ", ".join(f"{prefix}.{n}={durations[n]} (-> {converted[n].unit})" for n in durations)
        raise ConfigError(
            prefix,
            f"durations use units Composer cannot convert between: {given}. With max_duration={max_duration}, 'ba', "
            "'ep' and 'dur' all convert to batches; 'tok' and 'sp' convert only to themselves and 'dur' when "
            "max_duration is in that unit. Give every duration in one of these families.",
        )
    unit = units.pop() if units else "ba"
    return Resolved(unit, {name: int(t.value) for name, t in converted.items()})


def dur_length(fraction: float, start: int) -> int:
    """The length ``LEN`` of a run continued from batch ``start`` whose last ``fraction`` is exactly ``LEN`` batches.

    What ``t_decay: {fraction}dur`` means for ``warmup_stable_decay`` with ``max_duration = start + LEN``: the ``LEN``
    with ``int(fraction * (start + LEN)) == LEN`` (Composer truncates a ``dur``), the largest when two are (``0.5``).
    ``0.2`` from batch 8000 is 2000 batches; ``0.45`` from batch 8 is 6, where ``round(f * s / (1 - f))`` says 7
    (``int(0.45 * 15) = 6``). ``anneal --decay`` and ``law tune --branch-from --decay`` both ask here.

    Raises:
        DurationError: no length of at least 1 batch is exactly ``fraction`` of the whole run (``0.2`` from batch 3).
    """
    # the exact lengths lie in ((f s - 1) / (1 - f), f s / (1 - f)]: the rounded bound and its neighbours hold them
    guess = round(fraction * start / (1.0 - fraction))
    found = [n for n in (guess - 1, guess, guess + 1) if n > 0 and int(fraction * (start + n)) == n]
    if not found:
        example = max(guess, 1)
        raise DurationError(
            f"from batch {start} no branch length is exactly {fraction:g} of the whole run (e.g. "
            f"int({fraction:g} * ({start} + {example})) = {int(fraction * (start + example))}); give the length in "
            "batches"
        )
    return found[-1]


def now(state: Any, unit: str) -> int:
    """The current timestamp of a Composer ``State`` in ``unit`` as an int (a direct attribute read, no parsing)."""
    return getattr(state.timestamp, SCHEDULE_UNITS[unit]).value


def max_duration_of(state: Any) -> Duration:
    """``state.max_duration`` as a :class:`Duration` (a Composer ``Time``, read without importing Composer)."""
    md = state.max_duration
    if md is None:
        raise RuntimeError("max_duration must be set before a scheduler is called")
    return Duration(md.value, md.unit.value)


@overload
def timestamp_of_batch(batch: int) -> int: ...
@overload
def timestamp_of_batch(batch: np.ndarray) -> np.ndarray: ...
def timestamp_of_batch(batch: int | np.ndarray) -> int | np.ndarray:
    """The timestamp (batches done) at which the multiplier of 0-indexed ``batch`` is evaluated: ``max(b - 1, 0)``.

    Composer steps its ``LambdaLR`` at the end of batch ``b`` before the timestamp advances, so batch ``b`` trains
    with the multiplier at ``b - 1`` (batch 0 with the one at 0). The one place this rule lives: the preview and its
    pipeline, the plot, the run's LR checks, the torch scheduler's sweep, anneal and the lr-find ramp call it.

    ``batch`` is an int, or a numpy array of ints (each element converted; the pipeline's whole-run arrays).
    """
    # batch 0 subtracts nothing: the scheduler has not stepped yet; one expression for an int and an array alike
    return batch - (batch > 0)
