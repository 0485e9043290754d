"""CSV run logs, read line by line in bounded time and memory.

Bounds (each refused in one line naming the file and line): a line longer than :data:`MAX_LINE` characters, more
than :data:`MAX_ROWS` rows, a step beyond :data:`MAX_BATCHES` (the law expands the LR to one value per batch).
Accepted: a UTF-8 BOM, Windows line ends, extra columns, scientific notation, blank lines.
"""

from __future__ import annotations

import csv
import math
import os
import stat
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from foundry_ext.runlog.errors import RunLogError
from foundry_ext.runlog.log import LrLossLog

__all__ = ["MAX_BATCHES", "MAX_LINE", "MAX_ROWS", "read_lr_loss_csv", "read_series_csv"]

MAX_LINE = 65_536  # characters of one line (the csv module's own field limit is 131,072)
MAX_ROWS = 2_000_000  # rows of one file: about 3 s to read; a longer log can be thinned (the LR is linear between)
MAX_BATCHES = 10_000_000  # batches a law trace covers: 80 MB of float64 per copy of its LR


class _Lines:
    """The lines of a file as text, one at a time; ``lineno`` is the number of the last line given."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lineno = 0
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise RunLogError(f"{path}: no such file") from None
        except OSError as e:
            raise RunLogError(f"{path}: cannot read: {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise RunLogError(f"{path}: a folder without MLflow's meta.yaml: expected a CSV file or an MLflow run")
        if not stat.S_ISREG(st.st_mode):
            raise RunLogError(f"{path}: not a regular file (a pipe or a device?); expected a CSV file")
        try:
            self._file = open(path, "rb")
        except OSError as e:
            raise RunLogError(f"{path}: cannot read: {e.strerror}") from None

    def __iter__(self) -> Iterator[str]:
        with self._file as f:
            while True:
                try:
                    raw = f.readline(MAX_LINE + 2)
                except OSError as e:
                    raise RunLogError(f"{self.path}: cannot read: {e.strerror}") from None
                if not raw:
                    return
                self.lineno += 1
                if len(raw) > MAX_LINE + 1 or (len(raw) > MAX_LINE and not raw.endswith(b"\n")):
                    raise RunLogError(
                        f"{self.path}:{self.lineno}: a line longer than {MAX_LINE:,} characters; expected short "
                        "comma-separated rows"
                    )
                if self.lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]  # a UTF-8 BOM (spreadsheets write one)
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise RunLogError(
                        f"{self.path}:{self.lineno}: byte 0x{raw[e.start]:02x} at column {e.start + 1} is not UTF-8; "
                        "expected a UTF-8 (or ASCII) CSV file"
                    ) from None


def _rows(lines: _Lines) -> Iterator[list[str]]:
    reader = csv.reader(lines)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            where = f"{lines.path}:{lines.lineno}"
            raise RunLogError(f"{where}: not a CSV row ({e}); expected comma-separated values") from None
        if lines.lineno > MAX_ROWS + 1:
            raise RunLogError(
                f"{lines.path}:{lines.lineno}: more than {MAX_ROWS:,} rows; keep a row every few batches (the LR "
                "is linear between rows) or fewer metric values"
            )
        yield row


def _number(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RunLogError(f"{where}: {column} {text[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise RunLogError(f"{where}: {column} {text} is not finite; expected a finite number")
    return value


def _step(text: str, where: str, column: str) -> int:
    value = _number(text, where, column)
    if value != int(value) or value < 0:
        raise RunLogError(f"{where}: {column} {text} must be an integer >= 0 (a batch count)")
    if value > MAX_BATCHES:
        raise RunLogError(f"{where}: {column} {text} is beyond the {MAX_BATCHES:,} batches a run log may cover")
    return int(value)


def read_lr_loss_csv(path: str) -> LrLossLog:
    """A ``step,lr,loss`` CSV.

    A header names the columns ``step,lr,loss`` in any order (more columns are ignored); ``lr`` is the LR of the
    0-indexed batch ``step``, linear between two rows; ``loss`` is the loss after ``step`` batches, empty on rows
    that only pin the LR. The log covers batches ``0 .. last step``.
    """
    lines = _Lines(path)
    rows = _rows(lines)
    header = next(rows, None)
    cols = [c.strip().lower() for c in header] if header else []
    missing = [c for c in ("step", "lr", "loss") if c not in cols]
    if missing:
        shown = ",".join(header or [])[:80] or "none"
        raise RunLogError(
            f"{path}: the header must name the columns step,lr,loss; missing {','.join(missing)} (header: {shown})"
        )
    i_step, i_lr, i_loss = (cols.index(c) for c in ("step", "lr", "loss"))
    width = len(cols)
    steps, lrs = array("q"), array("d")
    loss_steps, losses = array("q"), array("d")
    last = -1
    for row in rows:
        if len(row) < width:
            if not any(c.strip() for c in row):
                continue
            row = row + [""] * (width - len(row))
        where = f"{path}:{lines.lineno}"
        step = _step(row[i_step].strip(), where, "step")
        if step <= last:
            raise RunLogError(f"{where}: step {step} does not increase (the row before has step {last})")
        lr = _number(row[i_lr].strip(), where, "lr")
        if lr < 0:
            raise RunLogError(f"{where}: lr {row[i_lr].strip()} is negative; expected an LR >= 0")
        steps.append(step)
        lrs.append(lr)
        last = step
        text = row[i_loss].strip()
        if text:
            loss = _number(text, where, "loss")
            if loss <= 0:
                raise RunLogError(f"{where}: loss {text} must be > 0 (a cross-entropy)")
            loss_steps.append(step)
            losses.append(loss)
    if not steps:
        raise RunLogError(f"{path}: no rows after the header; expected rows step,lr,loss")
    if steps[0] != 0:
        raise RunLogError(f"{path}: the first row must be step 0 (the LR of the first batch), not step {steps[0]}")
    return LrLossLog(
        name=Path(path).stem,
        source=path,
        lr_steps=np.frombuffer(steps, dtype=np.int64),
        lrs=np.frombuffer(lrs, dtype=np.float64),
        loss_steps=np.frombuffer(loss_steps, dtype=np.int64),
        losses=np.frombuffer(losses, dtype=np.float64),
        batches=last + 1,
        between="linear",
    )


def read_series_csv(path: str) -> list[tuple[int, float]]:
    """Rows ``batch,value`` in order (a ``ba`` suffix allowed); a first row that is not numeric is a header.

    Lines starting with ``#`` and blank lines are skipped; more columns are ignored.
    """
    lines = _Lines(path)
    rows: list[tuple[int, float]] = []
    last = -1
    for row in _rows(lines):
        cells = [c.strip() for c in row[:2]]
        if not any(cells) or cells[0].startswith("#"):
            continue
        where = f"{path}:{lines.lineno}"
        if len(cells) < 2:
            raise RunLogError(f"{where}: expected 'batch,value', got {','.join(row)[:80]!r}")
        try:
            batch_f, value = float(cells[0].removesuffix("ba")), float(cells[1])
        except ValueError:
            if not rows and lines.lineno == 1:
                continue  # header
            raise RunLogError(f"{where}: expected 'batch,value' numbers, got {','.join(row)[:80]!r}") from None
        if not math.isfinite(value):
            raise RunLogError(f"{where}: value {cells[1]} is not finite; expected a finite metric value")
        if not math.isfinite(batch_f) or batch_f < 0 or batch_f != int(batch_f):
            raise RunLogError(f"{where}: batch {cells[0]} must be an integer >= 0")
        batch = int(batch_f)
        if batch < last:
            raise RunLogError(f"{where}: batch {batch} comes after batch {last}; sort the rows by batch")
        rows.append((batch, value))
        last = batch
    if not rows:
        raise RunLogError(f"{path}: no 'batch,value' rows")
    return rows
