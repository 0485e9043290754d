"""Config errors: one line per problem, ``<yaml.path>: <problem>; <what is allowed>``.

llm-foundry builds a scheduler with ``cls(**scheduler_config)`` and a callback with ``cls(**kwargs)``. Without this,
a typo or a bad value would surface as a Python error that names neither the YAML field nor the fix, sometimes hours
into a run. Every config of this package is a pydantic model (:mod:`foundry_ext.config.base`); its validation errors
are turned into :class:`Problem` lines (defined here) by :mod:`foundry_ext.config.problems`, all of them at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import os
import sys
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from foundry_ext._exit import end_with_at_exit

__all__ = [
    "ConfigError",
    "Problem",
    "RunStopped",
    "current_path",
    "did_you_mean",
    "join_path",
    "let_rank_zero_exit_first",
    "not_a_scheduler",
    "stop_run",
    "unknown_keys",
    "yaml_path",
]


@dataclass(frozen=True)
class Problem:
    """One config problem: the YAML path of the field and what is wrong with it (and what is allowed)."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ConfigError(ValueError):
    """A config is wrong. ``str(error)`` is one line per problem: ``<yaml.field>: <problem>; <what is allowed>``.

    Args:
        field (str | Iterable[Problem]): The YAML path of the field (``scheduler.t_decay``), or the problems.
        message (str, optional): What is wrong, when ``field`` is a path.
    """

    def __init__(self, field: str | Iterable[Problem], message: str | None = None) -> None:
        if isinstance(field, str):
            problems = [Problem(field, message or "")]
        else:
            problems = list(field)
        if not problems:
            raise ValueError("ConfigError needs at least one problem")
        self.problems: list[Problem] = problems
        self.field = problems[0].field
        super().__init__("\n".join(str(p) for p in problems))


class RunStopped(SystemExit, ConfigError):
    """A :class:`ConfigError` found while training, its lines already printed (:func:`stop_run`).

    It is a ``SystemExit`` with status 2 as well: uncaught, it ends the process without llm-foundry's traceback (Python
    prints none for a ``SystemExit``), so the one line per problem is the whole answer. Code that catches
    ``ConfigError`` (or ``ValueError``) still does, and ``str(error)`` is the problem lines.

    Raised where the package stops a run before its first batch: the pre-flight config transforms, the scheduler's
    first call while the Trainer is built, a plateau's checks at ``FIT_START``. Every rank raises it (each checks the
    same config); under the composer launcher each rank then exits 2.
    """

    def __init__(self, field: str | Iterable[Problem], message: str | None = None) -> None:
        ConfigError.__init__(self, field, message)
        self.code = 2


def did_you_mean(word: str, options: Sequence[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest option, or ``""`` when none is close.

    A case-insensitive exact match wins (``steplr`` -> ``StepLR``), since difflib is case-sensitive.
    """
    same = [o for o in options if o.lower() == word.lower()]
    close = same or difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def unknown_keys(block: Mapping[str, object], allowed: Collection[str], path: str, why: str) -> list[Problem]:
    """One problem per key of ``block`` not in ``allowed``: ``<path>.<key>: unknown key (did you mean 'x'?)<why>``.

    ``path`` is the block's YAML path (``""`` at the top level); ``why`` follows the suggestion and says what the stack
    does with such a key (``": MPTConfig keeps it without using it"``).
    """
    options = sorted(allowed)
    return [
        Problem(f"{path}.{key}" if path else str(key), f"unknown key{did_you_mean(str(key), options)}{why}")
        for key in block
        if key not in allowed
    ]


# Short names people type for a scheduler (the README says "WSD"); each maps to a registered name.
SCHEDULER_ALIASES = {
    "wsd": "warmup_stable_decay",
    "warmup_stable": "warmup_stable_decay",
    "wsds": "wsd_periods",
    "cosine_warmup": "cosine_with_warmup",
    "warmup_cosine": "cosine_with_warmup",
    "linear_warmup": "linear_decay_with_warmup",
    "cosine_annealing": "cosine",
    "plateau": "reduce_lr_on_plateau",
    "reduce_on_plateau": "reduce_lr_on_plateau",
    "reducelronplateau": "reduce_lr_on_plateau",
    "inv_sqrt": "inverse_sqrt",
    "torch": "torch_lr_scheduler",
}


def scheduler_did_you_mean(name: str, names: Sequence[str]) -> str:
    """:func:`did_you_mean` for a ``scheduler.name``, knowing the short names users type (``wsd``, ``plateau``)."""
    alias = SCHEDULER_ALIASES.get(name.lower().replace("-", "_"))
    if alias in names:
        return f" (did you mean '{alias}'?)"
    return did_you_mean(name, names)


def not_a_scheduler(name: object, names: Sequence[str], *, callbacks: Sequence[str] = ()) -> str:
    """The problem of a ``scheduler.name`` (or ``scheduler.base.name``) no registry holds: the one wording of it.

    ``'wsdd' is not a registered scheduler (did you mean 'wsd'?); `foundry-ext schedulers` lists all``. Given
    ``callbacks`` (``foundry-ext schedulers NAME`` looks a name up among this package's callbacks too), the guess is
    made among both and both lists are given, since the command's own listing shows only the schedulers.

    Args:
        name (object): The name as the YAML or the command line gave it.
        names (Sequence[str]): The registered scheduler names.
        callbacks (Sequence[str], optional): This package's callback names, when they were searched too.
    """
    hint = scheduler_did_you_mean(str(name), [*names, *callbacks])
    if callbacks:
        return (
            f"{name!r} is not a registered scheduler{hint} nor one of this package's callbacks; "
            f"schedulers: {', '.join(names)}; callbacks: {', '.join(callbacks)}"
        )
    return f"{name!r} is not a registered scheduler{hint}; `foundry-ext schedulers` lists all"


def join_path(prefix: str, loc: Iterable[str | int]) -> str:
    """``("schedulers", 1, "T_max")`` under ``scheduler`` -> ``scheduler.schedulers[1].T_max``."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


# The YAML path of the block being built: ``scheduler`` for the top-level scheduler, ``scheduler.base`` while the
# plateau scheduler builds its base. llm-foundry builds schedulers with ``cls(**kwargs)``, so the path cannot be an
# argument.
_PATH: contextvars.ContextVar[str | None] = contextvars.ContextVar("foundry_ext_yaml_path", default=None)


@contextlib.contextmanager
def yaml_path(path: str) -> Iterator[None]:
    """Blocks built inside this ``with`` name their fields ``<path>.<key>`` in errors."""
    token = _PATH.set(path)
    try:
        yield
    finally:
        _PATH.reset(token)


def current_path(default: str = "scheduler") -> str:
    """The YAML path set by :func:`yaml_path`, or ``default``."""
    return _PATH.get() or default


def stop_run(problems: Sequence[Problem]) -> NoReturn:
    """End a run before its first batch: one line per problem, then :class:`RunStopped`.

    The lines (``foundry-ext: error: <problem>``, on global rank 0's stderr) are the whole answer: ``RunStopped`` is
    a ``SystemExit`` with status 2, which ends the process without a traceback and without printing itself. On a
    launched rank the process then ends by ``os._exit(2)`` after the exit handlers (:mod:`foundry_ext._exit`): raised
    once the process group exists (the scheduler's first call, ``FIT_START``), a plain ``SystemExit`` can abort at
    interpreter finalisation beside a gloo worker thread.
    """
    if os.environ.get("RANK", "0") == "0":
        for problem in problems:
            print(f"foundry-ext: error: {problem}", file=sys.stderr, flush=True)
    else:
        let_rank_zero_exit_first()
    end_with_at_exit(2)
    raise RunStopped(list(problems)) from None


#: Seconds a rank other than 0 waits before it ends a refused run (see :func:`let_rank_zero_exit_first`).
PEER_GRACE_SECONDS = 20.0


def let_rank_zero_exit_first() -> None:
    """On a rank other than 0 of a multi-rank run, wait (at most ``PEER_GRACE_SECONDS``) before ending the run.

    Composer's launcher ends the run with the status of the first rank to fail and SIGTERMs the others: a rank 1 that
    reached a refusal first made the launcher kill rank 0 (its line unprinted or not, the status 241, not 2). Every
    rank runs the same checks on the same config, so rank 0 gets there too, prints the line, exits 2, and the launcher
    stops this rank; should it not, this rank ends the run with the same status after the wait.
    """
    if os.environ.get("RANK", "0") != "0" and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        time.sleep(PEER_GRACE_SECONDS)
