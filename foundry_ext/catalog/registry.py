"""Every ``scheduler.name`` and callback name whose keys this package knows, without importing llm-foundry.

* this package's schedulers (registered through the ``llmfoundry_schedulers`` entry-point group: pyproject.toml;
  ``tests/catalog/test_entry_points.py`` checks the two lists agree);
* llm-foundry 0.22's four built-in schedulers, modelled so that their blocks are validated too (the test checks their
  keys and defaults against the installed classes);
* this package's callbacks, and the names of llm-foundry's built-in callbacks with their keys
  (:data:`FOUNDRY_CALLBACKS`, checked against llm-foundry's registry by a test), so that ``foundry-ext validate``
  checks a ``callbacks:`` block without importing llm-foundry (10 s).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from foundry_ext.catalog.callbacks import (
    CheckpointGuardConfig,
    InjectBadBatchesConfig,
    PlateauCallbackKeys,
    ResumeCheckKeys,
    SpikeGuardConfig,
)
from foundry_ext.config.base import ConfigModel, build
from foundry_ext.config.errors import ConfigError, Problem, join_path
from foundry_ext.schedules.base import ScheduleModel
from foundry_ext.schedules.batch_size import BatchSizeSchedule

__all__ = [
    "CALLBACK_MODELS",
    "FOUNDRY_CALLBACKS",
    "SCHEDULE_MODELS",
    "foreign_callback_names",
    "foreign_scheduler_names",
    "validate_block",
]


def _schedule_models() -> dict[str, type[ScheduleModel]]:
    from foundry_ext.schedules.composer import COMPOSER_MODELS, FOUNDRY_MODELS
    from foundry_ext.schedules.inverse_sqrt import InverseSqrt
    from foundry_ext.schedules.plateau import ReduceLROnPlateau
    from foundry_ext.schedules.power import Power
    from foundry_ext.schedules.stages import Stages
    from foundry_ext.schedules.torch import TorchLR
    from foundry_ext.schedules.wsd import WarmupStableDecay
    from foundry_ext.schedules.wsd_periods import WSDPeriods

    ours: list[type[ScheduleModel]] = [
        WarmupStableDecay,
        WSDPeriods,
        InverseSqrt,
        Power,
        Stages,
        *COMPOSER_MODELS.values(),
        TorchLR,
        ReduceLROnPlateau,
    ]
    return {m.name: m for m in (*ours, *FOUNDRY_MODELS.values())}


#: ``scheduler.name`` -> model: this package's names first, then llm-foundry's built-ins.
SCHEDULE_MODELS: dict[str, type[ScheduleModel]] = _schedule_models()


#: Callback name -> model of its keys, for this package's callbacks.
def _callback_models() -> dict[str, type[ConfigModel]]:
    return {
        "reduce_lr_on_plateau": PlateauCallbackKeys,
        "schedule_resume_check": ResumeCheckKeys,
        "checkpoint_guard": CheckpointGuardConfig,
        "spike_guard": SpikeGuardConfig,
        "inject_bad_batches": InjectBadBatchesConfig,  # a demo tool: spoils batches to show spike_guard acting
        "batch_size_schedule": BatchSizeSchedule,  # written there from the top-level key (catalog/batch_size.py)
    }


CALLBACK_MODELS: dict[str, type[ConfigModel]] = _callback_models()

#: llm-foundry 0.22's built-in callbacks: name -> (required keys, optional keys), ``train_config`` left out (llm-foundry
#: passes it). Generated from its registry and checked against it by ``tests/catalog/test_config_registry.py``; ``None``
#: means the class takes ``**kwargs`` (any key).
FOUNDRY_CALLBACKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]] | None] = {
    "async_eval": (("interval",), ("eval_run_config",)),
    "curriculum_learning": (("schedule", "duration"), ()),
    "dataset_swap": (("dataset_index",), ()),
    "early_stopper": (("monitor", "dataloader_label"), ("comp", "min_delta", "patience")),
    "env_logging": (
        (),
        (
            "workspace_dir",
            "log_git",
            "log_nvidia",
            "log_docker",
            "log_packages",
            "log_system",
            "log_gpu",
            "log_distributed",
            "packages_to_log",
        ),
    ),
    "eval_output_logging": None,
    "fdiff_metrics": ((), ("diff_train_metrics", "diff_eval_metrics")),
    "generate_callback": None,
    "global_lr_scaling": (("lr_scale",), ("wd_pct",)),
    "hf_checkpointer": (
        ("save_folder", "save_interval"),
        (
            "huggingface_folder_name",
            "precision",
            "overwrite",
            "mlflow_registered_model_name",
            "mlflow_logging_config",
            "flatten_imports",
            "final_register_only",
            "register_wait_seconds",
        ),
    ),
    "kill_loss_spike": ((), ("log_only", "patience", "outlier_multiplier", "window_size", "loss_cap")),
    "layer_freezing": (("layer_names",), ()),
    "load_checkpoint": (("load_path",), ("load_weights_only", "strict_model_weights", "ignore_keys", "event")),
    "loss_perp_v_len": (("log_batch_interval", "compute_batch_interval"), ("ignore_index",)),
    "lr_monitor": ((), ()),
    "mbmoe_tok_per_expert": ((), ("log_interval", "log_every_layer", "all_reduce_stats", "normalize")),
    "memory_monitor": ((), ("memory_keys", "dist_aggregate_batch_interval")),
    "memory_snapshot": (
        (),
        ("skip_batches", "interval", "max_entries", "folder", "filename", "remote_file_name", "overwrite"),
    ),
    "mono_checkpoint_saver": (("save_folder", "batch_interval"), ("filename", "overwrite", "keep_optimizers")),
    "nan_monitor": None,
    "oom_observer": ((), ("max_entries", "folder", "filename", "remote_file_name", "overwrite")),
    "optimizer_monitor": ((), ("log_optimizer_metrics", "batch_log_interval")),
    "run_timeout": ((), ("timeout",)),
    "runtime_estimator": ((), ("skip_batches", "time_unit")),
    "scheduled_gc": (("batch_interval",), ("gen_1_batch_interval", "eval_keep_disabled")),
    "speed_monitor": ((), ("window_size", "gpu_flops_available", "time_unit")),
    "system_metrics_monitor": ((), ("log_all_data",)),
}


def validate_block(block: Mapping[str, Any], path: str = "scheduler") -> ScheduleModel | None:
    """Validate a scheduler block ``{name: ..., **keys}``; None when the name is not one this package models.

    Raises:
        ConfigError: every problem of the block, each naming its field under ``path``.
    """
    name = block.get("name")
    if not isinstance(name, str):
        raise ConfigError(
            join_path(path, ["name"]), f"{name!r} is not a scheduler name; expected e.g. warmup_stable_decay"
        )
    model = SCHEDULE_MODELS.get(name)
    if model is None:
        return None
    try:
        return build(model, {k: v for k, v in block.items() if k != "name"}, path)
    except ConfigError as e:
        leftover = _leftover_keys(name, e.problems) if path == "scheduler" else {}
        if not leftover:
            raise
        raise ConfigError([*e.problems, _leftover_problem(name, leftover)]) from None


def _leftover_keys(name: str, problems: list[Problem]) -> dict[str, str]:
    """The block's unknown keys that are another scheduler's keys (not typos): key -> the scheduler it belongs to."""
    owners: dict[str, str] = {}
    for problem in problems:
        key = problem.field.removeprefix("scheduler.")
        if (
            "." in key
            or "[" in key
            or not problem.message.startswith("unknown key")
            or "did you mean" in problem.message
        ):
            continue
        owner = next(
            (other for other, model in SCHEDULE_MODELS.items() if other != name and key in model.model_fields), None
        )
        if owner is not None:
            owners[key] = owner
    return owners


def _leftover_problem(name: str, leftover: dict[str, str]) -> Problem:
    """One line: where keys of another scheduler come from (an override merged into the file's block), the way out."""
    keys = ", ".join(leftover)
    cleared = ", ".join(f"{key}: null" for key in leftover)
    owners = ", ".join(sorted(set(leftover.values())))
    return Problem(
        "scheduler",
        f"{keys}: keys of {owners}, not of {name}; an override scheduler={{name: {name}}} is merged into the YAML's "
        f"scheduler block, whose other keys stay: clear them in the override (a null key is unset), "
        f"'scheduler={{name: {name}, {cleared}}}', or edit the YAML",
    )


def _foreign(group: str, ours: Mapping[str, Any]) -> dict[str, str]:
    """Names other installed distributions register in the entry-point ``group`` -> distribution name."""
    return {
        ep.name: ep.dist.name if ep.dist is not None else "?" for ep in entry_points(group=group) if ep.name not in ours
    }


@cache
def foreign_scheduler_names() -> dict[str, str]:
    """Scheduler names other installed distributions register through entry points -> distribution name."""
    return _foreign("llmfoundry_schedulers", SCHEDULE_MODELS)


@cache
def foreign_callback_names() -> dict[str, str]:
    """Callback names other installed distributions register through entry points -> distribution name."""
    return _foreign("llmfoundry_callbacks", CALLBACK_MODELS)
