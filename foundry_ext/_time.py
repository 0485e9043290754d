"""Duration conversion for schedulers: Composer's rules, computed once per ``max_duration`` instead of per call.

Composer's own schedulers re-parse and convert every time string on every call (``_convert_time``), which is most
of their per-batch cost. Our schedulers store durations as given and call :func:`resolve`, which applies exactly the
same rules but memoises the result on what it depends on: ``max_duration``, ``dataloader_len`` and ``ssr``.
"""

from __future__ import annotations

from collections.abc import Mapping

from composer.core import State, Time, TimeUnit

from foundry_ext._config import ConfigError

__all__ = ["Resolved", "convert", "format_time", "now", "resolve"]

_ATTR = {
    TimeUnit.BATCH: "batch",
    TimeUnit.TOKEN: "token",
    TimeUnit.SAMPLE: "sample",
    TimeUnit.EPOCH: "epoch",
}


def convert(time: Time, state: State, ssr: float = 1.0) -> Time[int]:
    """Convert ``time`` exactly as ``composer.optim.scheduler._convert_time`` does.

    ``dur`` becomes a fraction of ``max_duration`` (already scaled by ssr in the Trainer, so not scaled again);
    ``ep`` becomes batches (epochs are too coarse to scale); everything else is multiplied by ``ssr`` and truncated.
    """
    if state.max_duration is None:
        raise RuntimeError("max_duration must be set before a scheduler is called")
    if time.unit == TimeUnit.DURATION:
        if state.max_duration.unit == TimeUnit.EPOCH:
            if state.dataloader_len is None:
                raise RuntimeError("Cannot convert a 'dur' time: state.dataloader_len is None.")
            return Time(int(time.value * int(state.dataloader_len) * state.max_duration.value), TimeUnit.BATCH)
        return Time(int(time.value * state.max_duration.value), state.max_duration.unit)
    if time.unit == TimeUnit.EPOCH:
        if state.dataloader_len is None:
            raise RuntimeError("Cannot convert an 'ep' time: state.dataloader_len is None.")
        time = Time(time.value * int(state.dataloader_len), TimeUnit.BATCH)
    return Time(int(time.value * ssr), time.unit)


def now(state: State, unit: TimeUnit) -> int:
    """The current timestamp in ``unit`` as an int (a direct attribute read, no parsing)."""
    return getattr(state.timestamp, _ATTR[unit]).value


class Resolved:
    """Durations of one scheduler, converted to a single common unit.

    Attributes:
        unit: the common unit (batches unless every field is in tokens or samples).
        values: field name -> integer value in ``unit``.
    """

    __slots__ = ("unit", "values")

    def __init__(self, unit: TimeUnit, values: dict[str, int]) -> None:
        self.unit = unit
        self.values = values


def resolve(
    durations: Mapping[str, Time],
    scaled: Mapping[str, bool],
    state: State,
    ssr: float,
    cache: dict,
    prefix: str = "scheduler",
) -> Resolved:
    """Convert ``durations`` to one unit, memoised in ``cache`` on ``(max_duration, dataloader_len, ssr)``.

    Args:
        durations: field name -> duration as given (``Time``).
        scaled: field name -> whether ``ssr`` applies to it (``scale_warmup`` for warmups).
        state: the Trainer state.
        ssr: the scale schedule ratio.
        cache: a dict owned by the scheduler; holds the last result.
        prefix: YAML path of the scheduler, for error messages.

    Raises:
        ConfigError: when two fields end up in units Composer cannot convert between (e.g. ``tok`` and ``ba``).
    """
    max_duration = state.max_duration
    dataloader_len = state.dataloader_len
    key = (
        None if max_duration is None else (max_duration.value, max_duration.unit),
        None if dataloader_len is None else int(dataloader_len),
        ssr,
    )
    hit = cache.get("key")
    if hit is not None and hit == key:
        return cache["value"]
    converted = {name: convert(t, state, ssr if scaled.get(name, True) else 1.0) for name, t in durations.items()}
    units = {t.unit for t in converted.values()}
    if len(units) > 1:
        given = ", ".join(f"{prefix}.{n}={format_time(durations[n])} (-> {converted[n].unit.value})" for n in durations)
        raise ConfigError(
            prefix,
            f"durations use units Composer cannot convert between: {given}. With max_duration="
            f"{format_time(max_duration)}, 'ba', 'ep' and 'dur' all convert to batches; 'tok' and 'sp' convert only to "
            "themselves and 'dur' when max_duration is in that unit. Give every duration in one of these families.",
        )
    unit = units.pop() if units else TimeUnit.BATCH
    value = Resolved(unit, {name: int(t.value) for name, t in converted.items()})
    cache["key"] = key
    cache["value"] = value
    return value


def format_time(time: Time | None) -> str:
    """``Time(100, BATCH)`` -> ``"100ba"``, ``Time(0.2, DURATION)`` -> ``"0.2dur"`` (as a user writes it)."""
    if time is None:
        return "None"
    return f"{time.value:g}{time.unit.value}"
