"""The typed-config base: pydantic models whose fields are the YAML keys, validated by :func:`build`.

Every scheduler and callback of this package declares its keys once, as a :class:`ConfigModel` subclass: names,
types, defaults, ranges and a one-line description per field. From that one declaration come the validation
(:func:`build`), the defaults, the key tables of ``docs/schedulers.md`` (checked by a test), ``foundry-ext schema``
and ``foundry-ext schedulers``. Models are strict (``'10'`` is not an integer, ``1`` is not a boolean), refuse
unknown keys and non-finite numbers, and import neither torch nor Composer. Their errors become one line each in
:mod:`foundry_ext.config.problems`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import annotated_types
from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator, ValidationError, WithJsonSchema
from pydantic_core import PydanticCustomError

from foundry_ext.config.durations import Duration, DurationError
from foundry_ext.config.errors import ConfigError
from foundry_ext.config.problems import problems_of

__all__ = ["ConfigModel", "NonNegativeDuration", "PositiveDuration", "build"]

M = TypeVar("M", bound="ConfigModel")


class ConfigModel(BaseModel):
    """Base of every config model: strict types, no unknown keys, finite numbers, immutable once validated."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        frozen=True,
        arbitrary_types_allowed=True,
        validate_default=False,
        use_attribute_docstrings=False,
        defer_build=True,  # validators built on first use: the CLI loads every model but validates a few
    )

    def durations(self) -> dict[str, Duration]:
        """Every duration that is set, by field name (``milestones[0]`` for the items of a list)."""
        found: dict[str, Duration] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, Duration):
                found[name] = value
            elif isinstance(value, list):
                found.update({f"{name}[{i}]": v for i, v in enumerate(value) if isinstance(v, Duration)})
        return found

    def kwargs(self) -> dict[str, Any]:
        """The fields as keyword arguments, durations as strings (what a YAML block holds)."""
        return self.model_dump(mode="json")


# -- durations ---------------------------------------------------------------------------------------------------

# Units case-insensitive, as Composer's parser; numbers checked loosely (validate checks whole numbers).
_UNIT = "([bB][aA]|[eE][pP]|[sS][pP]|[tT][oO][kK]|[dD][uU][rR])"
DURATION_PATTERN = r"^\s*[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?\s*" + _UNIT + r"\s*$"


def _duration_validator(minimum: Literal["zero", "positive"]) -> Any:
    def check(value: Any) -> Duration:
        try:
            duration = Duration.of(value)
        except DurationError as e:
            raise PydanticCustomError("duration", str(e)) from None
        if duration.value < 0 or (minimum == "positive" and duration.value == 0):
            shown = repr(value) if isinstance(value, str) else f"'{duration}'"
            raise PydanticCustomError("duration", f"{shown} must be {'>= 0' if minimum == 'zero' else '> 0'}")
        return duration

    return check


def _duration_type(minimum: Literal["zero", "positive"]) -> Any:
    description = "a Composer duration" + (" > 0" if minimum == "positive" else " >= 0")
    return Annotated[
        Duration,
        PlainValidator(_duration_validator(minimum)),
        PlainSerializer(str, return_type=str),
        WithJsonSchema(
            {"type": "string", "pattern": DURATION_PATTERN, "examples": ["100ba", "0.1dur", "2000000tok"]},
            mode="validation",
        ),
        annotated_types.doc(description),
    ]


#: A duration >= 0 (``'0ba'`` allowed), e.g. a warmup.
NonNegativeDuration = _duration_type("zero")
#: A duration > 0, e.g. ``t_max``.
PositiveDuration = _duration_type("positive")


# -- building ----------------------------------------------------------------------------------------------------


def build(model: type[M], kwargs: Mapping[str, Any], path: str = "scheduler") -> M:
    """Validate ``kwargs`` as ``model``; raise :class:`ConfigError` with every problem, each naming its YAML path."""
    try:
        return model.model_validate(dict(kwargs))
    except ValidationError as e:
        raise ConfigError(problems_of(e, model, path)) from None
