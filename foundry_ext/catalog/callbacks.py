"""The keys of this package's callbacks, one config model each (no Composer, no torch).

``callbacks.reduce_lr_on_plateau`` and ``callbacks.schedule_resume_check`` take no keys; for
``callbacks.checkpoint_guard``
a wrong key or value is reported as one line per problem that names the YAML field, the value and what is allowed::

    callbacks.checkpoint_guard.verfy: unknown key (did you mean 'verify'?); allowed keys: quarantine_folder, verify, ...
    callbacks.checkpoint_guard.verify: 'crc' is not allowed; allowed: structure, full
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from foundry_ext.config.base import ConfigModel

__all__ = ["FIELD", "CheckpointGuardConfig", "PlateauCallbackKeys", "ResumeCheckKeys"]

FIELD = "callbacks.checkpoint_guard"


class CheckpointGuardConfig(ConfigModel):
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

    quarantine_folder: str = Field(
        default="quarantine",
        description="where incomplete checkpoints are moved, relative to save_folder",
        json_schema_extra={"x-allowed": "a relative folder inside save_folder, without '..'"},
    )
    verify: Literal["structure", "full"] = Field(
        default="structure", description="structure: a few KB of each checkpoint; full: every byte's CRC"
    )
    exit_if_finished: bool = Field(default=True, description="exit 0 when the checkpoint is already at max_duration")

    @field_validator("quarantine_folder")
    @classmethod
    def _relative_inside(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not value.strip() or path.is_absolute() or ".." in path.parts or value.startswith("~") or "://" in value:
            raise ValueError(
                f"{value!r} is not allowed; expected a relative folder inside save_folder without '..' (the move must "
                "be a rename on the same filesystem), e.g. quarantine"
            )
        return value


class PlateauCallbackKeys(ConfigModel):
    """``callbacks.reduce_lr_on_plateau``: takes no keys; the plateau is configured under ``scheduler:``."""

    no_keys_hint: ClassVar[str] = (
        "the callback takes no keys: configure the plateau under scheduler: (name: reduce_lr_on_plateau)"
    )


class ResumeCheckKeys(ConfigModel):
    """``callbacks.schedule_resume_check``: takes no keys (this package's schedulers attach it themselves)."""

    no_keys_hint: ClassVar[str] = "the callback takes no keys: list it as schedule_resume_check: {}"
