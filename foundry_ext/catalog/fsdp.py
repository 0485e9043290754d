"""The ``fsdp_config`` block and the checkpoint a run will load, checked before the model is built.

What Composer 0.32 and llm-foundry 0.22 do, and where it goes wrong only after the model is built (a traceback):

* FSDP1 (Composer's default, ``FSDP_VERSION`` unset): ``FSDPConfig.__init__`` sets any key as an attribute, so a
  misspelt key is silently unused, and a misspelt ``sharding_strategy`` / ``backward_prefetch`` fails as a
  ``KeyError`` once the model is built (``SHARDING_MAP[...]``, ``composer/distributed/mosaic_parallelism.py``).
* ``FSDP_VERSION=2`` (read from the environment by Composer's ``Trainer``) builds an ``FSDP2Config`` from
  ``fsdp_config`` with ``FSDP2Config.from_compatible_attrs``: a key FSDP2 has no setting for (``sharding_strategy``,
  ``use_orig_params``, ``sharded_ckpt_prefix_dir``, ...) is dropped with one ``UserWarning`` among many. Here it is an
  error naming the key: the run would not do what its YAML says.
* On one rank llm-foundry drops ``fsdp_config`` ("FSDP is not applicable for single-GPU training. Reverting to DDP"):
  the run trains DDP and saves and loads checkpoint *files*, whatever ``state_dict_type`` says.
* A sharded run (FSDP, ``state_dict_type: sharded``; FSDP2's default) loads a *folder* with
  ``torch.distributed.checkpoint``; any other run loads a *file*. The wrong kind fails once the model is built
  (``IsADirectoryError`` / ``ValueError: load_path must be a directory when using sharded state dict``), and so does a
  sharded folder without its ``.metadata`` or one of the shards it names.

The checkpoint checked is the one Composer will load: with ``autoresume: true``, the local ``save_folder``'s
``latest`` symlink when it exists (autoresume then wins over ``load_path``; not checked when ``checkpoint_guard`` is
listed, which repairs ``latest`` after this check, at ``BEFORE_LOAD``), else ``load_path``. Only local paths are
looked at; a URI or a path that does not exist is left to Composer, except that a ``.pt`` name given to a sharded run
is known from the YAML alone. Nothing here imports torch or Composer, except that reading a local folder's
``.metadata`` unpickles ``torch.distributed.checkpoint`` dataclasses (:mod:`foundry_ext.checkpoint.layout`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from foundry_ext.checkpoint.layout import local_kind, sharded_folder_problem
from foundry_ext.config.errors import Problem, did_you_mean, unknown_keys
from foundry_ext.text import one_line

__all__ = [
    "BOOL_KEYS",
    "FSDP1_KEYS",
    "FSDP1_VALUES",
    "FSDP2_KEYS",
    "MIXED_PRECISIONS",
    "STATE_DICT_TYPES",
    "check_fsdp",
]

#: The fields of Composer 0.32's ``FSDPConfig`` (FSDP1), ``_device_mesh`` aside (checked against Composer by
#: ``tests/catalog/test_train_config.py``).
FSDP1_KEYS = frozenset(
    (
        "activation_checkpointing", "activation_checkpointing_reentrant", "activation_cpu_offload", "auto_wrap",
        "te_checkpoint_wrapper", "te_shard_fp8_weight", "backward_prefetch", "backward_prefetch_limit", "cpu_offload",
        "data_parallel_shard_degree", "data_parallel_replicate_degree", "forward_prefetch", "forward_prefetch_limit",
        "ignored_modules", "keep_low_precision_grads", "limit_all_gathers", "load_monolith_rank0_only",
        "load_planner", "mixed_precision", "process_group", "save_planner", "sharded_ckpt_prefix_dir",
        "sharding_strategy", "state_dict_type", "sync_module_states", "use_orig_params", "verbose",
    )
)  # fmt: skip

#: The keys Composer 0.32's FSDP2 takes (``FSDP2Config.settable_attrs()``; checked against Composer by
#: ``tests/catalog/test_fsdp_checks.py``). ``from_compatible_attrs`` drops every other ``fsdp_config`` key.
FSDP2_KEYS = (
    "activation_checkpointing",
    "activation_cpu_offload",
    "device_mesh",
    "load_monolith_rank0_only",
    "mixed_precision",
    "reshard_after_forward",
    "state_dict_type",
    "verbose",
)

#: The ``fsdp_config`` keys Composer 0.32 types ``bool`` (``FSDPConfig``'s and ``FSDP2Config``'s fields; checked
#: against Composer by ``tests/catalog/test_fuzz_ramp_fsdp.py``). Composer stores what it is given and tests its truth:
#: the string ``"false"`` would switch the setting on.
BOOL_KEYS = (
    "activation_checkpointing", "activation_checkpointing_reentrant", "activation_cpu_offload", "auto_wrap",
    "cpu_offload", "forward_prefetch", "keep_low_precision_grads", "limit_all_gathers", "load_monolith_rank0_only",
    "sync_module_states", "te_checkpoint_wrapper", "te_shard_fp8_weight", "use_orig_params", "verbose",
)  # fmt: skip
#: ``state_dict_type``: Composer saves a sharded checkpoint for ``sharded`` and a full one for anything else, and
#: refuses anything but these two only when it loads (``composer.core.state.fsdp_state_dict_type_context``)
STATE_DICT_TYPES = ("full", "sharded")
#: ``mixed_precision`` as a string (``get_mixed_precision`` upper-cases it), else a mapping of dtypes
MIXED_PRECISIONS = ("DEFAULT", "PURE", "FULL")
#: FSDP1 values Composer looks up after ``.upper()`` (``SHARDING_MAP``, ``BACKWARD_PREFETCH_MAP`` in
#: ``composer/distributed/mosaic_parallelism.py``; ``get_mixed_precision`` for a string ``mixed_precision``).
FSDP1_VALUES: dict[str, tuple[str, ...]] = {
    "sharding_strategy": ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"),
    "backward_prefetch": ("BACKWARD_POST", "BACKWARD_PRE", "NONE"),
    "mixed_precision": MIXED_PRECISIONS,
}

# What FSDP2 does instead, for the FSDP1 keys a YAML written for FSDP1 most often holds (Composer's FSDP2Config and
# composer/distributed/fsdp2.py)
_FSDP2_INSTEAD = {
    "sharding_strategy": "FSDP2 always shards fully; reshard_after_forward: false is what SHARD_GRAD_OP did",
    "sharded_ckpt_prefix_dir": "FSDP2 always names checkpoint folders ep{epoch}-ba{batch}",
    "use_orig_params": "FSDP2 always trains the original parameters",
    "sync_module_states": "FSDP2 sets it itself",
    "data_parallel_shard_degree": "FSDP2 shards over every rank",
    "data_parallel_replicate_degree": "FSDP2 shards over every rank",
    "load_planner": "FSDP2 uses torch's default planner",
    "save_planner": "FSDP2 uses torch's default planner",
}

_FORMAT = re.compile(r"\{(\w*)\}")


def check_fsdp(cfg: Mapping[str, Any], *, world_size: int, fsdp_version: str | None = None) -> list[Problem]:
    """The problems of ``cfg``'s ``fsdp_config`` and of the checkpoint it will load on ``world_size`` ranks.

    ``fsdp_config`` must be a mapping; under FSDP1 a key ``FSDPConfig`` does not have and a ``sharding_strategy``,
    ``backward_prefetch`` or string ``mixed_precision`` its tables do not have are refused, under FSDP2 a key it drops;
    under both, a value Composer would act on otherwise than written (a ``state_dict_type`` other than
    ``full``/``sharded``, a bool given as another type, FSDP2's ``mixed_precision`` and ``reshard_after_forward``).

    Args:
        cfg (Mapping): The resolved train config.
        world_size (int): The number of ranks (the launcher's ``WORLD_SIZE``; ``foundry-ext validate --world-size``).
        fsdp_version (str, optional): ``"2"`` for FSDP2. Default: the ``FSDP_VERSION`` environment variable, which is
            what Composer's ``Trainer`` reads; ``"1"`` when unset.
    """
    version = fsdp_version if fsdp_version is not None else os.environ.get("FSDP_VERSION", "1")
    block = cfg.get("fsdp_config")
    fsdp = block if isinstance(block, Mapping) else None
    if block is not None and fsdp is None:
        return [
            Problem(
                "fsdp_config",
                f"{one_line(repr(block))[:200]} is not a block; expected a mapping of FSDP settings, e.g. "
                "{state_dict_type: sharded}",
            )
        ]
    problems = [] if fsdp is None else _fsdp2_dropped_keys(fsdp) if version == "2" else _fsdp1_problems(fsdp)
    problems += _value_problems(fsdp, version) if fsdp is not None else []
    found = _checkpoint_to_load(cfg, world_size)
    if found is not None:
        problem = _load_problem(*found, fsdp, world_size, version)
        if problem is not None:
            problems.append(problem)
    return problems


def _fsdp2_dropped_keys(fsdp: Mapping[str, Any]) -> list[Problem]:
    problems = []
    for key in fsdp:
        if key in FSDP2_KEYS:
            continue
        instead = _FSDP2_INSTEAD.get(str(key))
        problems.append(
            Problem(
                f"fsdp_config.{key}",
                f"FSDP2 (FSDP_VERSION=2) has no such setting and Composer would drop it"
                f"{f' ({instead})' if instead else ''}; FSDP2 takes {', '.join(FSDP2_KEYS)}: remove it, or run "
                "FSDP1 (FSDP_VERSION unset, on CUDA)",
            )
        )
    return problems


def _fsdp1_problems(fsdp: Mapping[str, Any]) -> list[Problem]:
    problems = unknown_keys(fsdp, FSDP1_KEYS, "fsdp_config", ": Composer's FSDPConfig keeps it without using it")
    for key, values in FSDP1_VALUES.items():
        value = fsdp.get(key)
        if value is None or (key == "mixed_precision" and isinstance(value, Mapping)):
            continue
        if not isinstance(value, str) or value.upper() not in values:
            shown = "a mapping of dtypes, or " if key == "mixed_precision" else ""
            problems.append(
                Problem(
                    f"fsdp_config.{key}",
                    f"{one_line(repr(value))[:200]} is not allowed{did_you_mean(str(value).upper(), values)}; "
                    f"expected {shown}one of {', '.join(values)}",
                )
            )
    return problems


def _value_problems(fsdp: Mapping[str, Any], version: str) -> list[Problem]:
    """Values Composer would take without a word and act on otherwise than written (issue 46: found by fuzzing)."""
    problems = []

    def bad(key: str, allowed: str) -> None:
        problems.append(Problem(f"fsdp_config.{key}", f"{one_line(repr(fsdp[key]))[:200]} is not allowed; {allowed}"))

    for key in BOOL_KEYS:  # under FSDP2, a key it drops is named once, by _fsdp2_dropped_keys
        if key in fsdp and not isinstance(fsdp[key], bool) and (version != "2" or key in FSDP2_KEYS):
            bad(key, "allowed: true or false")
    value = fsdp.get("state_dict_type")
    if "state_dict_type" in fsdp and value not in STATE_DICT_TYPES:
        bad("state_dict_type", f"allowed: {' or '.join(STATE_DICT_TYPES)} (anything else saves full checkpoints)")
    if version == "2":  # FSDP1's enumerated values: _fsdp1_problems
        value = fsdp.get("reshard_after_forward")
        if "reshard_after_forward" in fsdp and (not isinstance(value, int) or (type(value) is int and value < 1)):
            bad("reshard_after_forward", "allowed: true, false, or a whole number of ranks >= 1 to reshard to")
        value = fsdp.get("mixed_precision")
        if "mixed_precision" in fsdp and not isinstance(value, Mapping):
            if not isinstance(value, str) or value.upper() not in MIXED_PRECISIONS:
                bad("mixed_precision", f"allowed: one of {', '.join(MIXED_PRECISIONS)}, or a mapping of dtypes")
    return problems


def _sharded(fsdp: Mapping[str, Any] | None, world_size: int, version: str) -> bool:
    """Whether the run loads (and saves) sharded folders: FSDP on 2+ ranks with ``state_dict_type: sharded``."""
    if fsdp is None or world_size < 2:
        return False
    return fsdp.get("state_dict_type", "sharded" if version == "2" else "full") == "sharded"


def _checkpoint_to_load(cfg: Mapping[str, Any], world_size: int) -> tuple[str, str, str] | None:
    """``(field, path, how it is named)`` of the checkpoint Composer will load, or None (none, or not known here)."""
    if cfg.get("autoresume") is True:
        latest = _latest(cfg, world_size)
        if latest is not None and os.path.lexists(latest):
            callbacks = cfg.get("callbacks")
            if isinstance(callbacks, Mapping) and "checkpoint_guard" in callbacks:
                return None  # the guard repairs latest at BEFORE_LOAD (an incomplete target is quarantined): its call
            target = f" -> {one_line(os.readlink(latest))}" if os.path.islink(latest) else ""
            return "autoresume", latest, f"save_folder's {one_line(os.path.basename(latest))}{target}"
    load_path = cfg.get("load_path")
    if not isinstance(load_path, str) or not load_path:
        return None
    path = _format(load_path, cfg, world_size)
    return None if path is None else ("load_path", path, repr(one_line(load_path)))


def _latest(cfg: Mapping[str, Any], world_size: int) -> str | None:
    """The local path of rank 0's ``latest`` symlink, named as llm-foundry names it.

    llm-foundry's default name follows ``fsdp_config.state_dict_type``, read with FSDP1's default ``full``.
    """
    folder = cfg.get("save_folder")
    if not isinstance(folder, str) or not folder or "://" in folder:
        return None
    fsdp = cfg.get("fsdp_config")
    sharded = isinstance(fsdp, Mapping) and fsdp.get("state_dict_type", "full") == "sharded"
    name = cfg.get("save_latest_filename") or ("latest-sharded-rank{rank}" if sharded else "latest-rank{rank}.pt")
    folder, name = _format(folder, cfg, world_size), _format(str(name), cfg, world_size)
    return None if folder is None or name is None else os.path.join(folder, name)


def _format(text: str, cfg: Mapping[str, Any], world_size: int) -> str | None:
    """``text`` with Composer's format variables filled as for rank 0, the rank whose path every rank loads.

    None when it holds one that only the Trainer knows (``{epoch}``, ...).
    """
    run_name = cfg.get("run_name")
    values = {
        "rank": "0",
        "local_rank": "0",
        "node_rank": "0",
        "world_size": str(world_size),
        "run_name": str(run_name) if run_name else None,
    }
    unknown = False

    def fill(match: re.Match[str]) -> str:
        nonlocal unknown
        value = values.get(match.group(1))
        unknown = unknown or value is None
        return value or ""

    filled = _FORMAT.sub(fill, text)
    return None if unknown else filled


def _load_problem(
    field: str, path: str, shown: str, fsdp: Mapping[str, Any] | None, world_size: int, version: str
) -> Problem | None:
    kind = local_kind(path)
    sharded = _sharded(fsdp, world_size, version)
    if kind == "folder" and not sharded:
        what = (
            "a sharded checkpoint folder"
            if os.path.isfile(os.path.join(path, ".metadata"))
            else "a folder, not a checkpoint file"
        )
        if fsdp is None:
            why = "this run has no fsdp_config"
        elif world_size < 2:
            why = (
                "this run has 1 rank, where llm-foundry drops fsdp_config (FSDP is not applicable on one device: it "
                "trains DDP and loads checkpoint files): launch 2 or more ranks"
            )
        else:
            why = f"this run has fsdp_config.state_dict_type: {one_line(str(fsdp.get('state_dict_type')))}"
        return Problem(
            field,
            f"{shown} is {what}: only FSDP with fsdp_config.state_dict_type: sharded on 2 or more ranks loads a "
            f"folder; {why}",
        )
    if sharded and (kind == "file" or (kind is None and path.endswith(".pt"))):
        return Problem(
            field,
            f"{shown} is a checkpoint file (written by DDP, by FSDP with state_dict_type: full, or by a run of 1 "
            "rank), but this run loads sharded checkpoint folders (fsdp_config.state_dict_type: sharded): give the "
            "folder of a sharded checkpoint, or load this file with fsdp_config.state_dict_type: full",
        )
    if sharded and kind == "folder":
        problem = sharded_folder_problem(path)
        if problem is not None:
            return Problem(field, f"{shown} {problem}")
    return None
