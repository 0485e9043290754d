"""The ComposerSchedulers of this package's own schedules, generated from their models (no file per schedule).

Every model of the catalog whose ``adapter`` names this module (``foundry_ext.trainer.schedulers:<Class>``) gets a
:class:`ModelScheduler` subclass of that name here, e.g. :class:`WarmupStableDecayScheduler` for
:class:`~foundry_ext.schedules.wsd.WarmupStableDecay`; the entry points of pyproject.toml name those classes.

llm-foundry builds a scheduler with ``cls(**kwargs)``. :class:`ModelScheduler` validates ``kwargs`` with the class's
:class:`~foundry_ext.schedules.base.ScheduleModel` (every problem, one line each, before any model is built) and, at
each call, evaluates the model's formula at ``state.timestamp``. The durations are resolved once per
``(max_duration, dataloader_len, ssr)``; that first resolution runs the checks that need the run (the Trainer makes
the first call while it is built, before the first batch) and prints the warnings (a warmup longer than the run).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from composer.core import State
from composer.optim import ComposerScheduler

from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.config.base import build
from foundry_ext.config.durations import Duration, Resolved, UnknownBatchesPerEpoch, max_duration_of, now
from foundry_ext.config.errors import ConfigError, Problem, current_path, stop_run
from foundry_ext.config.notices import warn_once
from foundry_ext.config.train_yaml import RunClock
from foundry_ext.schedules.base import ScheduleModel, run_check
from foundry_ext.schedules.run_lr import plateau_interval_warning, run_lr_findings, stepped_lr_problem
from foundry_ext.trainer.resume_check import ScheduleResumeCheck

#: Composer's call, ``scheduler(state, ssr)``: ``compile_composer_scheduler`` passes ``ssr`` (scale_schedule_ratio)
#: only to a scheduler whose signature has two parameters.
CALL_SIGNATURE = inspect.Signature(
    [
        inspect.Parameter("state", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("ssr", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=1.0),
    ]
)


class RunResolver:
    """Resolves a model's durations for the state's run, once per ``(max_duration, dataloader_len, ssr)``."""

    __slots__ = ("_key", "_resolved", "_state_id", "batch_multiplier", "model", "path")

    def __init__(self, model: ScheduleModel, path: str) -> None:
        self.model = model
        self.path = path
        #: ``batch -> multiplier`` of a schedule without a formula on the model (torch's): swept over the run too
        self.batch_multiplier: Callable[[int], float] | None = None
        self._key: tuple | None = None
        self._resolved: Resolved | None = None
        self._state_id: int | None = None

    def __call__(self, state: State, ssr: float) -> Resolved:
        if id(state) != self._state_id:
            # First call on this State: the Trainer is compiling its schedulers, before it loads a checkpoint.
            # Every scheduler of this package passes here, so each run saves what schedule wrote its checkpoints
            # and a resume whose LR does not continue the checkpoint's is announced (trainer/resume_check.py).
            self._state_id = id(state)
            ScheduleResumeCheck.attach(state)
        md = state.max_duration
        key = (None if md is None else (md.value, md.unit), state.dataloader_len, ssr)
        if key == self._key:
            return self._resolved  # type: ignore[return-value]
        max_duration = max_duration_of(state)
        dataloader_len = None if state.dataloader_len is None else int(state.dataloader_len)
        try:
            check = run_check(self.model, max_duration, dataloader_len, ssr, self.path)
        except UnknownBatchesPerEpoch:
            given = ", ".join(
                f"{self.path}.{k}={v}" for k, v in self.model.durations().items() if v.unit in ("ep", "dur")
            )
            problem = Problem(
                self.path,
                f"{given} with max_duration={max_duration} need the number of batches per epoch, and this train "
                "dataloader has no length; give the durations in ba, tok or sp",
            )
            stop_run([problem])
        errors, warnings = check.errors, check.warnings
        if not errors and ssr == 1.0:
            more_errors, more_warnings = self._run_lr(max_duration, dataloader_len)
            errors, warnings = more_errors, [*warnings, *more_warnings]
        if errors:
            stop_run(errors)
        for warning in warnings:
            warn_once(str(warning))
        self._key, self._resolved = key, check.resolved
        return check.resolved  # type: ignore[return-value]

    def _run_lr(self, max_duration: Duration, dataloader_len: int | None) -> tuple[list[Problem], list[Problem]]:
        """The whole run's LR (:func:`~foundry_ext.schedules.run_lr.run_lr_findings`) with the Trainer's own length.

        The pre-flight check made it from the YAML where the run length is known there; here it is known for ``ep``
        too (the dataloader's length). Not with ``scale_schedule_ratio`` (the YAML's durations are then scaled).
        """
        clock = RunClock(max_duration, batches_per_epoch=dataloader_len)
        errors, warnings = run_lr_findings(self.model, clock, self.path)
        interval = getattr(self.model, "check_interval", None)  # a plateau on a train loss: does it ever check?
        if interval is not None:
            never = plateau_interval_warning(interval, clock, f"{self.path}.check_interval")
            if never is not None:
                warnings = [*warnings, never]
        if not errors and self.batch_multiplier is not None:
            try:
                total = clock.total_batches
            except (UnknownBatchesPerEpoch, ConfigError):  # a run in tokens or samples: not known before batch 0
                total = 0
            problem = stepped_lr_problem(self.model, self.batch_multiplier, total, self.path)
            if problem is not None:
                errors = [problem]
        return errors, warnings


class _Signature:
    """``__signature__`` of a :class:`ModelScheduler`: the YAML keys on the class, Composer's call on an instance.

    ``inspect.signature(WarmupStableDecayScheduler)`` (help(), IDEs) shows the keys and their defaults; Composer
    inspects the *instance* and must see ``(state, ssr=1.0)``, else it refuses ``scale_schedule_ratio`` for a
    schedule with exactly one key (``Scheduler ... does not support scale_schedule_ratio``).
    """

    def __get__(self, obj: Any, owner: type) -> inspect.Signature | None:
        return owner._keys_signature if obj is None else CALL_SIGNATURE


class ModelScheduler(ComposerScheduler):
    """A ComposerScheduler whose keys are the fields of ``Config`` and whose multiplier is ``Config``'s formula.

    The fields are also attributes (``scheduler.t_warmup``); ``scheduler.config`` is the validated model.
    """

    Config: ClassVar[type[ScheduleModel]]
    _keys_signature: ClassVar[inspect.Signature | None] = None
    __signature__ = _Signature()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        config = cls.__dict__.get("Config")
        if config is None:
            return
        # introspection (help(), inspect.signature, IDEs) shows the YAML keys and defaults
        params = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True),
            )
            for name, info in config.model_fields.items()
        ]
        cls._keys_signature = inspect.Signature(params)
        # the formula is written once, in the model's docstring; help() on the scheduler shows it too
        where = f"{config.__module__}.{config.__qualname__}"
        cls.__doc__ = f"{cls.__doc__ or ''}\n\n    **The schedule** (:class:`{where}`):\n\n    {config.__doc__ or ''}"

    def __init__(self, **kwargs: Any) -> None:
        self.path = current_path()
        self.config = build(self.Config, kwargs, self.path)
        self.resolve = RunResolver(self.config, self.path)

    def __getattr__(self, name: str) -> Any:
        config = self.__dict__.get("config")
        if config is not None and name in type(config).model_fields:
            return getattr(config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        d = self.resolve(state, ssr)
        return self.config.multiplier(now(state, d.unit), d.values)


def _scheduler_class(model: type[ScheduleModel], class_name: str) -> type[ModelScheduler]:
    """The ModelScheduler of ``model``, named ``class_name``; its docstring lists the keys from the model's fields."""
    keys = "\n".join(
        f"        {name}: {info.description or ''}."
        + ("" if info.is_required() else f" Default = ``{info.get_default(call_default_factory=True)!r}``.")
        for name, info in model.model_fields.items()
    )
    doc = (
        f"``{model.name}`` as a ComposerScheduler: {model.summary}.\n\n    Args:\n{keys}\n\n    Raises:\n"
        f"        ConfigError: every bad key, one line each (``scheduler.<key>: ...``), when the scheduler is built."
    )
    return type(class_name, (ModelScheduler,), {"Config": model, "__module__": __name__, "__doc__": doc})


def _generate() -> dict[str, type[ModelScheduler]]:
    classes = {}
    for model in SCHEDULE_MODELS.values():
        module, _, class_name = model.adapter.partition(":")
        if module == __name__:
            classes[class_name] = _scheduler_class(model, class_name)
    return classes


_GENERATED = _generate()
globals().update(_GENERATED)
__all__ = ["CALL_SIGNATURE", "ModelScheduler", "RunResolver", *sorted(_GENERATED)]
