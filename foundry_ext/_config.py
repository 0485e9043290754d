"""Config validation shared by every scheduler and callback of the package.

llm-foundry builds a scheduler with ``cls(**scheduler_config)``. A typo in the YAML would surface as Python's
``TypeError: __init__() got an unexpected keyword argument``, which names neither the YAML field nor the fix. Every
public class of this package therefore uses :class:`ValidatedMeta`, which checks the keyword arguments against the
``__init__`` signature and the class's ``_fields`` validators *before* the object is built, and raises
:class:`ConfigError` with one line that names the field (``scheduler.t_decay``), the value and what is allowed.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import difflib
import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from composer.core import Time, TimeUnit

__all__ = [
    "ConfigError",
    "ValidatedMeta",
    "check_keys",
    "choice",
    "duration",
    "field_prefix",
    "flag",
    "integer",
    "number",
]

# The YAML path that error messages prefix field names with. ``scheduler`` for the top-level scheduler block;
# ``scheduler.base`` while the plateau scheduler builds its base; ``callbacks.<name>`` for callbacks.
_PREFIX: contextvars.ContextVar[str | None] = contextvars.ContextVar("foundry_ext_prefix", default=None)

Validator = Callable[[str, Any], Any]


class ConfigError(ValueError):
    """A config value is wrong. The message is one line: ``<yaml.field>: <problem>; <what is allowed>``."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@contextlib.contextmanager
def field_prefix(prefix: str) -> Iterator[None]:
    """Name fields ``<prefix>.<key>`` in the errors raised inside this block."""
    token = _PREFIX.set(prefix)
    try:
        yield
    finally:
        _PREFIX.reset(token)


def _path(default_prefix: str, key: str) -> str:
    prefix = _PREFIX.get() or default_prefix
    return f"{prefix}.{key}" if key else prefix


def did_you_mean(word: str, options: Sequence[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest option, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_keys(cls: type, kwargs: dict[str, Any], prefix: str, n_positional: int = 0) -> None:
    """Raise :class:`ConfigError` for a key ``cls.__init__`` does not take, or a required key that is missing."""
    params = [p for name, p in inspect.signature(cls.__init__).parameters.items() if name != "self"]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for key in kwargs:
        if key not in names:
            allowed = f"allowed keys: {', '.join(names)}" if names else getattr(cls, "_no_keys_hint", "takes no keys")
            raise ConfigError(_path(prefix, key), f"unknown key{did_you_mean(key, names)}; {allowed}")
    bound = set(names[:n_positional]) | set(kwargs)
    for p in params:
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            if p.name not in bound:
                raise ConfigError(_path(prefix, p.name), "is required")


class ValidatedMeta(abc.ABCMeta):
    """Metaclass that validates constructor keywords before ``__init__`` runs.

    Derived from ``ABCMeta`` so that it serves both ``ComposerScheduler`` subclasses (plain ``type``) and Composer
    ``Callback`` subclasses (``ABCMeta``).

    A class opts in with two class attributes: ``_yaml_prefix`` (``"scheduler"`` or ``"callbacks.<name>"``) and
    ``_fields``, a mapping from parameter name to a validator ``f(field_path, value) -> value``. Validators may
    normalise the value (for example a YAML int to float); the normalised value is what ``__init__`` receives.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        prefix = getattr(cls, "_yaml_prefix", "scheduler")
        signature = inspect.signature(cls.__init__)
        params = [p for name, p in signature.parameters.items() if name != "self"]
        accepts_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not accepts_var_kw:
            check_keys(cls, kwargs, prefix, n_positional=len(args))
        fields: dict[str, Validator] = getattr(cls, "_fields", {})
        checked = dict(kwargs)
        for i, value in enumerate(args):
            checked[names[i]] = value
        defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        for key, validator in fields.items():
            if key in checked:
                checked[key] = validator(_path(prefix, key), checked[key])
            elif key in defaults:  # defaults go through the same normalisation (e.g. "0ba" -> Time)
                checked[key] = validator(_path(prefix, key), defaults[key])
        return super().__call__(**checked)


# ---------------------------------------------------------------------------------------------------------------
# Validators. Each takes the field path (for the message) and the value, and returns the normalised value.
# ---------------------------------------------------------------------------------------------------------------

_DURATION_UNITS = ("ba", "tok", "ep", "sp", "dur")


def duration(*, allow_zero: bool = True) -> Validator:
    """A Composer duration: a time string such as ``100ba``, ``0.2dur``, ``2000000tok``, or a :class:`Time`."""

    def check(field: str, value: Any) -> Time:
        allowed = "a Composer time string such as '100ba', '0.2dur', '1ep', '2000000tok' or '512sp'"
        if isinstance(value, Time):
            time = value
        elif isinstance(value, str):
            try:
                time = Time.from_timestring(value.strip())
            except (ValueError, KeyError):
                raise ConfigError(field, f"{value!r} is not a duration; expected {allowed}") from None
        else:
            raise ConfigError(field, f"{value!r} ({type(value).__name__}) is not a duration; expected {allowed}")
        if time.unit == TimeUnit.SECOND:
            raise ConfigError(field, f"{value!r}: wall-clock seconds cannot drive a schedule; expected {allowed}")
        if time.unit not in (TimeUnit.BATCH, TimeUnit.TOKEN, TimeUnit.EPOCH, TimeUnit.SAMPLE, TimeUnit.DURATION):
            raise ConfigError(
                field, f"{value!r}: unit {time.unit.value!r} is not allowed; use one of {_DURATION_UNITS}"
            )
        if time.value < 0 or (not allow_zero and time.value == 0):
            raise ConfigError(field, f"{value!r} must be {'>= 0' if allow_zero else '> 0'}")
        return time

    return check


def number(
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    optional: bool = False,
) -> Validator:
    """A finite real number in ``[lo, hi]`` (``(lo, ...`` / ``..., hi)`` when open)."""
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    interval = f"{left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"

    def check(field: str, value: Any) -> float | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(field, f"{value!r} is not a number; expected a number in {interval}")
        value = float(value)
        bad = not math.isfinite(value)
        bad |= lo is not None and (value <= lo if lo_open else value < lo)
        bad |= hi is not None and (value >= hi if hi_open else value > hi)
        if bad:
            raise ConfigError(field, f"{value!r} is out of range; expected a number in {interval}")
        return value

    return check


def integer(*, lo: int | None = None) -> Validator:
    """An integer ``>= lo``."""

    def check(field: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(field, f"{value!r} is not an integer; expected an integer >= {lo}")
        if lo is not None and value < lo:
            raise ConfigError(field, f"{value!r} is out of range; expected an integer >= {lo}")
        return value

    return check


def choice(*options: str) -> Validator:
    """One of ``options``."""

    def check(field: str, value: Any) -> str:
        if value not in options:
            hint = did_you_mean(str(value), options) if isinstance(value, str) else ""
            raise ConfigError(field, f"{value!r} is not allowed{hint}; allowed: {', '.join(options)}")
        return value

    return check


def flag(field: str, value: Any) -> bool:
    """A boolean (YAML ``true``/``false``)."""
    if not isinstance(value, bool):
        raise ConfigError(field, f"{value!r} is not a boolean; expected true or false")
    return value
