"""The engine of ``torch_lr_scheduler``: a private torch scheduler whose LR after ``t`` steps is the multiplier.

The value is computed *by* a real torch scheduler on a dummy one-parameter optimizer with LR 1.0, so torch's
arithmetic is the truth by construction. :class:`TorchSchedule` keeps it and advances it from where it was last asked
(one ``.step()`` per batch); a backwards or far jump rebuilds it and uses torch's closed form where it has one, or
replays torch's own per-step expressions on a float (bit-identical), so the multiplier is a pure function of the step
and resume is exact (see ``docs/torch_lr_scheduler.md``). Imports torch, not Composer: ``foundry-ext plot`` uses it
directly.
"""

from __future__ import annotations

import math
import warnings
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.optim import lr_scheduler as torch_lr

__all__ = ["TorchSchedule", "spec_of"]

_COMPOSITE = ("SequentialLR", "ChainedScheduler")
# Chainable classes whose step is ``lr <- lr * factor(t)``: inside a ChainedScheduler their product is the LR.
_MULTIPLICATIVE = ("StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR")
# Classes whose LR at a step ignores the LR they are handed (their get_lr reads only their own counters).
_ABSOLUTE = ("CosineAnnealingWarmRestarts", "OneCycleLR", "CyclicLR")

# A gap larger than this is crossed by a closed-form jump instead of stepping; smaller gaps are stepped, which is
# torch's own recursion bit for bit. 10,000 steps cost at most ~70 ms (ChainedScheduler, the slowest step).
_JUMP = 10_000


def spec_of(type_: str, kwargs: dict[str, Any]) -> tuple[type, dict]:
    """``(torch class, kwargs)`` for :func:`_construct`; children given as ``(type, kwargs)`` become specs too."""
    kwargs = dict(kwargs)
    if "schedulers" in kwargs:
        kwargs["schedulers"] = [spec_of(t, kw) for t, kw in kwargs["schedulers"]]
    return getattr(torch_lr, type_), kwargs


def _construct(spec: tuple[type, dict], optimizer: torch.optim.Optimizer) -> torch_lr.LRScheduler:
    cls, kwargs = spec
    if cls.__name__ in _COMPOSITE:
        kwargs = dict(kwargs, schedulers=[_construct(s, optimizer) for s in kwargs["schedulers"]])
    if cls.__name__ == "ChainedScheduler":
        return cls(optimizer=optimizer, **kwargs)
    return cls(optimizer, **kwargs)


class _LROnlyOptimizer(torch.optim.Optimizer):
    """The private optimizer a torch scheduler drives: one param group with LR 1.0 (and SGD's momentum), no params.

    ``Optimizer.__init__`` is not called: torch 2.7 decorates it with ``@torch._disable_dynamo``, which imports
    ``torch._dynamo`` (3-6 s) on the first call, and ``foundry-ext validate``/``plot`` would pay that for an object
    that only holds an LR. A scheduler reads and writes ``param_groups`` and ``defaults`` (``momentum`` for
    ``cycle_momentum``) and wraps ``step``; that is all this provides. The torch parity tests
    (``tests/schedules/test_torch_lr.py``) run every class on it against torch on a real SGD, bit for bit.
    """

    def __init__(self) -> None:
        self.defaults = {"lr": 1.0, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False}
        self.state: dict = {}
        self.param_groups = [{"params": [], **self.defaults}]
        # torch warns at the first scheduler step unless optimizer.step() ran; this optimizer never steps
        self._opt_called = True

    def step(self, closure: Any = None) -> None:
        del closure


def _fresh(spec: tuple[type, dict]) -> torch_lr.LRScheduler:
    """A new torch scheduler at step 0 on a private optimizer whose one param group has LR 1.0."""
    return _construct(spec, _LROnlyOptimizer())


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


class TorchSchedule:
    """The multiplier of a torch scheduler after ``t`` steps, for any ``t``, in any order (see the module docstring).

    Args:
        type_ (str): the torch class name.
        kwargs (dict): its arguments (children of SequentialLR / ChainedScheduler as ``(type, kwargs)`` pairs).

    Raises:
        ValueError, TypeError, ZeroDivisionError, KeyError: torch rejects the arguments (building the scheduler and
            taking two steps). The config models make this unreachable for validated configs.
    """

    def __init__(self, type_: str, kwargs: dict[str, Any]) -> None:
        self.type = type_
        self._spec = spec_of(type_, kwargs)
        self.total_steps: int | float = math.inf  # OneCycleLR's last defined step
        self._quiet: frozenset[int] = frozenset()
        probe = _fresh(self._spec)
        if type_ == "OneCycleLR":
            self.total_steps = probe.total_steps
        if type_ == "SequentialLR":
            # SequentialLR restarts a child with the deprecated step(epoch) form at each milestone.
            self._quiet = frozenset(probe._milestones)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(2):
                probe.step()
        self._reset(0)

    def at(self, t: int) -> float:
        """The multiplier after ``t`` steps (``t <= total_steps``)."""
        if t == self._t:
            return self._lr
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

    def _jumps_in_constant_time(self, t: int) -> bool:
        """Whether a rebuild at ``t`` is O(1): every class but a ChainedScheduler that has to replay from 0."""
        if self.type != "ChainedScheduler":
            return True
        children = self._sched._schedulers
        return all(_is_factor(c, t) for c in children) or any(type(c).__name__ in _ABSOLUTE for c in children)
