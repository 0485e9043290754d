"""``foundry-ext average`` from start to end: every check before anything is written, then one atomic write.

1. which checkpoints (:func:`~foundry_ext.average.selection.select_inputs`), the weights and ``--out`` checked;
2. each checkpoint's run and batch read by the safe reader, its model's names, shapes, dtypes (and, sharded, its
   chunk layout) compared with the newest's;
3. the average written into a hidden sibling of ``--out`` and renamed into place: a kill or an error mid-way
   leaves no ``--out`` (the hidden folder or file is removed on an error; a SIGKILL can leave it, named
   ``.<out>.average-partial``). No checkpoint of the run is ever opened for writing.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from foundry_ext.average.options import AverageError, Selection, Weights, check_out, weights_for
from foundry_ext.average.selection import select_inputs
from foundry_ext.average.source import Header, in_order, load, read_header

__all__ = ["Result", "average"]


@dataclass
class Result:
    """What was averaged and written: the checkpoints (oldest first), their weights, the output."""

    headers: list[Header]
    weights: list[float]
    out: Path
    sharded: bool
    stats: dict[str, int] = field(default_factory=dict)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def average(
    given: list[str],
    selection: Selection,
    weights: Weights,
    out: str,
    progress: Callable[[str], None] = _stderr,
) -> Result:
    """Average the model weights of the checkpoints ``given`` names into the new checkpoint ``out``.

    Args:
        given (list[str]): ``.pt`` files, sharded folders, or one save folder (chosen among with ``selection``).
        selection (Selection): ``--last``, ``--every``, ``--batches``.
        weights (Weights): ``--weights``: applied oldest first.
        out (str): A new ``.pt`` file (``.pt`` inputs) or a new folder (sharded inputs).
        progress (Callable[[str], None]): Told one line per checkpoint checked and per checkpoint or file averaged.

    Raises:
        AverageError: bad input, one line; nothing is written.
    """
    inputs = select_inputs(given, selection)
    sharded = inputs[0].sharded
    out_path = check_out(out, sharded, sorted({i.save_folder for i in inputs}))
    normalised = weights_for(weights, len(inputs))  # a list of the wrong length is refused before any read
    headers = []
    signatures = {}
    for n, item in enumerate(inputs):
        progress(f"checking [{n + 1}/{len(inputs)}] {item.shown}")
        checkpoint = load(item)
        headers.append(read_header(item, checkpoint))
        if not sharded:
            from foundry_ext.average.full import model_of, signature

            signatures[item.path] = signature(model_of(checkpoint, item.shown))
        del checkpoint
    ordered = in_order(headers)
    if sharded:
        from foundry_ext.average.sharded import check_same_layout, read_layout

        layouts = [read_layout(h) for h in ordered]
        for other in layouts[:-1]:
            check_same_layout(layouts[-1], other)
    else:
        from foundry_ext.average.full import check_same_model

        for h in ordered[:-1]:
            check_same_model(ordered[-1], signatures[ordered[-1].item.path], h, signatures[h.item.path])
    partial = out_path.absolute().parent / f".{out_path.name}.average-partial"
    if os.path.lexists(partial):
        raise AverageError(f"--out {out}: {partial} exists (left by a killed average?); remove it first")
    result = Result(ordered, normalised, out_path, sharded)
    try:
        if sharded:
            from foundry_ext.average.sharded import average_sharded

            partial.mkdir()
            result.stats = average_sharded(layouts, normalised, partial, progress)
            if os.path.lexists(out_path):
                raise AverageError(f"--out {out}: appeared while the average was written; left it as it is")
            os.rename(partial, out_path)
        else:
            import torch

            from foundry_ext.average.full import average_full

            checkpoint = average_full(ordered, normalised, progress)
            with open(partial, "xb") as f:
                torch.save(checkpoint, f)
            os.link(partial, out_path)  # fails if out_path appeared meanwhile: never replaces a file
            os.unlink(partial)
    except BaseException:
        if partial.is_dir() and not partial.is_symlink():
            shutil.rmtree(partial, ignore_errors=True)
        elif os.path.lexists(partial):
            os.unlink(partial)
        raise
    return result
