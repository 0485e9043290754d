"""Any :mod:`torch.optim.lr_scheduler` class by name, as a pure Composer scheduler stepped once per batch.

``scheduler: {name: torch_lr_scheduler, type: StepLR, step_size: 1000, gamma: 0.5}`` runs torch's own ``StepLR``:
the multiplier at batch ``t`` is the LR that torch's scheduler gives after ``t`` calls of ``.step()`` on an optimizer
whose base LR is 1.0. The value is computed *by* a private torch scheduler (on a dummy one-parameter optimizer), so
torch's arithmetic is the truth by construction; see ``docs/torch_lr_scheduler.md`` for the design and the limits.
"""

from __future__ import annotations

import inspect
import math
import warnings
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from composer.core import State
from composer.optim import ComposerScheduler
from torch.optim import lr_scheduler as torch_lr

from foundry_ext._config import ConfigError, ValidatedMeta, did_you_mean

__all__ = ["SUPPORTED_TYPES", "TorchLRScheduler"]

# Classes whose LR needs something YAML cannot give, with the reason shown to the user.
_REFUSED = {
    "ReduceLROnPlateau": "it needs a validation metric at every step; use `scheduler.name: reduce_lr_on_plateau`",
    "LambdaLR": "it needs a Python callable (lr_lambda), which YAML cannot express; "
    "use a Composer scheduler by `scheduler.name` (e.g. cosine, linear) or write a ComposerScheduler",
    "MultiplicativeLR": "it needs a Python callable (lr_lambda), which YAML cannot express; "
    "use ExponentialLR for a constant factor",
    "LRScheduler": "it is torch's abstract base class; pick a concrete scheduler",
}
_COMPOSITE = ("SequentialLR", "ChainedScheduler")
SUPPORTED_TYPES: tuple[str, ...] = tuple(sorted(n for n in torch_lr.__all__ if n not in _REFUSED))

# Keys the user cannot set, with the reason.
_RESERVED = {
    "optimizer": "foundry-ext passes a private dummy optimizer; the Trainer's optimizer is driven by Composer",
    "last_epoch": "resume is automatic: the multiplier is a pure function of state.timestamp.batch",
    "verbose": "removed from torch's schedulers; not supported",
    "scale_fn": "a Python callable, which YAML cannot express; use `mode` (triangular, triangular2, exp_range)",
}

# Chainable classes whose step is ``lr <- lr * factor(t)``: inside a ChainedScheduler their product is the LR.
_MULTIPLICATIVE = ("StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR")
# Classes whose LR at a step ignores the LR they are handed (their get_lr reads only their own counters).
_ABSOLUTE = ("CosineAnnealingWarmRestarts", "OneCycleLR", "CyclicLR")

# A gap larger than this is crossed by a closed-form jump instead of stepping; smaller gaps are stepped, which is
# torch's own recursion bit for bit. 10,000 steps cost at most ~70 ms (ChainedScheduler, the slowest step).
_JUMP = 10_000


def _lookup(field: str, value: Any, *, nested: bool) -> type:
    """The torch class named ``value``, or a ConfigError that says what to use instead."""
    if not isinstance(value, str):
        raise ConfigError(field, f"{value!r} is not a class name; expected one of {', '.join(SUPPORTED_TYPES)}")
    if value in _REFUSED:
        raise ConfigError(field, f"{value} is not supported: {_REFUSED[value]}")
    if value not in SUPPORTED_TYPES:
        same = [n for n in SUPPORTED_TYPES if n.lower() == value.lower()]  # difflib is case-sensitive
        hint = f" (did you mean '{same[0]}'?)" if same else did_you_mean(value, SUPPORTED_TYPES)
        raise ConfigError(
            field,
            f"{value!r} is not a torch.optim.lr_scheduler class{hint}; supported: {', '.join(SUPPORTED_TYPES)}",
        )
    if nested and value in _COMPOSITE:
        raise ConfigError(field, f"{value} cannot be nested inside SequentialLR or ChainedScheduler; flatten it")
    return getattr(torch_lr, value)


def _check_kwargs(prefix: str, cls: type, kwargs: Mapping[str, Any]) -> None:
    """Check ``kwargs`` against the torch class's ``__init__``: unknown, reserved and missing keys."""
    params = {
        name: p
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name not in ("self", "optimizer", "last_epoch") and p.kind is not p.VAR_KEYWORD
    }
    allowed = [n for n in params if n not in _RESERVED]
    for key in kwargs:
        if key in _RESERVED:
            raise ConfigError(f"{prefix}.{key}", f"cannot be set: {_RESERVED[key]}")
        if key not in params:
            raise ConfigError(
                f"{prefix}.{key}",
                f"unknown key for {cls.__name__}{did_you_mean(key, allowed)}; allowed keys: "
                f"{', '.join(allowed) or '(none)'}",
            )
    for name, p in params.items():
        if p.default is p.empty and name not in kwargs:
            raise ConfigError(f"{prefix}.{name}", f"is required by {cls.__name__}")


def _plain(value: Any) -> Any:
    """YAML containers (dicts, lists, OmegaConf) as plain Python ones."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


def _spec(prefix: str, type_: Any, kwargs: Mapping[str, Any], *, nested: bool = False) -> tuple[type, dict]:
    """Validate one (maybe composite) scheduler config; return its class and torch kwargs (children as specs)."""
    cls = _lookup(f"{prefix}.type", type_, nested=nested)
    kwargs = _plain(dict(kwargs))
    _check_kwargs(prefix, cls, kwargs)
    if cls.__name__ in _COMPOSITE:
        children = kwargs["schedulers"]
        if not isinstance(children, list) or not children:
            raise ConfigError(
                f"{prefix}.schedulers",
                f"{children!r} is not a list of schedulers; expected e.g. "
                "[{type: LinearLR, start_factor: 0.1, total_iters: 100}, {type: CosineAnnealingLR, T_max: 900}]",
            )
        specs = []
        for i, child in enumerate(children):
            where = f"{prefix}.schedulers[{i}]"
            if not isinstance(child, dict) or "type" not in child:
                raise ConfigError(where, f"{child!r} is not a scheduler; expected a mapping with a `type` key")
            child = dict(child)
            specs.append(_spec(where, child.pop("type"), child, nested=True))
        kwargs["schedulers"] = specs
    if cls.__name__ == "SequentialLR":
        milestones = kwargs["milestones"]
        n = len(kwargs["schedulers"]) - 1
        ok = isinstance(milestones, list) and all(isinstance(m, int) and not isinstance(m, bool) for m in milestones)
        if not ok or len(milestones) != n or any(m <= 0 for m in milestones) or milestones != sorted(set(milestones)):
            raise ConfigError(
                f"{prefix}.milestones",
                f"{milestones!r}: expected {n} strictly increasing positive integer batch counts, one per scheduler "
                "after the first",
            )
    return cls, kwargs


def _construct(spec: tuple[type, dict], optimizer: torch.optim.Optimizer) -> torch_lr.LRScheduler:
    cls, kwargs = spec
    if cls.__name__ in _COMPOSITE:
        kwargs = dict(kwargs, schedulers=[_construct(s, optimizer) for s in kwargs["schedulers"]])
    if cls.__name__ == "ChainedScheduler":
        return cls(optimizer=optimizer, **kwargs)
    return cls(optimizer, **kwargs)


def _fresh(spec: tuple[type, dict]) -> torch_lr.LRScheduler:
    """A new torch scheduler at step 0 on a dummy one-parameter SGD with base LR 1.0."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    # torch warns at the first scheduler step unless optimizer.step() ran; the dummy optimizer never steps.
    optimizer._opt_called = True  # type: ignore[attr-defined]
    return _construct(spec, optimizer)


def _get_lr(sched: torch_lr.LRScheduler) -> float:
    """``get_lr()`` outside ``step()``, without torch's "use get_last_lr()" warning."""
    sched._get_lr_called_within_step = True
    try:
        return sched.get_lr()[0]
    finally:
        sched._get_lr_called_within_step = False


def _cawr_position(t: int, t_0: int, t_mult: int) -> tuple[int, int]:
    """``(T_cur, T_i)`` of CosineAnnealingWarmRestarts after ``t`` integer steps, as its ``step()`` counts them."""
    if t_mult == 1:
        return t % t_0, t_0
    t_i = t_0
    while t >= t_i:
        t -= t_i
        t_i *= t_mult
    return t, t_i


def _closed_form(sched: torch_lr.LRScheduler, t: int) -> float | None:
    """The multiplier of a chainable scheduler standing alone at step ``t``, or None if it has no closed form."""
    if not hasattr(sched, "_get_closed_form_lr"):
        return None
    sched.last_epoch = t
    return sched._get_closed_form_lr()[0]


def _is_factor(child: torch_lr.LRScheduler, t: int) -> bool:
    """Whether ``child``'s closed form at every step up to ``t`` is a factor of a ChainedScheduler's LR."""
    name = type(child).__name__
    if name == "CosineAnnealingLR":  # a factor only on its first half-period with eta_min = 0
        return t <= child.T_max and child.eta_min == 0
    return name in _MULTIPLICATIVE


def _chain_step(child: torch_lr.LRScheduler) -> Callable[[int, float], float]:
    """The ``get_lr`` of a chainable ``child`` at step ``n >= 1`` as a function of the LR it is handed.

    Each expression is torch 2.7's own, operation for operation, so a chain advanced with these on one Python float
    is bit-identical to torch stepping the real ChainedScheduler (which does the same float arithmetic on
    ``group["lr"]``), at well under a microsecond per step instead of ~15.
    """
    name = type(child).__name__
    if name == "StepLR":
        size, gamma = child.step_size, child.gamma
        return lambda n, x: x * gamma if n % size == 0 else x
    if name == "MultiStepLR":
        factors = {m: child.gamma**count for m, count in child.milestones.items()}
        return lambda n, x: x * factors[n] if n in factors else x
    if name == "ConstantLR":
        total, factor = child.total_iters, child.factor
        return lambda n, x: x * (1.0 / factor) if n == total else x
    if name == "LinearLR":
        start, end, total = child.start_factor, child.end_factor, child.total_iters
        return lambda n, x: x if n > total else x * (1.0 + (end - start) / (total * start + (n - 1) * (end - start)))
    if name == "ExponentialLR":
        gamma = child.gamma
        return lambda n, x: x * gamma
    if name == "PolynomialLR":
        total, power = child.total_iters, child.power
        return lambda n, x: x if n > total else x * ((1.0 - n / total) / (1.0 - (n - 1) / total)) ** power
    if name == "CosineAnnealingLR":
        t_max, eta = child.T_max, child.eta_min
        bump = (child.base_lrs[0] - eta) * (1 - math.cos(math.pi / t_max)) / 2
        cos, pi = math.cos, math.pi

        def cosine(n: int, x: float) -> float:
            if (n - 1 - t_max) % (2 * t_max) == 0:
                return x + bump
            return (1 + cos(pi * n / t_max)) / (1 + cos(pi * (n - 1) / t_max)) * (x - eta) + eta

        return cosine
    raise AssertionError(f"{name} is not chainable")  # _ABSOLUTE and composites are handled by the caller


def _replay_chain(children: Sequence[torch_lr.LRScheduler], lr: float, start: int, t: int) -> float:
    """Advance chained ``children`` from step ``start`` (handed LR ``lr``) to step ``t``; return the LR there.

    What torch's ``ChainedScheduler.step()`` would do ``t - start`` times, on one Python float: each child's
    ``get_lr`` in order (:func:`_chain_step`). A child whose ``get_lr`` ignores the LR it is handed (``_ABSOLUTE``)
    overwrites it: only the children after the last such child matter, and only at step ``t`` itself. Every child's
    counters are moved to ``t``. A single scheduler is a chain of one.
    """
    last_absolute = max((i for i, c in enumerate(children) if type(c).__name__ in _ABSOLUTE), default=None)
    for child in children:
        child.last_epoch = t
        child._step_count += t - start
        if type(child).__name__ == "CosineAnnealingWarmRestarts":
            child.T_cur, child.T_i = _cawr_position(t, child.T_0, child.T_mult)
    if last_absolute is not None:
        lr = _get_lr(children[last_absolute])
        for child in children[last_absolute + 1 :]:
            lr = _chain_step(child)(t, lr)
        return lr
    # Past its last acting step a child returns the LR unchanged: drop it there (warmups act only at the start).
    steps = [(_chain_step(c), _last_acting_step(c)) for c in children]
    n = start + 1
    while n <= t:
        active = [step for step, last in steps if last >= n]
        end = min([t, *(last for _, last in steps if last >= n)])
        for k in range(n, end + 1):
            for step in active:
                lr = step(k, lr)
        n = end + 1
    return lr


def _replay(sched: torch_lr.LRScheduler, start: int, t: int) -> bool:
    """Move ``sched`` from step ``start`` to step ``t > start`` as ``t - start`` torch steps would, bit for bit.

    False (nothing changed) when a SequentialLR milestone lies in ``(start, t]``: there torch restarts a child with
    ``step(0)``, which is left to torch's own stepping.
    """
    group = sched.optimizer.param_groups[0]
    name = type(sched).__name__
    if name == "SequentialLR":
        idx, offset = _sequential_child(sched, t)
        if _sequential_child(sched, start)[0] != idx:
            return False
        _replay(sched._schedulers[idx], start - offset, t - offset)
        sched.last_epoch = t
    else:
        children = sched._schedulers if name == "ChainedScheduler" else [sched]
        group["lr"] = _replay_chain(children, group["lr"], start, t)
        for child in children:
            child._last_lr = [group["lr"]]
        sched.last_epoch = t
    sched._last_lr = [group["lr"]]
    return True


def _sequential_child(sched: torch_lr.LRScheduler, t: int) -> tuple[int, int]:
    """The index of a SequentialLR's child that runs step ``t``, and the step its own count starts from.

    At a milestone SequentialLR restarts the child with ``step(0)``: the child runs from its own step 0 there.
    """
    milestones = sched._milestones
    idx = bisect_right(milestones, t)
    return idx, milestones[idx - 1] if idx else 0


def _last_acting_step(child: torch_lr.LRScheduler) -> int | float:
    """The last step at which a chainable ``child``'s ``get_lr`` changes the LR (``inf`` when it never stops)."""
    name = type(child).__name__
    if name in ("ConstantLR", "LinearLR", "PolynomialLR"):
        return child.total_iters
    if name == "MultiStepLR":
        return max(child.milestones, default=0)
    return math.inf


def _seek(sched: torch_lr.LRScheduler, t: int) -> bool:
    """Put a freshly built ``sched`` at step ``t`` without stepping; False when this class cannot jump exactly.

    Afterwards the optimizer's LR is torch's value at ``t`` and the next ``step()`` continues from there.
    """
    group = sched.optimizer.param_groups[0]
    name = type(sched).__name__
    if name == "SequentialLR":
        idx, offset = _sequential_child(sched, t)
        if not _seek(sched._schedulers[idx], t - offset):
            return False
        sched.last_epoch = t
    elif name == "ChainedScheduler" and all(_is_factor(c, t) for c in sched._schedulers):
        product = 1.0  # the children's closed forms multiply: O(1)
        for child in sched._schedulers:
            product *= _closed_form(child, t)  # type: ignore[operator]
        group["lr"] = product
        for child in sched._schedulers:
            child._last_lr = [product]
    elif name == "ChainedScheduler" or name in _ABSOLUTE:
        # Absolute classes: exact counters and torch's get_lr, O(1); other chains: torch's recursion on a float.
        return _replay(sched, 0, t)
    else:
        value = _closed_form(sched, t)
        if value is None:
            return False
        group["lr"] = value
    sched._last_lr = [group["lr"]]
    return True


class TorchLRScheduler(ComposerScheduler, metaclass=ValidatedMeta):
    r"""A :mod:`torch.optim.lr_scheduler` class by name, stepped once per batch, as a pure Composer scheduler.

    .. math::
        \alpha(t) = \mathrm{lr}_{\text{torch}}\bigl(\lfloor t / \mathrm{ssr} \rfloor\bigr)

    where :math:`t` is ``state.timestamp.batch`` and :math:`\mathrm{lr}_{\text{torch}}(n)` is the LR that
    ``torch.optim.lr_scheduler.<type>(optimizer, **kwargs)`` gives after :math:`n` calls of ``.step()`` on an
    optimizer with one param group of base LR 1.0. The value is computed by such a torch scheduler, kept privately
    and advanced from where it was last asked (one ``.step()`` per batch); a backwards or far jump rebuilds it and
    uses torch's closed form where it has one, so the multiplier is a pure function of the batch count and resume
    is exact (to 1e-9 relative; see ``docs/torch_lr_scheduler.md``).

    ``SequentialLR`` and ``ChainedScheduler`` take their children as configs: ``schedulers: [{type: LinearLR,
    start_factor: 0.1, total_iters: 100}, {type: CosineAnnealingLR, T_max: 900}]``.

    LRs that torch treats as absolute (``OneCycleLR.max_lr``, ``CyclicLR.base_lr``/``max_lr``) are multipliers of
    the optimizer's LR here. Momentum cycling (``cycle_momentum``) acts on the private optimizer only.

    Args:
        type (str): The torch class name, e.g. ``"StepLR"``. ``ReduceLROnPlateau``, ``LambdaLR`` and
            ``MultiplicativeLR`` are refused (they need a metric or a Python callable).
        **kwargs: The torch class's own keyword arguments, except ``optimizer`` and ``last_epoch``.

    Raises:
        ConfigError: for an unknown or refused ``type``, an unknown, reserved or missing argument, or arguments
            that torch rejects (checked by building the scheduler and taking two steps).
    """

    _yaml_prefix = "scheduler"

    def __init__(self, type: str, **kwargs: Any) -> None:
        self.type = type
        self.kwargs = kwargs
        self._spec = _spec("scheduler", type, kwargs)
        self._total_steps = math.inf  # OneCycleLR's last defined step
        self._quiet: frozenset[int] = frozenset()
        try:
            probe = _fresh(self._spec)
            if type == "OneCycleLR":
                self._total_steps = probe.total_steps
            if type == "SequentialLR":
                # SequentialLR restarts a child with the deprecated step(epoch) form at each milestone.
                self._quiet = frozenset(probe._milestones)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for _ in range(2):
                    probe.step()
        except (ValueError, TypeError, ZeroDivisionError, KeyError) as err:
            raise ConfigError("scheduler", f"torch.optim.lr_scheduler.{type} rejected the arguments: {err}") from None
        self._reset(0)

    def _reset(self, t: int) -> None:
        """Rebuild the private torch scheduler at step ``t``: jump when the class allows it, else step there."""
        self._sched = _fresh(self._spec)
        self._group = self._sched.optimizer.param_groups[0]
        self._t = 0
        if t > _JUMP and _seek(self._sched, t):
            self._t = t
        self._lr = float(self._group["lr"])
        self._advance(t)

    def _advance(self, t: int) -> None:
        """Move forward to step ``t``: replayed on a float (bit-identical, ~0.2 µs a step), else torch's steps."""
        if t > self._t and _replay(self._sched, self._t, t):
            self._t = t
            self._lr = float(self._group["lr"])
            return
        step = self._sched.step
        quiet = self._quiet
        for n in range(self._t + 1, t + 1):
            if n in quiet:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    step()
            else:
                step()
        self._t = t
        self._lr = float(self._group["lr"])

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        t = state.timestamp.batch.value
        if ssr != 1.0:
            t = int(t / ssr + 1e-9)  # the tolerance keeps e.g. 7 / 0.1 at 70 steps, not 69
        if t == self._t:
            return self._lr
        if t > self._total_steps:
            raise ConfigError(
                "scheduler.total_steps",
                f"OneCycleLR is defined for {self._total_steps} steps but batch {state.timestamp.batch.value} was "
                f"reached (ssr={ssr}); set total_steps (or epochs * steps_per_epoch) to at least max_duration in "
                "batches",
            )
        if t == self._t + 1 and t not in self._quiet:  # the per-batch path: one torch step
            self._sched.step()
            self._t = t
            self._lr = self._group["lr"]
            return self._lr
        if t < self._t or (t - self._t > _JUMP and self._jumps_in_constant_time(t)):
            self._reset(t)
        else:
            self._advance(t)
        return self._lr

    def _jumps_in_constant_time(self, t: int) -> bool:
        """Whether a rebuild at ``t`` is O(1): every class but a ChainedScheduler that has to replay from 0."""
        if self.type != "ChainedScheduler":
            return True
        children = self._sched._schedulers
        return all(_is_factor(c, t) for c in children) or any(type(c).__name__ in _ABSOLUTE for c in children)
