"""Read an llm-foundry train YAML the way ``train.py`` does, and what the schedule needs from it: the run's clock.

``train_from_yaml`` does: ``om.load`` the file, ``om.merge`` it with ``om.from_cli(overrides)``, then ``train()``
imports ``code_paths`` and resolves every ``${...}`` interpolation (``om.to_container(cfg, resolve=True)``). This
module repeats exactly those steps, and reads the run length and batch size (``max_duration``,
``global_train_batch_size``, ``max_seq_len``, and the batches per epoch of a local MDS dataset) without importing
torch, Composer or llm-foundry (only ``code_paths`` needs llm-foundry's registry).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from foundry_ext.config.durations import MAX_COUNT, Duration, DurationError, UnknownBatchesPerEpoch, parse
from foundry_ext.config.errors import ConfigError

__all__ = [
    "RunClock",
    "drop_null_scheduler_keys",
    "error_message",
    "load_train_config",
    "max_duration",
    "optimizer_lr",
    "read_train_yaml",
    "run_clock",
    "summarize",
]


def error_message(error: BaseException) -> str:
    """An exception as one line: its message with newlines folded, or its type when it has none."""
    text = " ".join(str(error).split())
    if isinstance(error, KeyError) and error.args:
        text = f"missing key {error.args[0]!r}"
    return text or type(error).__name__


def summarize(kwargs: Mapping[str, Any], limit: int = 110) -> str:
    """A scheduler block's keys as ``k=v, ...`` (nested blocks as ``name(k=v)``), cut at ``limit`` characters."""

    def show(value: Any) -> str:
        if isinstance(value, Mapping):
            inner = {k: v for k, v in value.items() if k != "name"}
            return f"{value.get('name', '')}({summarize(inner, limit=10_000)})"
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(show(v) for v in value) + "]"
        return str(value)

    text = ", ".join(f"{k}={show(v)}" for k, v in kwargs.items() if k != "name")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_train_yaml(path: str) -> Any:
    """The train YAML ``path`` as OmegaConf reads it (``train_from_yaml``'s ``om.load``): a ``DictConfig``.

    What ``validate`` says about a file that is not a train YAML, ``train.py`` says too, before llm-foundry reads it:
    a folder, a missing file, invalid YAML (a key given twice, say), values nested too deep, not a mapping.

    Raises:
        ConfigError: one line (field ``""``) that names the file and what is wrong with it.
    """
    from omegaconf import DictConfig, OmegaConf

    def fail(message: str) -> ConfigError:
        return ConfigError("", message)

    if os.path.isdir(path):
        raise fail(f"{path}: is a folder, expected a train YAML file")
    if not os.path.exists(path):
        raise fail(f"{path}: no such file")
    try:
        with open(path) as f:
            cfg = OmegaConf.load(f)
    except UnicodeDecodeError as e:  # in the project's words, not "'utf-8' codec can't decode byte 0xe9 in position"
        raise fail(
            f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); a train YAML is UTF-8"
        ) from None
    except OSError as e:
        raise fail(f"{path}: cannot read: {error_message(e)}") from None
    except Exception as e:  # yaml.YAMLError and OmegaConf's own errors: both mean "not a valid YAML config"
        if _too_deep(e):
            key, line = _deepest(path)
            key = key or str(getattr(e, "full_key", "") or "").split("[")[0].split(".")[0]
            where = (f" under {key!r}" if key else "") + (f" (line {line})" if line else "")
            raise fail(
                f"{path}: invalid YAML: values nested too deep{where} (hundreds of levels; a train config nests a few)"
            ) from None
        raise fail(f"{path}: invalid YAML: {error_message(e)}") from None
    if not isinstance(cfg, DictConfig):
        raise fail(f"{path}: expected a mapping of train settings at the top level, got {type(cfg).__name__}")
    return cfg


def load_train_config(path: str, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """Load ``path``, merge ``key=value`` overrides, import ``code_paths`` and resolve interpolations.

    Raises:
        ConfigError: one line (field ``""``) that says what is wrong with the file or an override.
    """
    from omegaconf import ListConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    def fail(message: str) -> ConfigError:
        return ConfigError("", message)

    OmegaConf.clear_resolver("oc.env")  # train_from_yaml does this: ${oc.env:...} is not available to train YAMLs
    cfg = read_train_yaml(path)
    for item in overrides:
        if "=" not in item:
            raise fail(f"override {item!r}: expected key=value, e.g. max_duration=1000ba")
    if overrides:
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_cli(list(overrides)))
        except Exception as e:  # OmegaConf reports a bad dotted key or value as various error types
            raise fail(f"overrides {' '.join(overrides)}: {error_message(e)}") from None
    code_paths = cfg.get("code_paths", None)
    if code_paths is not None and not (
        isinstance(code_paths, ListConfig) and all(isinstance(p, str) for p in code_paths)
    ):
        shown = OmegaConf.to_container(code_paths) if isinstance(code_paths, ListConfig) else code_paths
        raise ConfigError(  # llm-foundry iterates it: an int is a TypeError, a string imports each of its letters
            "code_paths", f"{shown!r} is not a list of Python files; expected e.g. code_paths: [my_scheduler.py]"
        )
    for code_path in code_paths or []:  # custom schedulers register themselves on import
        from llmfoundry.utils.registry_utils import import_file

        try:
            import_file(code_path)
        except Exception as e:
            raise fail(f"code_paths: cannot import {code_path}: {error_message(e)}") from None
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__  # later lines repeat full_key, object_type
        # OmegaConf names the Python exception it caught ("TypeError raised while resolving interpolation: ...")
        first = re.sub(r"^\w+Error raised while resolving interpolation: ", "interpolation: ", first)
        raise ConfigError(key or "", f"cannot resolve: {first}") from None
    assert isinstance(resolved, dict)
    return drop_null_scheduler_keys({str(k): v for k, v in resolved.items()})


def drop_null_scheduler_keys(cfg: dict[str, Any]) -> dict[str, Any]:
    """Remove the ``scheduler`` block's keys whose value is null (in place; ``cfg`` is returned): a null key is unset.

    OmegaConf merges an override into the file's block, so ``scheduler={name: reduce_lr_on_plateau}`` over a file
    with another scheduler keeps that scheduler's keys; ``scheduler={name: reduce_lr_on_plateau, t_decay: null}``
    clears one. The tools (through :func:`load_train_config`) and training (through the pre-flight config transform)
    both drop them, so the switch works the same everywhere.
    """
    block = cfg.get("scheduler")
    if isinstance(block, dict):
        for key in [k for k, v in block.items() if v is None and k != "name"]:
            del block[key]
    return cfg


def _deepest(path: str, limit: int = 100) -> tuple[str, int]:
    """The top-level key and the line at which ``path``'s values first nest ``limit`` levels deep ("", 0 if never).

    PyYAML's event parser keeps a stack of its own (no recursion), so it walks a file that its composer, and
    OmegaConf's, cannot build.
    """
    import yaml

    depth, key, expect_key = 0, "", False
    try:
        with open(path) as f:
            for event in yaml.parse(f):
                if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                    depth += 1
                    if depth > limit:
                        return key, event.start_mark.line + 1
                    expect_key = isinstance(event, yaml.MappingStartEvent) and depth == 1
                elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                    depth -= 1
                    expect_key = depth == 1
                elif depth == 1 and isinstance(event, yaml.ScalarEvent):
                    if expect_key:
                        key = event.value
                    expect_key = not expect_key
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        pass
    return key, 0


def _too_deep(error: BaseException) -> bool:
    """Whether loading failed on Python's recursion limit (OmegaConf wraps the RecursionError, or names it)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, RecursionError) or "maximum recursion depth" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def max_duration(cfg: Mapping[str, Any]) -> Duration:
    """``max_duration`` as a :class:`Duration` in ``ba``, ``ep``, ``sp`` or ``tok`` (a bare int means epochs)."""
    value = cfg.get("max_duration")
    if value is None:
        raise ConfigError(
            "max_duration",
            "missing; the schedule needs the training length, e.g. max_duration: 10000ba (or pass max_duration=10000ba "
            "after the YAML)",
        )
    if isinstance(value, int) and not isinstance(value, bool):
        value = f"{value}ep"  # Time.from_input(value, TimeUnit.EPOCH), as the Trainer does
    if not isinstance(value, str):
        raise ConfigError("max_duration", f"{value!r} is not a duration; expected e.g. 10000ba, 2ep, 2e9tok")
    try:
        time = parse(value)
    except DurationError as e:
        raise ConfigError("max_duration", str(e)) from None
    if time.unit == "dur":
        raise ConfigError("max_duration", f"{value!r}: 'dur' is relative to max_duration itself; use ba, ep, sp or tok")
    if time.value <= 0:
        raise ConfigError("max_duration", f"{value!r} must be > 0")
    return time


def optimizer_lr(cfg: Mapping[str, Any]) -> float | None:
    """``optimizer.lr``, or None when the config does not set it."""
    optimizer = cfg.get("optimizer")
    lr = optimizer.get("lr") if isinstance(optimizer, Mapping) else None
    if lr is None:
        return None
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr):
        raise ConfigError("optimizer.lr", f"{lr!r} is not a number")
    return float(lr)


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class RunClock:
    """A run's length and how one batch maps to samples, tokens and epochs (``None``: not known)."""

    max_duration: Duration
    samples_per_batch: int | None = None
    tokens_per_batch: int | None = None
    batches_per_epoch: int | None = None
    notes: tuple[str, ...] = ()  # where the numbers came from

    def per_batch(self, unit: str) -> int | None:
        """How many ``unit`` one batch is (``ba``: 1)."""
        return {"ba": 1, "sp": self.samples_per_batch, "tok": self.tokens_per_batch, "ep": None}.get(unit)

    def batches(self, value: int | float, unit: str) -> int:
        """The first timestamp (batches done) at which ``value`` ``unit`` have been reached.

        Raises:
            UnknownBatchesPerEpoch: ``unit`` is epochs and the batches per epoch are not known.
            ConfigError: the batch size in ``unit`` is not known.
        """
        if unit == "ep":
            if not self.batches_per_epoch:
                raise UnknownBatchesPerEpoch(f"{value}ep: the batches per epoch are not known (--batches-per-epoch N)")
            return int(value * self.batches_per_epoch)
        per = self.per_batch(unit)
        if not per:
            name = {"sp": "samples", "tok": "tokens"}[unit]
            raise ConfigError("", f"{value}{unit}: the {name} per batch are not known (--{name}-per-batch N)")
        return math.ceil(value / per)  # the Trainer stops after the batch that reaches it

    @property
    def total_batches(self) -> int:
        """Batches the run trains: 0-indexed batches ``0 .. total_batches - 1``."""
        return self.batches(self.max_duration.value, self.max_duration.unit)

    def now(self, batch: int, unit: str) -> int:
        """The timestamp in ``unit`` after ``batch`` batches (a constant batch size assumed)."""
        if unit == "ba":
            return batch
        per = self.per_batch(unit)
        if per is None:
            raise ConfigError("", f"the {unit} per batch are not known")
        return batch * per


def run_clock(
    cfg: Mapping[str, Any],
    *,
    batches_per_epoch: int | None = None,
    samples_per_batch: int | None = None,
    tokens_per_batch: int | None = None,
    world_size: int = 1,
) -> RunClock:
    """The clock of a train config: ``max_duration``, batch size, tokens per batch and batches per epoch.

    The options override what the YAML says. Tokens per batch assume full-length sequences
    (``global_train_batch_size x max_seq_len``). Batches per epoch come from the local MDS index of
    ``train_loader.dataset`` when there is one (``len`` of the dataloader as Composer counts it with ``world_size``
    ranks), else from ``batches_per_epoch``, else stay unknown.
    """
    md = max_duration(cfg)
    notes = []
    raw = cfg.get("global_train_batch_size")
    gbs = _positive_int(raw)
    if raw is not None and gbs is None:  # else validate said OK and plot refused ('tokens per batch not known')
        raise ConfigError(
            "global_train_batch_size",
            f"{repr(raw)[:100]} is not allowed; expected a whole number >= 1 (the samples of one batch, over every "
            "rank)",
        )
    spb = samples_per_batch or gbs
    tpb = tokens_per_batch
    if tpb is None:
        seq_len, source = _max_seq_len(cfg)
        if gbs and seq_len:
            tpb = gbs * seq_len
            if tpb > MAX_COUNT:  # the clock counts tokens in 64-bit integers (numpy, Composer's Timestamp)
                raise ConfigError(
                    "global_train_batch_size",
                    f"{gbs} samples of {seq_len} tokens is {tpb} tokens a batch; expected at most 2**53 ({MAX_COUNT}) "
                    "tokens",
                )
            notes.append(
                f"1 batch = {gbs} samples = {tpb} tokens (global_train_batch_size {gbs} x {source} {seq_len}; "
                "assumes every sequence is max_seq_len long)"
            )
    bpe = batches_per_epoch
    if bpe is None and gbs:
        found = mds_batches_per_epoch(cfg, gbs, world_size)
        if found is not None:
            bpe, where = found
            notes.append(f"1 epoch = {bpe} batches ({where})")
    return RunClock(md, spb, tpb, bpe, tuple(notes))


def _max_seq_len(cfg: Mapping[str, Any]) -> tuple[int | None, str]:
    variables = cfg.get("variables") if isinstance(cfg.get("variables"), Mapping) else {}
    model = cfg.get("model") if isinstance(cfg.get("model"), Mapping) else {}
    for where, value in (
        ("max_seq_len", cfg.get("max_seq_len")),
        ("variables.max_seq_len", variables.get("max_seq_len")),
        ("model.max_seq_len", model.get("max_seq_len")),
    ):
        if _positive_int(value):
            return value, where
    return None, ""


def mds_batches_per_epoch(cfg: Mapping[str, Any], global_batch: int, world_size: int = 1) -> tuple[int, str] | None:
    """Batches per epoch of a ``text`` train loader reading a local MDS dataset, or None when not knowable here.

    Streaming gives each of ``world_size`` ranks ``ceil(samples / world_size)`` samples (it repeats a few to even them
    out); a rank's dataloader has ``floor`` (``drop_last: true``) or ``ceil`` of that over its batch size.
    """
    loader = cfg.get("train_loader")
    dataset = loader.get("dataset") if isinstance(loader, Mapping) else None
    if not isinstance(dataset, Mapping) or not isinstance(dataset.get("local"), str) or dataset.get("remote"):
        return None
    split = dataset.get("split")
    if split is not None and not isinstance(split, str):  # llm-foundry refuses it; not a folder to look in here
        return None
    index = os.path.join(dataset["local"], split or "", "index.json")
    try:
        with open(index) as f:
            samples = sum(int(shard["samples"]) for shard in json.load(f)["shards"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if world_size < 1 or global_batch % world_size:
        return None
    per_rank = math.ceil(samples / world_size)
    device_batch = global_batch // world_size
    drop_last = loader.get("drop_last", True) is not False
    batches = per_rank // device_batch if drop_last else math.ceil(per_rank / device_batch)
    return batches, f"{samples} samples in {index} / global_train_batch_size {global_batch}"
