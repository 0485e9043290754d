"""The checks of a branch before anything is written: its --out, its name, the run it branches, its budget, its folder.

Each refusal is one :class:`~foundry_ext.anneal.options.AnnealError` line naming the option, file or key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from foundry_ext.anneal.options import AnnealError
from foundry_ext.anneal.source import Source
from foundry_ext.catalog.callbacks import CheckpointGuardConfig
from foundry_ext.checkpoint.owner import live_owner
from foundry_ext.config.errors import ConfigError
from foundry_ext.config.train_yaml import max_duration
from foundry_ext.outputs import output_problem

__all__ = [
    "branch_folder",
    "check_budget",
    "check_out",
    "check_out_outside_stable",
    "check_plain_name",
    "check_same_run",
    "override",
]

# The model keys that decide the weights' shapes, compared with the model config llm-foundry stores in a checkpoint.
_MODEL_KEYS = ("d_model", "n_heads", "n_layers", "expansion_ratio", "max_seq_len", "vocab_size")
# Optimizer hyperparameters Composer restores from the checkpoint (a YAML change would be ignored silently).
_OPTIMIZER_KEYS = ("betas", "eps", "weight_decay")


def check_out(out: str, config_path: str) -> None:
    """Refuse an ``--out`` in a missing folder, naming a folder, or naming CONFIG (the file being read)."""
    problem = output_problem("--out", out, "branch.yaml")
    if problem is not None:
        raise AnnealError(problem)
    if os.path.exists(out) and os.path.exists(config_path) and os.path.samefile(out, config_path):
        raise AnnealError(f"--out {out}: is CONFIG itself; the branch is written to a file of its own")


def check_out_outside_stable(out: str, source: Source) -> None:
    """Refuse an ``--out`` in the stable run's save folder: its files (the checkpoint among them) are never written.

    ``out`` is resolved as the write would follow it: a link to a file in the folder is in the folder.
    """
    folder = Path(os.path.realpath(source.folder))
    target = Path(os.path.realpath(out))
    if target == folder or folder in target.parents or target == Path(os.path.realpath(source.path)):
        raise AnnealError(
            f"--out {out}: inside the stable run's folder {source.folder} (where {source.path.name} is); its files are "
            "never written: write the branch YAML elsewhere"
        )


def check_plain_name(run_name: str, given: bool, stable_name: str, checkpoint: str) -> None:
    """Refuse a branch ``run_name`` that is not one plain folder name: a derived ``save_folder`` would leave its place.

    The derived folder is ``<the stable run's parent>/<run_name>``: ``../../escape`` moves it two levels up, a ``/``
    one level down, a line break or another control character makes a name no shell command shows as it is.
    """
    if run_name not in (".", "..") and "/" not in run_name and "\\" not in run_name and run_name.isprintable():
        return
    if given:
        raise AnnealError(
            f"run_name={run_name}: not a plain name (no '/', '\\', '.', '..' or control characters: the branch's "
            "save_folder is derived from it); give e.g. run_name=stable-anneal"
        )
    raise AnnealError(
        f"CHECKPOINT {checkpoint}: the stable run's run_name {stable_name!r} is not a plain name (a '/', '\\', '..' "
        "or a control character: the branch's name and folder are derived from it); give the branch's with "
        "run_name=NAME"
    )


def _norm(name: Any) -> str:
    return str(name).replace("_", "").lower()


def check_same_run(cfg: Mapping[str, Any], source: Source, checkpoint: str) -> None:
    """Refuse a config whose model, optimizer or batch size is not the checkpoint's run's."""
    model = cfg.get("model") if isinstance(cfg.get("model"), Mapping) else {}
    for key in _MODEL_KEYS:
        if key in model and key in source.model_config and model[key] != source.model_config[key]:
            raise AnnealError(
                f"model.{key}: {model[key]!r} here, {source.model_config[key]!r} in the checkpoint's model "
                f"({checkpoint}): a branch continues the stable run's weights, which do not fit another model; keep "
                "the stable run's model block"
            )
    optimizer = cfg.get("optimizer") if isinstance(cfg.get("optimizer"), Mapping) else {}
    name = optimizer.get("name")
    if name is not None and _norm(name) != _norm(source.optimizer):
        raise AnnealError(
            f"optimizer.name: {name!r} here, the checkpoint's optimizer is {source.optimizer}: a branch continues the "
            "stable run's optimizer state (moments), which belongs to that optimizer; keep the stable run's optimizer"
        )
    lr = optimizer.get("lr")
    if isinstance(lr, (int, float)) and not isinstance(lr, bool) and float(lr) != source.peaks[0]:
        raise AnnealError(
            f"optimizer.lr: {lr!r} here, the checkpoint's peak LR (initial_lr) is {source.peaks[0]!r}: a resumed run "
            "keeps the checkpoint's (Composer restores initial_lr and the LambdaLR's base_lrs), so the branch would "
            "silently ignore it; keep the stable run's optimizer.lr"
        )
    for key in _OPTIMIZER_KEYS:
        if key in optimizer and key in source.settings and _plain(optimizer[key]) != source.settings[key]:
            raise AnnealError(
                f"optimizer.{key}: {optimizer[key]!r} here, {source.settings[key]!r} in the checkpoint: Composer "
                "restores the checkpoint's param groups, so the branch would silently ignore it; keep the stable "
                "run's value"
            )
    batch = cfg.get("global_train_batch_size")
    if isinstance(batch, int) and source.samples_per_batch is not None and batch != source.samples_per_batch:
        raise AnnealError(
            f"global_train_batch_size: {batch} here, the checkpoint's run trained {source.samples_per_batch} samples "
            f"per batch: a branch continues the stable run's batches (its data position and its batch count s = "
            f"{source.batch}); keep {source.samples_per_batch}"
        )


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def check_budget(cfg: Mapping[str, Any], source: Source, s: int, length: int, decay: str) -> None:
    """Refuse a branch that would end past the stable run's ``max_duration`` (in batches, tokens or samples)."""
    try:
        budget = max_duration(cfg)
    except ConfigError:
        return  # the branch's own max_duration replaces it
    per = {"ba": 1, "tok": source.tokens_per_batch, "sp": source.samples_per_batch}.get(budget.unit)
    if not per:
        return  # epochs: not known without the data
    total = int(budget.value) // per
    if s + length > total:
        raise AnnealError(
            f"--decay {decay}: the branch would end at batch {s + length} (= {s} + {length}), past the run's budget "
            f"max_duration={budget} ({total} batches); shorten the decay, or raise the budget with max_duration=..."
        )


def override(overrides: Sequence[str], key: str) -> str | None:
    """The value of the last ``key=value`` among ``overrides``, or ``None``."""
    for item in reversed(overrides):
        k, sep, value = item.partition("=")
        if sep and k.strip() == key:
            return value.strip()
    return None


def branch_folder(cfg: Mapping[str, Any], overrides: Sequence[str], source: Source, run_name: str) -> str:
    """The branch's ``save_folder``: the one given, else a sibling of the stable run's named ``run_name``.

    Refused when it is the stable run's folder or owned by a live run (:func:`foundry_ext.checkpoint.owner.live_owner`).
    """
    given = override(overrides, "save_folder")
    if given is not None:
        folder = given.replace("{run_name}", run_name)
    else:
        stable = source.folder
        parent = stable.parent.parent if stable.name == "checkpoints" else stable.parent
        folder = str(parent / run_name / "checkpoints") if stable.name == "checkpoints" else str(parent / run_name)
    real = Path(os.path.realpath(folder))
    stable_folders = {Path(os.path.realpath(source.folder))}
    config_folder = cfg.get("save_folder")
    if isinstance(config_folder, str) and given is not None and "://" not in config_folder:
        stable_folders.add(Path(os.path.realpath(config_folder.replace("{run_name}", source.run_name or ""))))
    if real in stable_folders:
        raise AnnealError(
            f"save_folder={folder}: the stable run's folder (where {source.path.name} is); a branch saves into a "
            "folder of its own (leave save_folder out and one is derived)"
        )
    busy = live_owner(real, CheckpointGuardConfig.model_fields["stale_after"].default)  # the guard's default
    if busy:
        raise AnnealError(
            f"save_folder={folder}: owned by a live run, {busy}; give the branch another folder (save_folder=...)"
        )
    return folder
