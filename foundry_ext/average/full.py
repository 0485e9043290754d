r"""The weighted average of the model weights of ``.pt`` checkpoints, holding at most two models in memory.

.. math::
    \bar\theta = \sum_{i=1}^{n} w_i\, \theta_i, \qquad \sum_i w_i = 1

accumulated oldest first in ``float32`` (``float64`` for ``float64`` weights) and written in each tensor's own dtype.
Each checkpoint is read with the safe reader (its tensors mapped, not read, until used); the accumulator and the
checkpoint being added are the two models held. Floating-point tensors of ``state.model`` are averaged (a NaN or an
infinity in one is refused: :func:`check_finite`); any other (an integer buffer) is the newest checkpoint's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from foundry_ext.average.options import AverageError
from foundry_ext.average.source import Header, load

__all__ = ["accumulator_dtype", "average_full", "check_finite", "model_of", "signature"]


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype sums of ``dtype`` are kept in: at least ``float32``."""
    return torch.promote_types(dtype, torch.float32)


def model_of(checkpoint: Mapping[str, Any], shown: str) -> Mapping[str, torch.Tensor]:
    """``state.model`` of a checkpoint: names to tensors.

    Raises:
        AverageError: no ``state.model``, or a value in it that is not a tensor.
    """
    model = checkpoint["state"].get("model")
    if not isinstance(model, Mapping) or not model:
        raise AverageError(f"CKPT {shown}: holds no model weights (state.model)")
    for name, value in model.items():
        if not isinstance(value, torch.Tensor):
            raise AverageError(f"CKPT {shown}: state.model[{str(name)[:200]!r}] is not a tensor")
    return model


def check_finite(tensor: torch.Tensor, shown: str, name: str) -> None:
    """Refuse a model tensor holding a NaN or an infinity: the average would hold it too, written without a word.

    Raises:
        AverageError: one line naming the checkpoint and the tensor.
    """
    if not bool(torch.isfinite(tensor).all()):
        raise AverageError(
            f"CKPT {shown}: model tensor {str(name)[:200]!r} holds NaN or infinite values (a diverged checkpoint?); "
            "allowed: finite weights only"
        )


def signature(model: Mapping[str, torch.Tensor]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Each tensor's shape and dtype: what must agree between checkpoints averaged together."""
    return {name: (tuple(t.shape), t.dtype) for name, t in model.items()}


def check_same_model(reference: Header, ref_sig: Mapping[str, Any], other: Header, sig: Mapping[str, Any]) -> None:
    """Refuse ``other`` unless its tensors have ``reference``'s names, shapes and dtypes (the first difference)."""
    for name in ref_sig.keys() | sig.keys():
        mine, theirs = sig.get(name), ref_sig.get(name)
        if mine == theirs:
            continue
        shown = str(name)[:200]
        if mine is None or theirs is None:
            has, lacks = (other, reference) if theirs is None else (reference, other)
            raise AverageError(
                f"CKPT {other.item.shown}: model tensor {shown!r} is in {has.item.shown} but not in "
                f"{lacks.item.shown}; average checkpoints of one model"
            )
        what = "shape" if mine[0] != theirs[0] else "dtype"
        a, b = (mine[0], theirs[0]) if what == "shape" else (mine[1], theirs[1])
        raise AverageError(
            f"CKPT {other.item.shown}: model tensor {shown!r} has {what} {a}, {reference.item.shown} {b}; "
            "average checkpoints of one model"
        )


def average_full(ordered: list[Header], weights: list[float], progress: Callable[[str], None]) -> dict[str, Any]:
    """The newest checkpoint of ``ordered`` with ``state.model`` replaced by the weighted average.

    Args:
        ordered (list[Header]): The checkpoints, oldest first, already checked to be of one run and one model.
        weights (list[float]): One weight per checkpoint, summing to 1.
        progress (Callable[[str], None]): Told one line per checkpoint read.
    """
    acc: dict[str, torch.Tensor] = {}
    newest: dict[str, Any] = {}
    for i, (header, w) in enumerate(zip(ordered, weights, strict=True)):
        progress(f"[{i + 1}/{len(ordered)}] {header.item.shown} (batch {header.batch}, weight {w:.6g})")
        checkpoint = load(header.item)
        model = model_of(checkpoint, header.item.shown)
        with torch.no_grad():
            for name, t in model.items():
                if not t.is_floating_point():
                    continue
                check_finite(t, header.item.shown, name)
                if name not in acc:
                    acc[name] = torch.zeros(t.shape, dtype=accumulator_dtype(t.dtype))
                acc[name].add_(t.to(acc[name].dtype), alpha=w)
        if i == len(ordered) - 1:
            newest = checkpoint
        del checkpoint, model  # the next one is loaded with only the accumulator held
    model = newest["state"]["model"]
    for name, total in acc.items():
        model[name] = total.to(model[name].dtype)
    return newest
