"""The options of ``foundry-ext anneal`` read and checked before any checkpoint is opened (no torch, no Composer)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from foundry_ext.config.durations import Duration, DurationError, dur_length, parse

__all__ = ["AnnealError", "DecayLength", "parse_decay", "parse_floor", "parse_shape"]


class AnnealError(Exception):
    """Bad input to ``foundry-ext anneal``: one line naming the option or file, the value and what is allowed."""


@dataclass(frozen=True)
class DecayLength:
    """``--decay LEN`` as given: batches, tokens, samples, or a fraction of the whole branched run (``dur``)."""

    duration: Duration

    def batches(self, start: int, tokens_per_batch: int | None, samples_per_batch: int | None) -> int:
        """The decay's length in batches for a branch from batch ``start``.

        ``dur``: the fraction ``f`` of the whole branched run ``start + LEN``, as ``t_decay: 0.2dur`` means for
        ``warmup_stable_decay`` with ``max_duration = start + LEN``
        (:func:`~foundry_ext.config.durations.dur_length`: ``0.2dur`` from batch 8000 is 2000 batches).

        Raises:
            AnnealError: not a whole number of batches, 0 batches, or a ``dur`` no branch length gives.
        """
        d, shown = self.duration, f"--decay {self.duration}"
        if d.unit == "ba":
            n = int(d.value)
        elif d.unit in ("tok", "sp"):
            per = tokens_per_batch if d.unit == "tok" else samples_per_batch
            name = "tokens" if d.unit == "tok" else "samples"
            if not per:
                raise AnnealError(f"{shown}: the checkpoint does not say how many {name} a batch holds; give ba")
            if d.value % per:
                raise AnnealError(
                    f"{shown}: not a whole number of batches ({per} {name} per batch in the checkpoint's run); give "
                    f"a multiple of {per}, e.g. {max(1, round(d.value / per)) * per}{d.unit}"
                )
            n = int(d.value) // per
        else:  # dur, 0 < f < 1 checked by parse_decay
            try:
                n = dur_length(float(d.value), start)
            except DurationError as e:
                raise AnnealError(f"{shown}: {e}") from None
        if n <= 0:
            raise AnnealError(f"{shown}: a decay of 0 batches; expected at least 1 batch")
        return n


def parse_decay(text: str) -> DecayLength:
    """``--decay LEN``: ``2000ba``, ``4096000tok``, ``512sp`` or ``0.2dur`` (0 < f < 1)."""
    allowed = "expected a length such as '2000ba', '4096000tok', '512sp' or '0.2dur' (a fraction of the branched run)"
    try:
        d = parse(text)
    except DurationError as e:
        raise AnnealError(f"--decay {text}: {e}") from None
    if d.unit == "ep":
        raise AnnealError(f"--decay {text}: epochs are not allowed; {allowed}")
    if d.unit == "dur" and not 0.0 < d.value < 1.0:
        raise AnnealError(f"--decay {text}: a fraction of the branched run must be in (0, 1); {allowed}")
    if d.value <= 0:
        raise AnnealError(f"--decay {text}: a decay of 0 batches; {allowed}")
    return DecayLength(d)


def parse_floor(text: str) -> float:
    """``--floor ALPHA``: the final LR as a fraction of the peak, in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise AnnealError(f"--floor {text}: expected a number in [0, 1] (the final LR as a fraction of the peak LR)")
    return value


def parse_shape(text: str) -> str:
    """``--shape SHAPE``: a decay shape of ``warmup_stable_decay`` (:data:`~foundry_ext.schedules.wsd.DECAY_TYPES`)."""
    from foundry_ext.schedules.wsd import DECAY_TYPES  # pydantic's models: imported once an option needs them

    if text not in DECAY_TYPES:
        raise AnnealError(f"--shape {text}: not a decay shape; allowed: {', '.join(DECAY_TYPES)}")
    return text
