"""Announce a resume whose LR does not continue the checkpoint's: one warning line, before the first batch.

Composer restores the LR of the first resumed batch from the checkpoint (the optimizer's param groups), then
recomputes every later LR from *this* run's schedulers at the end of each batch. When the schedule changed (another
scheduler, a longer ``max_duration`` that moves ``dur``-relative phases, a plateau state left behind), the LR jumps
at the second resumed batch and nothing says so: Composer drops the state of a callback that the run does not have
without a word (``composer/core/state.py``, ``State.load_state_dict`` only visits the run's own callbacks).

:class:`ScheduleResumeCheck` saves, in every checkpoint, what produced it: each compiled scheduler's name and
settings, ``max_duration``, the plateau scale if a plateau adapter ran, and the LR that the checkpoint's schedule
gives the batch after the first resumed one. At ``Event.FIT_START`` of a resumed run it computes that LR with this
run's schedulers and, if it differs, logs one line with both LRs and the cause it can name. Every scheduler of this
package attaches one (``foundry_ext.trainer.schedulers.RunResolver``); for llm-foundry's own schedulers list it in the
YAML: ``callbacks: {schedule_resume_check: {}}``. Listed with ``reset_lr: true``, a resumed run trains at its config's
``optimizer.lr`` instead (:func:`reset_lrs`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from composer.core import Callback, State
from composer.loggers import Logger

from foundry_ext.catalog.callbacks import ResumeCheckKeys
from foundry_ext.config.base import build
from foundry_ext.config.notices import warn_once
from foundry_ext.trainer.lr_lambdas import compiled_schedulers, next_lrs

__all__ = ["ScheduleResumeCheck", "describe_scheduler", "reset_lrs"]

_FIELD = "callbacks.schedule_resume_check"
# Two evaluations of the same pure schedule at the same timestamp are bitwise equal; the tolerance only absorbs a
# libm that rounds a cosine differently on another machine.
_REL_TOL = 1e-9


class ScheduleResumeCheck(Callback):
    """Saves which schedule wrote a checkpoint; on resume, warns once if the LR does not continue it.

    The state is saved under this class's ``__qualname__``; do not rename the class. It never changes training:
    it reads the optimizer, evaluates the compiled schedulers' lambdas (pure functions of ``state.timestamp``) and
    logs on global rank 0.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.config = build(ResumeCheckKeys, kwargs, _FIELD)  # one line naming each bad key
        self._state: State | None = None
        self._saved: dict[str, Any] | None = None
        self._config_base_lrs: list[float] | None = None  # the optimizer's LRs before any checkpoint was loaded
        self._checked = False

    @classmethod
    def attach(cls, state: State) -> None:
        """Add one to ``state.callbacks`` unless there is one; schedulers of this package call it at their first call.

        The first call happens while the Trainer compiles its schedulers, before a checkpoint is loaded.
        """
        if not state.optimizers:  # a bare State (foundry-ext plot/validate): no run to check
            return
        existing = next((cb for cb in state.callbacks if isinstance(cb, cls)), None)
        if existing is None:
            existing = cls()
            state.callbacks.append(existing)
        existing._bind(state)

    def _bind(self, state: State) -> None:
        self._state = state
        if self._config_base_lrs is None and state.optimizers:
            self._config_base_lrs = _base_lrs(state)

    # -- events ----------------------------------------------------------------------------------------------------

    def init(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self._bind(state)  # listed in the YAML: Event.INIT comes before the schedulers and the checkpoint

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self._state = state
        if self._checked:
            return
        self._checked = True  # the first fit only: a second fit() of one Trainer goes on from its own state
        # A resumed run: the checkpoint (loaded in Trainer.__init__, before FIT_START) holds this callback's state, or
        # it moved the clock (one written without this callback: Composer's own schedulers, an older run)
        resumed = self._saved is not None or int(state.timestamp.batch.value) > 0
        if self.config.reset_lr and self._config_base_lrs and resumed:
            warn_once(reset_lrs(state, self._config_base_lrs))
            return
        if self._saved is None:
            return
        for line in resume_notices(self._saved, describe_run(state), self._config_base_lrs):
            warn_once(line)

    # -- checkpointing -----------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return describe_run(self._state) if self._state is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._saved = dict(state) if state else None
        self._checked = False


def reset_lrs(state: State, base_lrs: Sequence[float]) -> str:
    """``reset_lr: true``: make this run's ``optimizer.lr`` the base LR of a resumed run; the line announcing it.

    Composer restored the checkpoint's param groups (``lr``, ``initial_lr``) and each ``LambdaLR``'s ``base_lrs``.
    Each group ``g`` gets ``initial_lr = base_lrs[g]`` and ``base_lrs[g]`` of every LambdaLR, and ``lr`` (the LR of
    the first resumed batch) ``base_lrs[g] * m`` with ``m = lr / initial_lr`` of the checkpoint (the schedule's
    multiplier there; exactly ``base_lrs[g]`` when ``m = 1``). Later batches get ``base_lrs[g] x`` the schedule, as
    the LambdaLR computes it. ``DecoupledAdamW`` decays weights by ``weight_decay * lr / initial_lr``: both are set,
    so the decay follows the schedule's multiplier as before, not the change of the peak.
    """
    groups = state.optimizers[0].param_groups
    before = [float(g.get("initial_lr", g["lr"])) for g in groups]
    for g, new in zip(groups, base_lrs, strict=True):
        old = float(g.get("initial_lr", g["lr"]))
        m = float(g["lr"]) / old if old else 1.0
        g["initial_lr"] = float(new)
        g["lr"] = float(new) if m == 1.0 else float(new) * m
    for compiled in compiled_schedulers(state):
        if len(compiled.lambda_lr.base_lrs) == len(base_lrs):
            compiled.lambda_lr.base_lrs = [float(b) for b in base_lrs]
            compiled.lambda_lr._last_lr = [float(g["lr"]) for g in groups]
    batch = int(state.timestamp.batch.value)
    return (
        f"{_FIELD}.reset_lr: resuming at batch {batch} with this config's optimizer lr {_lrs(base_lrs)} instead of the "
        f"checkpoint's {_lrs(before)}: batch {batch} trains at {_lrs([float(g['lr']) for g in groups])} (param groups' "
        "lr and initial_lr and the LambdaLR's base_lrs set; DecoupledAdamW's weight decay keeps its lr / initial_lr "
        "scaling, the schedule's multiplier)"
    )


# -- what a run is ---------------------------------------------------------------------------------------------------


def describe_run(state: State) -> dict[str, Any]:
    """Plain values (the checkpoint is read with ``weights_only``): schedulers, max_duration, LRs, plateau scale."""
    try:
        following = next_lrs(state)
    except Exception:  # e.g. a OneCycleLR asked past its total_steps at the very end: nothing to compare with
        following = None
    adapter = next((cb for cb in state.callbacks if type(cb).__qualname__ == "ReduceLROnPlateauCallback"), None)
    plateau = None if adapter is None else adapter.plateau
    return {
        "version": 1,
        "batch": int(state.timestamp.batch.value),
        "max_duration": None if state.max_duration is None else str(state.max_duration),
        "schedulers": [describe_scheduler(c.scheduler) for c in compiled_schedulers(state)],
        "base_lrs": _base_lrs(state) if state.optimizers else None,
        "lrs": [float(g["lr"]) for g in state.optimizers[0].param_groups] if state.optimizers else None,
        "next_lrs": following,
        "plateau": None
        if plateau is None
        else {"scale": plateau.scale, "group_scales": plateau.group_scales, "cuts": plateau.cuts},
    }


def describe_scheduler(scheduler: Any) -> dict[str, Any]:
    """``{"name": ..., "settings": {...}}``: the YAML name and keys for this package's, public attributes otherwise."""
    config = getattr(scheduler, "config", None)
    fields = getattr(type(config), "model_fields", None)
    if fields is not None and isinstance(getattr(config, "name", None), str):
        return {"name": config.name, "settings": {k: _plain(getattr(config, k)) for k in fields}}
    settings = {k: _plain(v) for k, v in vars(scheduler).items() if not k.startswith("_")}
    return {"name": type(scheduler).__qualname__, "settings": settings}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_plain(v) for v in value]
    unit = getattr(value, "unit", None)  # composer.core.Time
    if unit is not None and hasattr(value, "value"):
        return f"{value.value}{getattr(unit, 'value', unit)}"
    if callable(value) and hasattr(value, "__dict__"):  # a scheduler object (e.g. a plateau's base, from Python)
        return describe_scheduler(value)
    return type(value).__qualname__


def _base_lrs(state: State) -> list[float]:
    return [float(g.get("initial_lr", g["lr"])) for g in state.optimizers[0].param_groups]


# -- the comparison --------------------------------------------------------------------------------------------------


def resume_notices(
    saved: Mapping[str, Any], now: Mapping[str, Any], config_base_lrs: Sequence[float] | None
) -> list[str]:
    """The warning lines for a resume from a checkpoint described by ``saved`` into the run described by ``now``."""
    lines = []
    before, after = saved.get("next_lrs"), now.get("next_lrs")
    batch = now.get("batch")
    if before and after is not None and not _same(before, after):
        lines.append(
            f"resuming at batch {batch} changes the LR: batch {batch} trains at the checkpoint's "
            f"{_lrs(now.get('lrs'))}, then batch {batch + 1} at {_lrs(after)} where the checkpoint's schedule gives "
            f"{_lrs(before)} (0-indexed batches; lr_monitor step {batch + 1}); cause: {_cause(saved, now)}"
        )
    restored = now.get("base_lrs")
    if config_base_lrs and restored and not _same(config_base_lrs, restored):
        lines.append(
            f"optimizer lr {_lrs(config_base_lrs)} of this run's config is not used: a resumed run keeps the "
            f"checkpoint's base LR {_lrs(restored)} (Composer restores the optimizer's param groups and the LambdaLR's "
            "base_lrs); to change the LR of a resumed run, change the schedule, not optimizer.lr"
        )
    return lines


def _cause(saved: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    causes = []
    old_names = [s["name"] for s in saved.get("schedulers") or []]
    new_names = [s["name"] for s in now.get("schedulers") or []]
    if old_names != new_names:
        causes.append(f"the scheduler changed from {_names(old_names)} to {_names(new_names)}")
    plateau, plateau_now = saved.get("plateau"), now.get("plateau")
    if plateau and plateau_now is None:
        causes.append(
            f"the checkpoint's plateau state (scale {_scale(plateau)} after {plateau['cuts']} cuts) is not used: "
            "this run has no reduce_lr_on_plateau"
        )
    elif plateau and plateau_now and _scale(plateau) != _scale(plateau_now):
        causes.append(f"the plateau scale is {_scale(plateau_now)} here, {_scale(plateau)} in the checkpoint (reset)")
    if saved.get("max_duration") != now.get("max_duration"):
        causes.append(
            f"max_duration changed from {saved.get('max_duration')} to {now.get('max_duration')} (durations in dur, "
            "and t_max defaults of 1dur, follow it; see docs/resume.md, 'Extending a finished run')"
        )
    if old_names == new_names:
        for old, new in zip(saved.get("schedulers") or [], now.get("schedulers") or [], strict=True):
            diff = _diff(old.get("settings", {}), new.get("settings", {}))
            if diff:
                causes.append(f"{new['name']} settings changed: {diff}")
    return "; ".join(causes) or "not identified (same scheduler, settings and max_duration)"


def _diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> str:
    parts = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            inner = _diff(a, b, f"{prefix}{key}.")
            if inner:
                parts.append(inner)
        elif a != b:
            parts.append(f"{prefix}{key} {a!r} -> {b!r}")
    return ", ".join(parts)


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=_REL_TOL, abs_tol=0.0) for x, y in zip(a, b, strict=True)
    )


def _lrs(values: Sequence[float] | None) -> str:
    if not values:
        return "?"
    shown = [f"{v:.6g}" for v in values]
    return shown[0] if len(set(shown)) == 1 else "[" + ", ".join(shown) + "]"


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def _scale(plateau: Mapping[str, Any]) -> str:
    scales = plateau.get("group_scales") or [plateau.get("scale")]
    return _lrs(scales)
