"""The options of ``foundry-ext average`` read and checked before any checkpoint is opened (standard library only).

* ``--weights``: ``uniform`` (the default), ``exp:BETA`` or a list ``W1,W2,...`` (:func:`parse_weights`, turned into
  one weight per checkpoint by :func:`weights_for`);
* ``--last K``, ``--every N``, ``--batches A:B``: which checkpoints of a save folder (:class:`Selection`);
* ``--out``: where the average goes (:func:`check_out`).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from foundry_ext.outputs import missing_folder

__all__ = ["AverageError", "Selection", "Weights", "check_out", "parse_selection", "parse_weights", "weights_for"]


class AverageError(Exception):
    """Bad input to ``foundry-ext average``: one line naming the option or checkpoint, the value and what is allowed."""


@dataclass(frozen=True)
class Weights:
    """``--weights`` as given: ``kind`` is ``"uniform"``, ``"exp"`` (``beta``) or ``"list"`` (``values``)."""

    kind: str
    beta: float = 1.0
    values: tuple[float, ...] = ()
    text: str = "uniform"


def _number(text: str, shown: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise AverageError(f"{shown}: {text.strip()!r} is not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise AverageError(f"{shown}: {text.strip()} is not a finite number")
    return value


def parse_weights(text: str) -> Weights:
    """Read ``--weights``: ``uniform``, ``exp:BETA`` (``0 < BETA <= 1``) or ``W1,W2,...`` (finite, positive sum).

    Raises:
        AverageError: anything else, named with the value and what is allowed.
    """
    shown = f"--weights {text}"
    t = text.strip()
    if t == "uniform":
        return Weights("uniform", text=t)
    if t.startswith("exp:"):
        beta = _number(t[4:], shown)
        if not 0 < beta <= 1:
            raise AverageError(f"{shown}: BETA must be in (0, 1] (1 is the uniform average)")
        return Weights("exp", beta=beta, text=t)
    if "," in t or _is_number(t):
        values = tuple(_number(v, shown) for v in t.split(","))
        try:
            total = math.fsum(values)  # the sum weights_for divides by
        except OverflowError:
            total = math.inf
        if math.isinf(total):
            raise AverageError(
                f"{shown}: the weights sum to more than the largest float ({sys.float_info.max:.4g}); scale them "
                "down (only their ratios matter)"
            )
        if not sum(values) > 0:
            raise AverageError(f"{shown}: the weights sum to {sum(values):g}; they must sum to a positive number")
        return Weights("list", values=values, text=t)
    raise AverageError(f"{shown}: expected uniform, exp:BETA (0 < BETA <= 1) or a list of numbers W1,W2,...")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def weights_for(weights: Weights, count: int) -> list[float]:
    r"""One normalised weight per checkpoint, oldest first.

    .. math::
        w_i = \frac{v_i}{\sum_j v_j}, \qquad v_i = \begin{cases}
            1 & \text{uniform} \\
            \beta^{\,n-1-i} & \text{exp:}\beta \text{ (the newest gets } \beta^0 = 1) \\
            W_{i+1} & \text{a list}
        \end{cases}

    Raises:
        AverageError: a list whose length is not ``count``.
    """
    if weights.kind == "uniform":
        raw = [1.0] * count
    elif weights.kind == "exp":
        raw = [weights.beta ** (count - 1 - i) for i in range(count)]
    else:
        if len(weights.values) != count:
            raise AverageError(
                f"--weights {weights.text}: {len(weights.values)} weights for {count} checkpoints; give one per "
                "checkpoint, oldest first"
            )
        raw = list(weights.values)
    total = math.fsum(raw)
    return [v / total for v in raw]


@dataclass(frozen=True)
class Selection:
    """Which checkpoints of a save folder.

    A batch range first, then every ``every``-th counted back from the newest, then the last ``last``; ``None``
    means not given.
    """

    last: int | None = None
    every: int | None = None
    first_batch: int | None = None
    last_batch: int | None = None

    @property
    def given(self) -> bool:
        """Whether any of ``--last``, ``--every``, ``--batches`` was given."""
        return any(v is not None for v in (self.last, self.every, self.first_batch, self.last_batch))

    def apply(self, batches: list[int]) -> list[int]:
        """The selected batches of ``batches`` (sorted ascending), oldest first."""
        chosen = [
            b
            for b in sorted(batches)
            if (self.first_batch is None or b >= self.first_batch) and (self.last_batch is None or b <= self.last_batch)
        ]
        if self.every is not None:
            chosen = chosen[::-1][:: self.every][::-1]  # counted back from the newest: the newest is always kept
        if self.last is not None:
            chosen = chosen[-self.last :]
        return chosen


def _count(text: str | None, option: str, least: int) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise AverageError(f"{option} {text}: not a whole number") from None
    if value < least:
        raise AverageError(f"{option} {text}: must be >= {least}")
    return value


def parse_selection(last: str | None, every: str | None, batches: str | None) -> Selection:
    """Read ``--last K`` (>= 2), ``--every N`` (>= 1) and ``--batches A:B`` (either end may be left out).

    Raises:
        AverageError: a value that is not a whole number in range, or a range whose start is after its end.
    """
    first_batch = last_batch = None
    if batches is not None:
        start, colon, end = batches.partition(":")
        if not colon:
            raise AverageError(f"--batches {batches}: expected A:B, the first and last batch (A: or :B for open ends)")
        first_batch = _count(start.strip() or None, f"--batches {batches}: A =", 0)
        last_batch = _count(end.strip() or None, f"--batches {batches}: B =", 0)
        if first_batch is not None and last_batch is not None and first_batch > last_batch:
            raise AverageError(f"--batches {batches}: the first batch is after the last")
    return Selection(_count(last, "--last", 2), _count(every, "--every", 1), first_batch, last_batch)


#: what the hidden partial output's name adds to ``--out``'s: ``.<name>.average-partial``
PARTIAL_AFFIXES = "." + ".average-partial"


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system of ``folder`` takes (255 where it cannot say)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_out(out: str, sharded: bool, save_folders: list[Path]) -> Path:
    """The output path, refused if it exists, its folder is missing, its name is too long, or it is in a save folder.

    A full average is one ``.pt`` file, a sharded one a folder: either is new. Inside a run's save folder it would
    be taken for one of the run's checkpoints (Composer's ``latest`` link, autoresume, ``checkpoint_guard``'s
    quarantine, checkpoint rotation), so it is refused there.

    Raises:
        AverageError: one line naming ``--out``.
    """
    path = Path(out)
    kind = "folder" if sharded else "file"
    if os.path.lexists(path):
        raise AverageError(f"--out {out}: already exists; the average is written to a new {kind}, never over one")
    problem = missing_folder("--out", out)
    if problem is not None:
        raise AverageError(problem)
    parent = path.absolute().parent
    # the average is first written as .<name>.average-partial beside it (foundry_ext.average.write): that name too
    # must fit the file system's limit, or the write fails after the checkpoints were read
    limit = _name_max(parent)
    if len(os.fsencode(path.name)) + len(PARTIAL_AFFIXES) > limit:
        raise AverageError(
            f"--out {out}: the name is {len(os.fsencode(path.name))} bytes; allowed: at most "
            f"{limit - len(PARTIAL_AFFIXES)} (the file system's {limit}, less the {len(PARTIAL_AFFIXES)} of the hidden "
            "partial's name)"
        )
    where = parent.resolve() / path.name
    for folder in save_folders:
        resolved = folder.resolve()
        if where == resolved or resolved in where.parents:
            raise AverageError(
                f"--out {out}: inside the run's save folder {folder}, where it would be taken for one of the run's "
                "checkpoints; write it elsewhere"
            )
    return path
