"""The keys of this package's callbacks, one config model each (no Composer, no torch).

``callbacks.reduce_lr_on_plateau`` and ``callbacks.schedule_resume_check`` take no keys; for
``callbacks.checkpoint_guard``
a wrong key or value is reported as one line per problem that names the YAML field, the value and what is allowed::

    callbacks.checkpoint_guard.verfy: unknown key (did you mean 'verify'?); allowed keys: quarantine_folder, verify, ...
    callbacks.checkpoint_guard.verify: 'crc' is not allowed; allowed: structure, full
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from foundry_ext.config.base import ConfigModel
from foundry_ext.config.errors import ConfigError

__all__ = [
    "FIELD",
    "SPIKE_FIELD",
    "UNCHECKED_SUFFIXES",
    "CheckpointGuardConfig",
    "PlateauCallbackKeys",
    "ResumeCheckKeys",
    "SpikeDataSkip",
    "SpikeGuardConfig",
    "SpikeRollback",
]

FIELD = "callbacks.checkpoint_guard"
#: ``save_filename`` endings the guard cannot check (compressed or tar checkpoints): refused before anything is built
UNCHECKED_SUFFIXES = (".tar", ".tgz", ".gz", ".bz2", ".lzma", ".lz4", ".lzo", ".xz", ".zst")
_NAME_MAX = 255  # bytes in one file name (Linux, macOS)
_PATH_MAX = 1024  # bytes in the whole relative path: far below PATH_MAX once save_folder is prefixed


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
        stale_after (float): Seconds without a heartbeat after which the run that owns ``save_folder`` (its
            ownership record, :mod:`foundry_ext.checkpoint.owner`) is taken to be gone and a new run
            takes the folder over. On the owner's own host its released lock says so at once. Default = ``300``.
        heartbeat_interval (float): Seconds between two renewals of the owner's heartbeat; at most a third of
            ``stale_after``. Default = ``30``.
    """

    quarantine_folder: str = Field(
        default="quarantine",
        description="where incomplete checkpoints are moved, relative to save_folder",
        json_schema_extra={"x-allowed": "a plain relative folder name inside save_folder, no '.' or '..' parts"},
    )
    verify: Literal["structure", "full"] = Field(
        default="structure", description="structure: a few KB of each checkpoint; full: every byte's CRC"
    )
    exit_if_finished: bool = Field(default=True, description="exit 0 when the checkpoint is already at max_duration")
    stale_after: float = Field(
        default=300.0,
        gt=0,
        allow_inf_nan=False,
        description="seconds without a heartbeat after which the run owning save_folder is taken to be gone",
    )
    heartbeat_interval: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description="seconds between two heartbeats of the run owning save_folder",
    )

    @field_validator("quarantine_folder")
    @classmethod
    def _relative_inside(cls, value: str) -> str:
        path = PurePosixPath(value)
        plain = (
            value.strip() == value
            and value
            and all(c.isprintable() and c != "\\" for c in value)
            and not path.is_absolute()
            and not value.startswith("~")
            and "://" not in value
            and all(part not in (".", "..") for part in value.split("/"))
            and all(0 < len(part.encode()) <= _NAME_MAX for part in value.rstrip("/").split("/"))
            and len(value.encode()) <= _PATH_MAX
        )
        if not plain:
            raise ValueError(
                f"{value!r} is not allowed; expected a plain relative folder name inside save_folder (printable, no "
                f"'.' or '..' parts, at most {_NAME_MAX} bytes per part; the move must be a rename on the same "
                "filesystem), e.g. quarantine"
            )
        return value

    @model_validator(mode="after")
    def _heartbeat_within_timeout(self) -> CheckpointGuardConfig:
        if self.heartbeat_interval * 3 > self.stale_after:
            raise ValueError(
                f"heartbeat_interval {self.heartbeat_interval:g} s is more than a third of stale_after "
                f"{self.stale_after:g} s; a live run could be taken for gone between two heartbeats"
            )
        return self


class PlateauCallbackKeys(ConfigModel):
    """``callbacks.reduce_lr_on_plateau``: takes no keys; the plateau is configured under ``scheduler:``."""

    no_keys_hint: ClassVar[str] = (
        "the callback takes no keys: configure the plateau under scheduler: (name: reduce_lr_on_plateau)"
    )


class ResumeCheckKeys(ConfigModel):
    """``callbacks.schedule_resume_check`` (this package's schedulers attach it themselves, with the defaults)."""

    reset_lr: bool = Field(
        False,
        description="on resume, train at this config's optimizer.lr: sets the param groups' lr and initial_lr and "
        "the LambdaLR's base_lrs (else the checkpoint's are kept, with a warning)",
    )


SPIKE_FIELD = "callbacks.spike_guard"
_MAX_WINDOW = 100_000  # steps (OLMo-core's window is 128); shown whole in the messages, as 1e+06 would not be


class SpikeRollback(ConfigModel):
    """``callbacks.spike_guard.rollback``: what to write when the guard stops the run.

    Args:
        skip_batches (int): Data batches skipped after the last batch the stopped run read, on top of those it read
            since the checkpoint. Default = ``0``.
        save_folder (str, optional): The continuation's ``save_folder``; ``null`` is the run's own with
            ``-rollback-ba<B>`` appended (B the batch of the checkpoint it starts from). Default = ``null``.
    """

    skip_batches: int = Field(
        default=0, ge=0, description="data batches skipped after the last batch the stopped run read"
    )
    save_folder: str | None = Field(
        default=None,
        description="the continuation's save_folder; null: the run's own + '-rollback-ba<B>' (B: its checkpoint)",
    )


class SpikeDataSkip(ConfigModel):
    """``callbacks.spike_guard.skip_data``: skip data batches once, when the run starts from batch ``at_batch``.

    Written by a rollback into the continuation (a StreamingDataset, llm-foundry's text loader, is required).

    Args:
        at_batch (int): The batch of the checkpoint the continuation loads; the skip applies only to that load.
        batches (int): How many data batches to skip there.
    """

    at_batch: int = Field(ge=0, description="the batch of the loaded checkpoint the skip applies to")
    batches: int = Field(ge=1, description="data batches to skip when the run starts from at_batch")


class SpikeGuardConfig(ConfigModel):
    """``callbacks.spike_guard`` in a train YAML: skip a spiking step on every rank, stop or roll back a burst.

    Args:
        threshold (float): Skip a step whose loss (or gradient norm) is more than ``threshold`` sample standard
            deviations above the mean of the last ``window`` accepted steps. Default = ``6`` (OLMo-core's).
        window (int): Accepted steps the mean and standard deviation are taken over. Default = ``128``.
        min_history (int): Accepted steps needed before a step can be skipped for its z-score. Default = ``64``.
        grad_norm (bool): Also test the gradient norm (before clipping). Default = ``false``: on clean data the
            gradient norm's z-score went above 6 in 4 of 4,800 steps where the loss's never passed 2
            (docs/benchmarks.md section 12).
        max_skips (int): Consecutive skips after which the run stops (and rolls back, if asked). Default = ``10``.
        ceiling (float, optional): A training loss above this stops the run at once. Default = ``null`` (none).
        rollback (SpikeRollback, optional): Write the continuation when the run stops. Default = ``null``.
        skip_data (SpikeDataSkip, optional): Skip data batches once after a load (written by a rollback).
            Default = ``null``.
    """

    threshold: float = Field(
        default=6.0, gt=0, allow_inf_nan=False, description="standard deviations above the window's mean that skip"
    )
    # bounded: the window is a deque of that many steps (2**63 was an OverflowError once the run started)
    window: int = Field(
        default=128, ge=2, le=_MAX_WINDOW, description="accepted steps the mean and standard deviation cover"
    )
    min_history: int = Field(
        default=64, ge=2, le=_MAX_WINDOW, description="accepted steps needed before a z-score can skip"
    )
    grad_norm: bool = Field(default=False, description="also test the gradient norm (before clipping)")
    max_skips: int = Field(default=10, ge=1, description="consecutive skips after which the run stops")
    ceiling: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="a training loss above it stops the run at once"
    )
    rollback: SpikeRollback | None = Field(
        default=None, description="write the continuation YAML when the run stops: {skip_batches, save_folder}"
    )
    skip_data: SpikeDataSkip | None = Field(
        default=None, description="skip data batches once after loading batch at_batch (written by a rollback)"
    )

    @model_validator(mode="after")
    def _window_holds_history(self) -> SpikeGuardConfig:
        if self.window < self.min_history:
            raise ConfigError(
                "window",
                f"{self.window} is smaller than min_history {self.min_history}; allowed: window >= min_history (the "
                "window must hold the history a z-score needs)",
            )
        return self


INJECT_FIELD = "callbacks.inject_bad_batches"


class InjectBadBatchesConfig(ConfigModel):
    """``callbacks.inject_bad_batches``: spoil chosen batches on purpose, to watch ``spike_guard`` act.

    A demonstration and test tool (:class:`foundry_ext.trainer.spike_guard.inject.InjectBadBatches`), never for a real
    run: the batches ``at`` are replaced, before the forward pass, by uniform random tokens.

    Args:
        at (list[int]): The batches to spoil, 0-indexed (the ``spike_guard`` lines count them from 1).
        vocab_size (int): Random tokens are drawn from ``[0, vocab_size)``: at most the model's vocabulary.
            Default = ``512`` (the demo tokenizer's).
        seed (int): Seed of the random tokens (each batch's from ``seed`` and its index). Default = ``0``.
        shift (float): Added to the targets of a batch that is an ``(inputs, targets)`` pair (not an LM batch).
            Default = ``100``.
    """

    at: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=1, max_length=_MAX_WINDOW, description="0-indexed batches to replace by random tokens"
    )
    vocab_size: int = Field(default=512, ge=1, description="random tokens are drawn from [0, vocab_size)")
    seed: int = Field(default=0, ge=0, le=_MAX_WINDOW, description="seed of the random tokens")
    shift: float = Field(
        default=100.0, allow_inf_nan=False, description="added to the targets of an (inputs, targets) batch"
    )
