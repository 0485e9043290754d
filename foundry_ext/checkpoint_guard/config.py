"""The keys of ``callbacks.checkpoint_guard``, declared once as a pydantic v2 model (no Composer, no torch).

A wrong key or value is reported as one line per problem that names the YAML field, the value and what is allowed::

    callbacks.checkpoint_guard.verfy: unknown key (did you mean 'verify'?); allowed keys: quarantine_folder, verify
    callbacks.checkpoint_guard.verify: 'crc' is not allowed; allowed: structure, full
"""

from __future__ import annotations

import difflib
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from foundry_ext._config import ConfigError

__all__ = ["FIELD", "CheckpointGuardConfig", "validate_config"]

FIELD = "callbacks.checkpoint_guard"


class CheckpointGuardConfig(BaseModel):
    """``callbacks.checkpoint_guard`` in a train YAML.

    Args:
        quarantine_folder (str): Where incomplete checkpoints are moved, relative to the local ``save_folder``.
            Inside it on purpose: the move is then a ``rename`` on one filesystem (atomic, no copy of a multi-GB file).
            Default = ``"quarantine"``.
        verify (str): How a checkpoint is checked before the run resumes from it. ``structure`` reads the end of a
            monolithic file (torch's zip central directory, written last) and the CRC of its small ``data.pkl``
            record, and for a sharded folder its ``.metadata`` and the size of every shard file it names: a few KB,
            exact for a write cut short by a kill. ``full`` also reads every record of a monolithic file and checks
            its CRC32 (reads the whole file; also catches a file whose size is right but whose pages never reached
            the disk before a power loss). Default = ``"structure"``.
        exit_if_finished (bool): When the checkpoint the run resumes from is already at ``max_duration`` (a kill
            after the final checkpoint), end every rank with exit status 0 and one line, instead of letting
            ``Trainer.fit()`` raise "No training would occur". Set ``false`` if your code calls
            ``Trainer.fit(duration=...)`` or ``fit(reset_time=True)`` to train further. Default = ``true``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    quarantine_folder: str = Field(default="quarantine", description="where incomplete ones go")
    verify: Literal["structure", "full"] = Field(default="structure", description="structure: a few KB; full: all")
    exit_if_finished: StrictBool = Field(default=True, description="exit 0 when the checkpoint is at max_duration")

    @field_validator("quarantine_folder")
    @classmethod
    def _relative_inside(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not value.strip() or path.is_absolute() or ".." in path.parts or value.startswith("~") or "://" in value:
            raise ValueError("relative folder")
        return value


def validate_config(kwargs: dict[str, Any]) -> CheckpointGuardConfig:
    """Return the validated config, or raise :class:`ConfigError` with one line per problem.

    Raises:
        ConfigError: ``callbacks.checkpoint_guard.<key>: <problem>; <allowed>`` (several problems: one line each).
    """
    try:
        return CheckpointGuardConfig(**kwargs)
    except ValidationError as e:
        lines = [_line(error, kwargs) for error in e.errors()]
    first_field, _, first_message = lines[0].partition(": ")
    raise ConfigError(first_field, "\n".join([first_message, *lines[1:]]))


def _line(error: Any, kwargs: dict[str, Any]) -> str:
    key = str(error["loc"][0]) if error["loc"] else ""
    field = f"{FIELD}.{key}" if key else FIELD
    names = list(CheckpointGuardConfig.model_fields)
    value = kwargs.get(key)
    if error["type"] == "extra_forbidden":
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"{field}: unknown key{hint}; allowed keys: {', '.join(names)}"
    if key == "verify":
        return f"{field}: {value!r} is not allowed; allowed: structure, full"
    if key == "exit_if_finished":
        return f"{field}: {value!r} is not a boolean; expected true or false"
    if key == "quarantine_folder":
        return (
            f"{field}: {value!r} is not allowed; expected a relative folder inside save_folder without '..' "
            "(the move must be a rename on the same filesystem), e.g. quarantine"
        )
    return f"{field}: {value!r}: {error['msg']}"
