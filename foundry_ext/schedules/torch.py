"""``torch_lr_scheduler``: the arguments of every supported ``torch.optim.lr_scheduler`` class, typed and ranged.

torch checks few of its arguments: ``step_size: 0`` fails with ``integer modulo by zero`` at the first step, ``gamma:
.nan`` trains to the end with a NaN LR, ``gamma: -1`` flips the sign of the LR every batch. Each class here declares its
keyword arguments (the names and defaults of torch 2.7's signature; ``tests/catalog/test_config_registry.py`` checks
them against the installed torch) with the types torch's code expects and the ranges its arithmetic needs, so that a bad
value is one line naming its field (``scheduler.schedulers[1].T_max``) before torch sees it. Values are multipliers of
the optimizer's LR, as everywhere in this package (``OneCycleLR.max_lr: 1.0`` is the peak).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Field, model_validator

from foundry_ext.config.base import ConfigModel, build
from foundry_ext.config.errors import ConfigError, Problem, did_you_mean
from foundry_ext.schedules.base import Mark, RunContext, ScheduleModel

__all__ = ["CHILD_TYPES", "REFUSED", "RESERVED", "TORCH_MODELS", "TorchLR", "TorchSchedulerArgs"]

#: Classes whose LR needs something YAML cannot give, with the reason shown to the user.
REFUSED = {
    "ReduceLROnPlateau": "it needs a validation metric at every step; use `scheduler.name: reduce_lr_on_plateau`",
    "LambdaLR": "it needs a Python callable (lr_lambda), which YAML cannot express; use a Composer scheduler by "
    "`scheduler.name` (e.g. cosine, linear) or write a ComposerScheduler",
    "MultiplicativeLR": "it needs a Python callable (lr_lambda), which YAML cannot express; use ExponentialLR for a "
    "constant factor",
    "LRScheduler": "it is torch's abstract base class; pick a concrete scheduler",
}
#: Keys the user cannot set, with the reason.
RESERVED = {
    "optimizer": "foundry-ext passes a private dummy optimizer; the Trainer's optimizer is driven by Composer",
    "last_epoch": "resume is automatic: the multiplier is a pure function of state.timestamp.batch",
    "verbose": "removed from torch's schedulers; not supported",
    "scale_fn": "a Python callable, which YAML cannot express; use `mode` (triangular, triangular2, exp_range)",
    "lr_lambda": "a Python callable, which YAML cannot express",
}

PositiveInt = Annotated[int, Field(ge=1)]
Positive = Annotated[float, Field(gt=0.0)]
NonNegative = Annotated[float, Field(ge=0.0)]


class TorchSchedulerArgs(ConfigModel):
    """The keyword arguments of one torch scheduler class (besides ``optimizer`` and ``last_epoch``)."""

    reserved_keys: ClassVar[dict[str, str]] = RESERVED
    composite: ClassVar[bool] = False
    #: Error messages say "unknown key for StepLR", "is required by StepLR"; ``type`` is not listed as a key.
    key_owner: ClassVar[str | None] = None
    hidden_keys: ClassVar[tuple[str, ...]] = ("type",)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.key_owner = cls.__name__

    @classmethod
    def tag_hint(cls, tag: Any) -> str | None:
        """Why a child ``type`` is refused inside SequentialLR / ChainedScheduler, when there is a specific reason."""
        if tag in REFUSED:
            return f"{tag} is not supported: {REFUSED[tag]}"
        if tag in ("SequentialLR", "ChainedScheduler"):
            return f"{tag} cannot be nested inside SequentialLR or ChainedScheduler; flatten it"
        if isinstance(tag, str):
            hint = did_you_mean(tag, list(CHILD_TYPES))
            return f"{tag!r} is not a torch.optim.lr_scheduler class{hint}; allowed here: {', '.join(CHILD_TYPES)}"
        return None


class StepLR(TorchSchedulerArgs):
    """``lr = gamma ** (t // step_size)``."""

    type: Literal["StepLR"]
    step_size: PositiveInt = Field(description="batches between two decays")
    gamma: Positive = Field(0.1, description="multiplicative decay factor")


class MultiStepLR(TorchSchedulerArgs):
    """``lr = gamma ** (number of milestones <= t)``."""

    type: Literal["MultiStepLR"]
    milestones: list[Annotated[int, Field(ge=0)]] = Field(description="batches at which the LR is multiplied by gamma")
    gamma: Positive = Field(0.1, description="multiplicative decay factor")


class ConstantLR(TorchSchedulerArgs):
    """``lr = factor`` until ``total_iters``, then 1."""

    type: Literal["ConstantLR"]
    # factor 0 divides by zero when the LR returns to 1; total_iters 0 makes torch's step and closed form disagree
    factor: float = Field(1.0 / 3.0, gt=0.0, le=1.0, description="the multiplier until total_iters")
    total_iters: PositiveInt = Field(5, description="batches at the reduced LR")


class LinearLR(TorchSchedulerArgs):
    """``lr`` goes linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` batches."""

    type: Literal["LinearLR"]
    start_factor: float = Field(1.0 / 3.0, gt=0.0, le=1.0, description="multiplier at batch 0")
    end_factor: float = Field(1.0, ge=0.0, le=1.0, description="multiplier from total_iters on")
    total_iters: PositiveInt = Field(5, description="batches of the linear change (torch divides by it)")


class ExponentialLR(TorchSchedulerArgs):
    """``lr = gamma ** t``."""

    type: Literal["ExponentialLR"]
    gamma: Positive = Field(description="multiplicative factor per batch")


class CosineAnnealingLR(TorchSchedulerArgs):
    """Cosine from 1 to ``eta_min`` over ``T_max`` batches (and back up over the next ``T_max``)."""

    type: Literal["CosineAnnealingLR"]
    T_max: PositiveInt = Field(description="half-period in batches")
    eta_min: NonNegative = Field(0.0, description="minimum multiplier")


class CosineAnnealingWarmRestarts(TorchSchedulerArgs):
    """Cosine from 1 to ``eta_min`` over cycles of ``T_0 * T_mult ** i`` batches."""

    type: Literal["CosineAnnealingWarmRestarts"]
    T_0: PositiveInt = Field(description="batches in the first cycle")
    T_mult: PositiveInt = Field(1, description="each cycle is this many times longer than the previous one")
    eta_min: NonNegative = Field(0.0, description="minimum multiplier")


class CyclicLR(TorchSchedulerArgs):
    """Triangular cycles between ``base_lr`` and ``max_lr`` (multipliers of the optimizer's LR)."""

    type: Literal["CyclicLR"]
    base_lr: NonNegative = Field(description="lower multiplier of the cycle")
    max_lr: Positive = Field(description="upper multiplier of the cycle")
    step_size_up: PositiveInt = Field(2000, description="batches of the rising half")
    step_size_down: PositiveInt | None = Field(None, description="batches of the falling half (default: step_size_up)")
    mode: Literal["triangular", "triangular2", "exp_range"] = Field("triangular", description="amplitude policy")
    gamma: Positive = Field(1.0, description="exp_range: amplitude factor per batch")
    scale_mode: Literal["cycle", "iterations"] = Field("cycle", description="what the scale function counts")
    cycle_momentum: bool = Field(True, description="cycle momentum too (on the private optimizer only)")
    base_momentum: NonNegative = Field(0.8, description="lower momentum (private optimizer only)")
    max_momentum: NonNegative = Field(0.9, description="upper momentum (private optimizer only)")

    @model_validator(mode="after")
    def _bounds(self) -> CyclicLR:
        if self.max_lr < self.base_lr:
            raise ConfigError("max_lr", f"{self.max_lr} is below base_lr={self.base_lr}; need base_lr <= max_lr")
        return self


class OneCycleLR(TorchSchedulerArgs):
    """Warmup to ``max_lr``, then anneal to ``max_lr / (div_factor * final_div_factor)`` (1cycle policy)."""

    type: Literal["OneCycleLR"]
    max_lr: Positive = Field(description="peak multiplier")
    total_steps: PositiveInt | None = Field(None, description="batches in the cycle (or epochs * steps_per_epoch)")
    epochs: PositiveInt | None = Field(None, description="with steps_per_epoch, instead of total_steps")
    steps_per_epoch: PositiveInt | None = Field(None, description="with epochs, instead of total_steps")
    pct_start: float = Field(0.3, gt=0.0, lt=1.0, description="fraction of the cycle spent rising")
    anneal_strategy: Literal["cos", "linear"] = Field("cos", description="shape of the annealing")
    cycle_momentum: bool = Field(True, description="cycle momentum too (on the private optimizer only)")
    base_momentum: NonNegative = Field(0.85, description="lower momentum (private optimizer only)")
    max_momentum: NonNegative = Field(0.95, description="upper momentum (private optimizer only)")
    div_factor: Positive = Field(25.0, description="initial multiplier = max_lr / div_factor")
    final_div_factor: Positive = Field(1e4, description="final multiplier = initial / final_div_factor")
    three_phase: bool = Field(False, description="a third phase annihilates the LR")

    @model_validator(mode="after")
    def _steps(self) -> OneCycleLR:
        if self.total_steps is None and (self.epochs is None or self.steps_per_epoch is None):
            raise ConfigError("total_steps", "is required (or both epochs and steps_per_epoch), as torch requires")
        total = self.total_steps if self.total_steps is not None else self.epochs * self.steps_per_epoch  # type: ignore[operator]
        # torch's phase ends: pct_start * total - 1, (three_phase: 2 * pct_start * total - 2), total - 1; a phase of
        # length 0 divides by zero in get_lr, a negative one gives LRs outside the cycle
        first = float(self.pct_start * total) - 1
        ends = [first, float(2 * self.pct_start * total) - 2, total - 1] if self.three_phase else [first, total - 1]
        starts = [0.0, *ends[:-1]]
        if any(end - start <= 0 for start, end in zip(starts, ends, strict=True)):
            raise ConfigError(
                "total_steps",
                f"{total} steps with pct_start={self.pct_start}{' and three_phase' if self.three_phase else ''} "
                "leave a phase of zero length, which torch divides by; raise total_steps or change pct_start",
            )
        return self


class PolynomialLR(TorchSchedulerArgs):
    """``lr = (1 - min(t, total_iters) / total_iters) ** power``."""

    type: Literal["PolynomialLR"]
    total_iters: PositiveInt = Field(5, description="batches of the decay (torch divides by it)")
    power: NonNegative = Field(1.0, description="exponent (negative would divide by zero at total_iters)")


_CHILDREN = (
    StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR, CosineAnnealingLR, CosineAnnealingWarmRestarts, CyclicLR,
    OneCycleLR, PolynomialLR,
)  # fmt: skip
#: Class names allowed inside SequentialLR / ChainedScheduler.
CHILD_TYPES = tuple(m.__name__ for m in _CHILDREN)
Child = Annotated[Union[_CHILDREN], Field(discriminator="type")]  # noqa: UP007 - a tuple of classes


class SequentialLR(TorchSchedulerArgs):
    """Runs ``schedulers[i]`` from ``milestones[i - 1]`` on, each restarted at its own step 0."""

    composite = True
    type: Literal["SequentialLR"]
    schedulers: list[Child] = Field(min_length=1, description="the schedulers, each a {type: ..., ...} mapping")
    milestones: list[Annotated[int, Field(ge=1)]] = Field(description="batches at which the next scheduler starts")

    @model_validator(mode="after")
    def _milestones(self) -> SequentialLR:
        n = len(self.schedulers) - 1
        m = self.milestones
        if len(m) != n or any(b <= a for a, b in itertools.pairwise(m)):
            raise ConfigError(
                "milestones",
                f"{m!r}: expected {n} strictly increasing positive batch counts, one per scheduler after the first",
            )
        return self


class ChainedScheduler(TorchSchedulerArgs):
    """Steps every scheduler of ``schedulers`` at each batch; their effects compose."""

    composite = True
    type: Literal["ChainedScheduler"]
    schedulers: list[Child] = Field(min_length=1, description="the schedulers, each a {type: ..., ...} mapping")


#: torch class name -> its arguments' model.
TORCH_MODELS: dict[str, type[TorchSchedulerArgs]] = {
    m.__name__: m for m in (*_CHILDREN, SequentialLR, ChainedScheduler)
}


class TorchLR(ScheduleModel):
    r"""A :mod:`torch.optim.lr_scheduler` class by name, stepped once per batch, as a pure function of time.

    .. math::
        \alpha(t) = \mathrm{lr}_{\text{torch}}\bigl(\lfloor t / \mathrm{ssr} \rfloor\bigr)

    where :math:`t` is ``state.timestamp.batch`` and :math:`\mathrm{lr}_{\text{torch}}(n)` the LR that
    ``torch.optim.lr_scheduler.<type>(optimizer, **kwargs)`` gives after :math:`n` calls of ``.step()`` on an
    optimizer with one param group of LR 1.0. The other keys are the class's own arguments (``SequentialLR`` and
    ``ChainedScheduler`` take their children as ``schedulers: [{type: ..., ...}, ...]``).
    """

    model_config = ConfigModel.model_config | {"extra": "allow"}  # the torch class's keys, checked by its model

    name = "torch_lr_scheduler"
    summary = "any torch.optim.lr_scheduler class by name (type: StepLR, ...), with torch's arguments"
    kind = "torch"
    adapter = "foundry_ext.trainer.torch_lr:TorchLRScheduler"
    has_formula = True

    type: str = Field(description="the torch class, e.g. StepLR, CosineAnnealingLR, SequentialLR, OneCycleLR")

    @model_validator(mode="after")
    def _arguments(self) -> TorchLR:
        kind = self.type
        if kind in REFUSED:
            raise ConfigError("type", f"{kind} is not supported: {REFUSED[kind]}")
        if kind not in TORCH_MODELS:
            supported = ", ".join(sorted(TORCH_MODELS))
            hint = did_you_mean(kind, list(TORCH_MODELS))
            raise ConfigError("type", f"{kind!r} is not a torch.optim.lr_scheduler class{hint}; supported: {supported}")
        object.__setattr__(
            self, "_args", build(TORCH_MODELS[kind], {"type": kind, **(self.model_extra or {})}, path="")
        )
        return self

    @property
    def args(self) -> TorchSchedulerArgs:
        """The torch class's arguments, validated."""
        return self._args  # type: ignore[attr-defined]

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        """OneCycleLR is defined for ``total_steps`` steps: the run must not need more."""
        del d
        args = self.args
        if not isinstance(args, OneCycleLR) or run.total_unit != "ba":
            return []
        total = args.total_steps if args.total_steps is not None else args.epochs * args.steps_per_epoch  # type: ignore[operator]
        last = run.total - 1  # the Trainer's last call: the end of the last batch, before the timestamp advances
        step = last if run.ssr == 1.0 else int(last / run.ssr + 1e-9)
        if step <= total:
            return []
        return [
            Problem(
                "total_steps",
                f"OneCycleLR is defined for {total} steps but the run needs {step} (max_duration={run.max_duration}); "
                f"set total_steps (or epochs * steps_per_epoch) to at least {step}",
            )
        ]

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        """Steps where the torch schedule changes phase: milestones, restarts, steps, the end of a warmup or cycle."""
        return [(label, step, "ba") for label, step in _torch_marks(self.args, total) if 0 < step < total]

    def torch_kwargs(self) -> dict[str, Any]:
        """The keyword arguments for the torch class (children as ``(type, kwargs)`` specs)."""
        return _kwargs(self.args)


def _kwargs(args: TorchSchedulerArgs) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in type(args).model_fields:
        if name == "type":
            continue
        value = getattr(args, name)
        if name == "schedulers":
            value = [(child.type, _kwargs(child)) for child in value]
        out[name] = value
    return out


def _torch_marks(args: TorchSchedulerArgs, total: int, prefix: str = "") -> list[tuple[str, int]]:
    limit = 40
    if isinstance(args, SequentialLR):
        marks = [(f"{prefix}{args.schedulers[0].type}", 0)]
        marks += [
            (f"{prefix}milestone {i + 1}: {args.schedulers[i + 1].type}", m) for i, m in enumerate(args.milestones)
        ]
        for child, start in zip(args.schedulers, [0, *args.milestones], strict=True):
            marks += [(label, start + step) for label, step in _torch_marks(child, total - start, f"{child.type} ")]
        return [m for m in marks if m[1] > 0]
    if isinstance(args, ChainedScheduler):
        return [m for child in args.schedulers for m in _torch_marks(child, total, f"{child.type} ")]
    if isinstance(args, StepLR):
        return [
            (f"{prefix}step {i}", i * args.step_size) for i in range(1, min(limit, (total - 1) // args.step_size) + 1)
        ]
    if isinstance(args, MultiStepLR):
        return [(f"{prefix}milestone {i + 1}", m) for i, m in enumerate(sorted(args.milestones))]
    if isinstance(args, (ConstantLR, LinearLR, PolynomialLR)):
        return [(f"{prefix}end ({args.total_iters} iters)", args.total_iters)]
    if isinstance(args, CosineAnnealingWarmRestarts):
        marks, end, length = [], 0, args.T_0
        while len(marks) < limit and end + length < total:
            end += length
            marks.append((f"{prefix}restart {len(marks) + 1}", end))
            length *= args.T_mult
        return marks
    if isinstance(args, CosineAnnealingLR):
        return [(f"{prefix}T_max", args.T_max)]
    if isinstance(args, OneCycleLR):
        steps = args.total_steps if args.total_steps is not None else args.epochs * args.steps_per_epoch  # type: ignore[operator]
        peak = int(args.pct_start * steps)
        return [(f"{prefix}peak", peak), (f"{prefix}end of cycle", steps)]
    if isinstance(args, CyclicLR):
        up, down = args.step_size_up, args.step_size_down or args.step_size_up
        return [(f"{prefix}cycle {i}", i * (up + down)) for i in range(1, min(limit, total // (up + down)) + 1)]
    return []


def reserved_problem(key: str) -> Problem | None:
    """The problem of setting a reserved key, or None."""
    return Problem(key, f"cannot be set: {RESERVED[key]}") if key in RESERVED else None
