"""Load a train YAML the way llm-foundry's ``train.py`` does, and pull out what the schedule tools need.

``train_from_yaml`` does: ``om.load`` the file, ``om.merge`` it with ``om.from_cli(overrides)``, then ``train()``
imports ``code_paths`` and resolves every ``${...}`` interpolation with ``om.to_container(cfg, resolve=True)``
(inside ``make_dataclass_and_log_config``) before applying the registered config transforms. This module repeats
exactly those steps and nothing that needs a model, data or a GPU.

Every error here is a :class:`~foundry_ext.cli.UsageError` with one line that names the YAML field, so ``plot``
stops at the first one and ``validate`` collects them.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from typing import Any

from foundry_ext.cli import UsageError

__all__ = [
    "build_scheduler",
    "load_train_config",
    "max_duration",
    "one_line",
    "optimizer_lr",
    "samples_per_batch",
    "scheduler_spec",
    "summarize",
    "tokens_per_batch",
]


def one_line(error: BaseException) -> str:
    """An exception as one line: its message with newlines folded, or its type when it has none."""
    text = " ".join(str(error).split())
    if isinstance(error, KeyError) and error.args:
        text = f"missing key {error.args[0]!r}"
    return text or type(error).__name__


def load_train_config(path: str, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """Load ``path``, merge ``key=value`` overrides, import ``code_paths`` and resolve interpolations.

    Returns:
        The resolved config as plain dicts and lists, as ``train()`` sees it before building anything.
    """
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a folder, expected a train YAML file")
    OmegaConf.clear_resolver("oc.env")  # train_from_yaml does this: ${oc.env:...} is not available to train YAMLs
    try:
        with open(path) as f:
            cfg = OmegaConf.load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read: {one_line(e)}") from None
    except Exception as e:  # yaml.YAMLError and OmegaConf's own errors: both mean "not a valid YAML config"
        raise UsageError(f"{path}: invalid YAML: {one_line(e)}") from None
    if not isinstance(cfg, DictConfig):
        raise UsageError(f"{path}: expected a mapping of train settings at the top level, got a list")
    for item in overrides:
        if "=" not in item:
            raise UsageError(f"override {item!r}: expected key=value, e.g. max_duration=1000ba")
    if overrides:
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_cli(list(overrides)))
        except Exception as e:  # OmegaConf reports a bad dotted key or value as various error types
            raise UsageError(f"overrides {' '.join(overrides)}: {one_line(e)}") from None
    for code_path in cfg.get("code_paths", None) or []:  # custom schedulers register themselves on import
        from llmfoundry.utils.registry_utils import import_file

        try:
            import_file(code_path)
        except Exception as e:
            raise UsageError(f"code_paths: cannot import {code_path}: {one_line(e)}") from None
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__  # later lines repeat full_key, object_type
        raise UsageError(f"{key + ': ' if key else ''}cannot resolve: {first}") from None
    assert isinstance(resolved, dict)
    return {str(k): v for k, v in resolved.items()}


def apply_transforms(cfg: dict[str, Any]) -> dict[str, Any]:
    """Apply llm-foundry's registered config transforms (``update_batch_size_info``), as ``train()`` does."""
    from llmfoundry.utils.config_utils import apply_transforms_to_config

    try:
        return apply_transforms_to_config(dict(cfg), "all")
    except Exception as e:
        raise UsageError(f"llm-foundry's config transforms failed (batch size settings): {one_line(e)}") from None


def max_duration(cfg: Mapping[str, Any]) -> Any:
    """``max_duration`` as a Composer :class:`~composer.core.Time` in ``ba``, ``ep``, ``sp`` or ``tok``."""
    from composer.core import Time, TimeUnit

    if cfg.get("max_duration") is None:
        raise UsageError(
            "max_duration: missing; the schedule needs the training length, e.g. max_duration: 10000ba "
            "(or pass max_duration=10000ba after the YAML)"
        )
    value = cfg["max_duration"]
    try:
        time = Time.from_input(value, TimeUnit.EPOCH)  # a bare int means epochs, as in the Trainer
    except (ValueError, TypeError, KeyError):
        raise UsageError(f"max_duration: {value!r} is not a duration; expected e.g. 10000ba, 2ep, 2e9tok") from None
    if time.unit not in (TimeUnit.BATCH, TimeUnit.EPOCH, TimeUnit.SAMPLE, TimeUnit.TOKEN):
        raise UsageError(f"max_duration: {value!r}: unit {time.unit.value!r} cannot be plotted; use ba, ep, sp or tok")
    if time.value <= 0:
        raise UsageError(f"max_duration: {value!r} must be > 0")
    return time


def scheduler_spec(cfg: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The ``scheduler`` block as ``(name, kwargs)``, with a registered name."""
    from llmfoundry import registry

    block = cfg.get("scheduler")
    if block is None:
        raise UsageError("scheduler: missing; add e.g. scheduler: {name: warmup_stable_decay, t_warmup: 100ba}")
    if not isinstance(block, Mapping) or not block.get("name"):
        raise UsageError("scheduler.name: missing; expected a block with a name, e.g. {name: cosine_with_warmup}")
    kwargs = dict(block)
    name = str(kwargs.pop("name"))
    names = sorted(registry.schedulers.get_all())
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise UsageError(
            f"scheduler.name: {name!r} is not a registered scheduler{hint} (`foundry-ext schedulers` lists all)"
        )
    return name, kwargs


def build_scheduler(name: str, kwargs: Mapping[str, Any]) -> Any:
    """Build the scheduler through llm-foundry's registry, as ``train()`` does, with one-line errors."""
    from llmfoundry import registry
    from llmfoundry.utils.builders import build_scheduler as foundry_build

    from foundry_ext._config import ConfigError, check_keys

    try:
        check_keys(registry.schedulers.get(name), dict(kwargs), "scheduler")  # llm-foundry's own do not check keys
        return foundry_build(name, dict(kwargs))
    except ConfigError as e:
        raise UsageError(one_line(e)) from None
    except Exception as e:
        raise UsageError(f"scheduler ({name}): {type(e).__name__}: {one_line(e)}") from None


def optimizer_lr(cfg: Mapping[str, Any]) -> float | None:
    """``optimizer.lr``, or None when the config does not set it."""
    optimizer = cfg.get("optimizer")
    lr = optimizer.get("lr") if isinstance(optimizer, Mapping) else None
    if lr is None:
        return None
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr):
        raise UsageError(f"optimizer.lr: {lr!r} is not a number")
    return float(lr)


def samples_per_batch(cfg: Mapping[str, Any]) -> int | None:
    """``global_train_batch_size``: samples per optimizer step, or None when not set."""
    value = cfg.get("global_train_batch_size")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def tokens_per_batch(cfg: Mapping[str, Any]) -> tuple[int | None, str]:
    """Tokens per batch, assuming every sequence is ``max_seq_len`` long, and where the numbers came from."""
    batch = samples_per_batch(cfg)
    seq_len, source = None, ""
    variables = cfg.get("variables") if isinstance(cfg.get("variables"), Mapping) else {}
    model = cfg.get("model") if isinstance(cfg.get("model"), Mapping) else {}
    for where, value in (
        ("max_seq_len", cfg.get("max_seq_len")),
        ("variables.max_seq_len", variables.get("max_seq_len")),
        ("model.max_seq_len", model.get("max_seq_len")),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            seq_len, source = value, where
            break
    if batch is None or seq_len is None:
        return None, ""
    return batch * seq_len, f"global_train_batch_size {batch} x {source} {seq_len}"


def summarize(kwargs: Mapping[str, Any], limit: int = 110) -> str:
    """The given scheduler parameters as ``k=v, ...`` (nested blocks as ``name(k=v)``), cut at ``limit``."""

    def show(value: Any) -> str:
        if isinstance(value, Mapping):
            inner = {k: v for k, v in value.items() if k != "name"}
            return f"{value.get('name', '')}({summarize(inner, limit=10_000)})"
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(show(v) for v in value) + "]"
        return str(value)

    text = ", ".join(f"{k}={show(v)}" for k, v in kwargs.items())
    return text if len(text) <= limit else text[: limit - 3] + "..."
