"""The branch's train YAML: the stable run's config, checked against its checkpoint, decaying from batch ``s``.

:func:`plan_branch` decides everything and writes nothing; :func:`write_branch` writes the YAML. The branch is the
stable run's config (overrides merged, interpolations resolved) with: ``load_path`` the resolved checkpoint,
``save_folder`` and ``run_name`` its own, ``autoresume: true`` (a killed branch relaunched with the same command
resumes from its own latest checkpoint: Composer loads the save folder's latest when there is one, else
``load_path``), ``max_duration`` ``s + LEN`` batches, and ``warmup_stable_decay`` with ``t_decay_start: {s}ba``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundry_ext.anneal.options import AnnealError, parse_decay, parse_floor, parse_shape
from foundry_ext.anneal.ramp import last_lr, ramp_branch
from foundry_ext.anneal.source import Source, read_source
from foundry_ext.catalog.callbacks import CheckpointGuardConfig
from foundry_ext.checkpoint.owner import live_owner
from foundry_ext.config.durations import DurationError, parse
from foundry_ext.config.errors import ConfigError
from foundry_ext.config.train_yaml import load_train_config, max_duration
from foundry_ext.outputs import missing_folder
from foundry_ext.text import one_line

__all__ = ["KEPT_FOLDER", "Branch", "keep_source", "plan_branch", "write_branch"]

# The model keys that decide the weights' shapes, compared with the model config llm-foundry stores in a checkpoint.
_MODEL_KEYS = ("d_model", "n_heads", "n_layers", "expansion_ratio", "max_seq_len", "vocab_size")
# Optimizer hyperparameters Composer restores from the checkpoint (a YAML change would be ignored silently).
_OPTIMIZER_KEYS = ("betas", "eps", "weight_decay")
# The branch's own copy of its source checkpoint, inside its save folder. Composer's autoresume reads only the folder's
# `latest-rank{rank}.pt`, its rotation deletes only what the run itself saved, and a name without digits matches no
# checkpoint name checkpoint_guard looks for (each has a batch or an epoch): none of them sees this folder.
KEPT_FOLDER = "anneal-source"


@dataclass
class Branch:
    """A planned branch: the YAML to write and what to print."""

    config: dict[str, Any]
    source: Source
    length: int
    shape: str
    floor: float
    folder: str
    run_name: str
    first_lr: float
    last_lr: float
    notes: list[str] = field(default_factory=list)
    kept: Path | None = None  # where the source is kept in the branch's folder (None: a remote save folder)
    rotates: bool = False  # the stable run's save_num_checkpoints_to_keep > 0: it deletes old checkpoints

    @property
    def end(self) -> int:
        """The branch's ``max_duration`` in batches: ``s + LEN``."""
        return self.source.batch + self.length


def plan_branch(
    checkpoint: str,
    config_path: str,
    overrides: Sequence[str],
    decay: str,
    shape: str = "linear",
    floor: str = "0",
    out: str | None = None,
) -> Branch:
    """Decide the branch of ``checkpoint`` that decays over ``decay``; nothing is written.

    Raises:
        AnnealError: one line naming the option, the file or the key, the value and what is allowed.
        ConfigError: CONFIG cannot be loaded (missing, invalid YAML, a bad override), its problems as they are.
    """
    length_of = parse_decay(decay)
    alpha = parse_floor(floor)
    shape = parse_shape(shape)
    if out is not None:
        _check_out(out, config_path)
    own = ("save_folder", "run_name")  # the branch's: the stable run's values are read from the file
    # a ConfigError goes up as it is: the CLI says it as every command says a config's problem
    cfg = load_train_config(config_path, [o for o in overrides if o.partition("=")[0].strip() not in own])
    source = read_source(checkpoint)
    if out is not None:
        _check_out_outside_stable(out, source)
    s = source.batch
    if s == 0:
        raise AnnealError(f"CHECKPOINT {checkpoint}: at batch 0 (nothing trained); branch from a later checkpoint")
    _check_same_run(cfg, source, checkpoint)
    if source.sharded and not cfg.get("fsdp_config"):
        raise AnnealError(
            f"CONFIG {config_path}: no fsdp_config, but CHECKPOINT {checkpoint} is sharded (FSDP: a .metadata and a "
            "file per rank), which loads only into an FSDP run; expected the stable run's YAML, with its fsdp_config"
        )
    ramp = None  # a batch_size_schedule run's branch is planned in the decay's units (anneal/ramp.py)
    if source.ramp is not None:
        ramp = ramp_branch(cfg, source.ramp, s, source.samples, source.tokens, length_of.duration, decay)
        length = ramp.length
    else:
        length = length_of.batches(s, source.tokens_per_batch, source.samples_per_batch)
        _check_budget(cfg, source, s, length, decay)
    peak, lr = source.peaks[0], source.lrs[0]
    if alpha * peak > lr:
        raise AnnealError(
            f"--floor {floor}: the floor {alpha:g} x the peak LR {peak:.6g} = {alpha * peak:.6g} is above the "
            f"checkpoint's LR {lr:.6g} (batch {s}); expected a floor <= {lr / peak:.6g}"
        )
    if lr != (peak if ramp is None else peak * ramp.factor):  # a ramp's stable phase: the peak times its stage's
        raise AnnealError(
            f"CHECKPOINT {checkpoint}: batch {s} trains at LR {lr:.6g} = {source.multiplier:.6g} x the peak "
            f"{peak:.6g}, inside a warmup or a decay: a branch decays from the peak, so its LR would jump back up at "
            f"batch {s + 1}; branch from a checkpoint of the stable phase (a branch of a branch only at its first "
            "checkpoint, before its decay)"
        )
    stable_name = source.run_name or str(cfg.get("run_name") or "run")
    run_name = _override(overrides, "run_name") or f"{stable_name}-anneal-{s}ba-{length}ba-{shape}" + (
        f"-floor{alpha:g}" if alpha else ""
    )
    _check_plain_name(run_name, _override(overrides, "run_name") is not None, stable_name, checkpoint)
    if run_name == stable_name:
        raise AnnealError(
            f"run_name={run_name}: the stable run's name; a branch needs its own (run_name= and save_folder= among "
            "the overrides name the branch's: leave the stable run's out)"
        )
    folder = _folder(cfg, overrides, source, run_name)
    if ramp is None:
        scheduler = _scheduler(cfg, source, shape, alpha)
        first, last = _lrs(scheduler, source, length)
    else:
        scheduler = ramp.scheduler(shape, alpha)
        first, last = lr, last_lr({**cfg, "max_duration": ramp.max_duration, "scheduler": scheduler})
    branch_cfg = dict(cfg)
    branch_cfg.update(
        run_name=run_name,
        load_path=str(source.path),
        save_folder=folder,
        autoresume=True,
        max_duration=f"{s + length}ba" if ramp is None else ramp.max_duration,
        scheduler=scheduler,
    )
    if branch_cfg.get("load_weights_only"):
        branch_cfg["load_weights_only"] = False
    notes = []
    keep = cfg.get("save_num_checkpoints_to_keep")
    rotates = isinstance(keep, int) and not isinstance(keep, bool) and keep > 0
    kept = None if "://" in folder else Path(folder) / KEPT_FOLDER / source.path.name
    if kept is not None:
        branch_cfg["load_path"] = str(kept)
    notes.extend(_branch_knobs_in_overrides(cfg, overrides, shape, alpha))
    if source.sharded:
        notes.append(_sharded_note(source))
    return Branch(branch_cfg, source, length, shape, alpha, folder, run_name, first, last, notes, kept, rotates)


def _sharded_note(source: Source) -> str:
    """How to train a branch of a sharded checkpoint: the launch that loads it (FSDP, on as many ranks as wrote it)."""
    n = len(list(source.path.glob("__*_0.distcp")))
    ranks = f"{n} rank" + ("s" if n != 1 else "")
    return (
        f"note: a sharded checkpoint (FSDP, written by {ranks}): the branch keeps the stable run's fsdp_config; "
        "train it with FSDP as the stable run was (Composer's default FSDP on GPUs; with FSDP_VERSION=2, torch's "
        f"FSDP2, on CPU too), on {ranks} for the planned run's exact batches (docs/resume.md: other world sizes)"
    )


def keep_source(branch: Branch) -> str:
    """Keep the branch's source checkpoint alive in its own folder; the line that says how.

    A hard link (the same bytes, no copy; the stable run's folder is not touched: a link adds a name elsewhere) when
    the branch's folder is on the checkpoint's filesystem. Otherwise a copy when the stable run rotates its
    checkpoints (``save_num_checkpoints_to_keep > 0``: it would delete the source), else the YAML loads the source in
    place. A kept source already there (the same command run again) is reused when it is the same file or bytes.

    Raises:
        AnnealError: the source vanished (the stable run's rotation was faster), or the folder cannot be written.
    """
    import filecmp
    import shutil

    source, kept = branch.source.path, branch.kept
    if kept is None:
        return f"source: {source} loaded in place (the branch saves to {branch.folder}, not a local folder)"
    made = [p for p in (Path(branch.folder), kept.parent) if not p.exists()]

    def same(a: Path, b: Path) -> bool:
        if a.is_dir():
            return all(same(x, b / x.name) for x in a.iterdir()) if b.is_dir() else False
        return b.is_file() and (os.path.samefile(a, b) or filecmp.cmp(a, b, shallow=False))

    try:
        if kept.exists() or kept.is_symlink():
            if same(source, kept):
                return (
                    f"source: {kept} (kept by an earlier run of this command: the same checkpoint); the YAML loads it"
                )
            raise AnnealError(
                f"save_folder={branch.folder}: {kept} exists and is not {source}: a folder of another branch; give "
                "this branch its own (save_folder=..., or leave it out)"
            )
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f".{kept.name}.{os.getpid()}.tmp")
        try:
            if branch.source.sharded:
                shutil.copytree(source, tmp, copy_function=os.link)
            else:
                os.link(source, tmp)
            how = "a hard link of"
        except OSError as e:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            if isinstance(e, FileNotFoundError):
                raise
            if not branch.rotates:
                branch.config["load_path"] = str(source)
                _remove_empty(made)
                return (
                    f"source: {source} loaded in place ({branch.folder} is on another filesystem: no hard link, and "
                    "the stable run does not rotate its checkpoints); copy it first if you may delete it"
                )
            if branch.source.sharded:
                shutil.copytree(source, tmp)
            else:
                shutil.copy2(source, tmp)
            how = "a copy of"
        os.replace(tmp, kept)
    except FileNotFoundError:
        _remove_empty(made)
        raise AnnealError(
            f"CHECKPOINT {source}: deleted while the branch was written (the stable run rotates its checkpoints: "
            "save_num_checkpoints_to_keep); branch from a newer checkpoint"
        ) from None
    except OSError as e:
        _remove_empty(made)
        raise AnnealError(f"save_folder={branch.folder}: cannot keep the source there: {e.strerror or e}") from None
    why = "the stable run's rotation cannot delete it" if branch.rotates else "the stable run's folder is only read"
    return f"source: {kept}, {how} {source} ({why}); the YAML loads it"


def _remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):  # the deepest first
        try:
            folder.rmdir()
        except OSError:
            pass


def write_branch(branch: Branch, out: str) -> str:
    """Write the branch's YAML to ``out`` and keep its source (:func:`keep_source`); return the line about the source.

    The YAML is written to a temporary file first (an ``--out`` that cannot be written leaves nothing, not even the
    kept source), renamed once the source is kept: a reader never sees half of it.
    """
    import yaml

    tmp = f"{out}.{os.getpid()}.tmp"
    # The comment names the stable run and --out, text from a checkpoint and an option: escaped, a line break in
    # either would start a line of YAML keys (code_paths: a file the branch imports when trained).
    header = (
        f"# A branch of {one_line(branch.source.run_name or 'the stable run')} from batch {branch.source.batch}, "
        f"written by foundry-ext anneal: {branch.shape} decay over {branch.length} batches to {branch.floor:g} x the "
        "peak LR.\n"
        f"# Run it (and relaunch it, after a kill, with the same command): composer train.py {one_line(out)}\n"
    )
    try:  # the YAML first: an --out that cannot be written leaves nothing behind, not even the kept source
        with open(tmp, "w") as f:
            f.write(header)
            yaml.safe_dump(branch.config, f, sort_keys=False, default_flow_style=False)
    except OSError as e:  # a name over the file system's limit, no permission, a full disk: one line, not a traceback
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise AnnealError(f"--out {out}: cannot write: {e.strerror}") from None
    try:
        kept = keep_source(branch)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # gone after the rename; left only when keeping the source failed
    return kept


# -- checks ----------------------------------------------------------------------------------------------------------


def _check_out(out: str, config_path: str) -> None:
    problem = missing_folder("--out", out)
    if problem is not None:
        raise AnnealError(problem)
    if os.path.isdir(out):
        raise AnnealError(f"--out {out}: is a folder; expected the branch YAML's file name, e.g. {out}/branch.yaml")
    if os.path.exists(out) and os.path.exists(config_path) and os.path.samefile(out, config_path):
        raise AnnealError(f"--out {out}: is CONFIG itself; the branch is written to a file of its own")


def _check_out_outside_stable(out: str, source: Source) -> None:
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


def _check_plain_name(run_name: str, given: bool, stable_name: str, checkpoint: str) -> None:
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


def _check_same_run(cfg: Mapping[str, Any], source: Source, checkpoint: str) -> None:
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


def _check_budget(cfg: Mapping[str, Any], source: Source, s: int, length: int, decay: str) -> None:
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


def _override(overrides: Sequence[str], key: str) -> str | None:
    for item in reversed(overrides):
        k, sep, value = item.partition("=")
        if sep and k.strip() == key:
            return value.strip()
    return None


def _folder(cfg: Mapping[str, Any], overrides: Sequence[str], source: Source, run_name: str) -> str:
    given = _override(overrides, "save_folder")
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


# -- the schedule ----------------------------------------------------------------------------------------------------


def _stable_scheduler(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The stable run's ``scheduler`` block as the merged config holds it (empty when it has none)."""
    block = cfg.get("scheduler")
    return block if isinstance(block, Mapping) else {}


def _warmup(cfg: Mapping[str, Any], source: Source) -> dict[str, Any]:
    """The stable run's warmup keys, in batches (only the LRs before ``s`` use them: plots, the resume check)."""
    block = _stable_scheduler(cfg)
    keys: dict[str, Any] = {}
    value = block.get("t_warmup")
    try:
        warmup = parse(value) if isinstance(value, str) else None
    except DurationError:
        warmup = None
    per = {"ba": 1, "tok": source.tokens_per_batch, "sp": source.samples_per_batch}
    if warmup is not None and per.get(warmup.unit) and int(warmup.value) % per[warmup.unit] == 0:
        keys["t_warmup"] = f"{min(int(warmup.value) // per[warmup.unit], source.batch)}ba"
    if block.get("name") == "warmup_stable_decay":
        for key in ("warmup_type", "alpha_i"):
            if key in block:
                keys[key] = block[key]
    return keys


def _branch_knobs_in_overrides(cfg: Mapping[str, Any], overrides: Sequence[str], shape: str, alpha: float) -> list[str]:
    """A note for each ``scheduler.decay_type=`` or ``scheduler.alpha_f=`` override unlike ``--shape``, ``--floor``.

    Overrides describe the stable run (its scheduler block is replaced), so such a value does not reach the branch,
    while it reads as if it should. The value compared is the one the merged config holds, as llm-foundry reads it
    (``5e-1`` is ``0.5``; ``scheduler.decay_type=null`` unsets the key: nothing to say), for keys an override names.
    """
    block = _stable_scheduler(cfg)
    notes = []
    for key, option, used, shown in (
        ("decay_type", "--shape", shape, shape),
        ("alpha_f", "--floor", alpha, f"{alpha:g}"),
    ):
        if _override(overrides, f"scheduler.{key}") is not None and key in block and block[key] != used:
            notes.append(
                f"note: scheduler.{key}={block[key]} is read as the stable run's (its scheduler block is replaced); "
                f"the branch uses {option} {shown}"
            )
    return notes


def _scheduler(cfg: Mapping[str, Any], source: Source, shape: str, alpha: float) -> dict[str, Any]:
    return {
        "name": "warmup_stable_decay",
        **_warmup(cfg, source),
        "t_decay_start": f"{source.batch}ba",
        "decay_type": shape,
        "alpha_f": alpha,
    }


def _lrs(block: Mapping[str, Any], source: Source, length: int) -> tuple[float, float]:
    """The branch's LR at its first batch (``s``, the checkpoint's) and its last (``s + LEN - 1``), group 0.

    The last is the checkpoint's peak LR (a resumed run keeps the checkpoint's base LR) times the multiplier the LR
    pipeline gives that batch for the branch's block and ``max_duration`` (what ``plot`` shows of the branch's YAML).

    Raises:
        ConfigError: the branch's block is refused (as the key it came from).
    """
    from foundry_ext.config.train_yaml import run_clock
    from foundry_ext.preview.pipeline import LRPipeline

    cfg = {"max_duration": f"{source.batch + length}ba", "scheduler": dict(block)}
    pipeline = LRPipeline.from_config(cfg, run_clock(cfg), check_name=False, read_lr=False)
    last = source.peaks[0] * pipeline.multiplier(source.batch + length - 1)
    first = source.lrs[0]
    if not math.isfinite(last):
        raise AnnealError("the branch's LR is not finite")
    return first, last
