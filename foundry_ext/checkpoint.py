r"""Read Composer checkpoints without trusting them: no code from the file is ever run, every input gets an answer.

A Composer checkpoint is a pickle, and unpickling can call any function the file names (``os.system`` included).
:func:`load_checkpoint_safely` therefore loads with ``torch.load(weights_only=True)`` inside
``torch.serialization.safe_globals`` and an explicit allow-list (:data:`ALLOWED_GLOBALS`): the few non-tensor types
that Composer 0.32 writes, found by loading real checkpoints and reading each "Unsupported global" error. Anything
else is refused with a :class:`CheckpointError` that names the type it would have had to trust.

Before anything is unpickled, the path and the bytes are checked, so that every input gets a one-line answer quickly:

* only regular files and folders are opened: a FIFO, socket or device is refused from its ``stat`` (opening a FIFO for
  reading blocks until a writer appears), and files are opened with ``O_NONBLOCK``;
* a symlink loop is named as such (``os.stat`` fails with ``ELOOP``), a dangling symlink with its target;
* the first bytes decide whether the file can be a torch file at all: ``torch.save`` writes a zip archive
  (``PK\x03\x04``) or, in the legacy format, pickles (``\x80``). Anything else (text, empty, PNG, gzip, ...) is
  refused by what it looks like, without reading the rest of it;
* the pickle is walked opcode by opcode (``pickletools.genops``, nothing is built) and refused if it is larger than
  :data:`MAX_PICKLE_BYTES`, nests containers deeper than :data:`MAX_DEPTH`, or holds a reference cycle. Deep nesting
  must be refused *before* unpickling: torch's unpickler builds deep lists iteratively, but a deeply nested tuple used
  as a dict key is hashed recursively in C, which overflows the C stack and kills the process (a segmentation fault
  that no ``except`` can catch).

Three layouts are understood:

* a monolithic file (``ep0-ba10-rank0.pt``: DDP, or FSDP with ``state_dict_type: full``);
* a sharded folder (FSDP with ``state_dict_type: sharded``): ``.metadata`` plus ``__<rank>_0.distcp`` files written by
  ``torch.distributed.checkpoint``. The non-tensor values (timestamp, schedulers, callbacks, param-group LRs, ...) are
  read from their byte ranges without a process group; tensors (model and optimizer shards) are not loaded;
* a symlink to either (``latest-rank0.pt``, ``latest-sharded-rank0``), resolved first.

Compressed (``.pt.lz4``, ...) and tar checkpoints are not read: decompress or extract them first.

:func:`describe` never fails on a loaded checkpoint: a field of unexpected type is shown in its row as
``state.timestamp: expected a mapping, got int 5`` and the other rows are still shown.
"""

from __future__ import annotations

import collections
import datetime
import errno
import io
import math
import operator
import os
import pickle
import pickletools
import re
import stat
import tarfile
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from torch.torch_version import TorchVersion

__all__ = [
    "ALLOWED_GLOBALS",
    "MAX_DEPTH",
    "MAX_PICKLE_BYTES",
    "SHARDED_KEY",
    "CheckpointError",
    "describe",
    "load_checkpoint_safely",
]

# Besides what torch's weights-only unpickler accepts by default (tensors, storages, OrderedDict, torch dtypes, ...).
# Each entry is a type Composer 0.32 writes in a checkpoint made by llm-foundry 0.22:
#   timedelta: the wall-clock fields of state.timestamp; TorchVersion: state.metadata.torch_version;
#   numpy arrays, dtypes and uint32: numpy's RNG state under rng/ (and any numpy value a callback stores).
ALLOWED_GLOBALS: list[Any] = [
    datetime.timedelta,
    TorchVersion,
    collections.OrderedDict,
    np.ndarray,
    np.dtype,
    np._core.multiarray._reconstruct,
    # checkpoints written under numpy 1.x name it numpy.core.multiarray._reconstruct
    (np._core.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
    np._core.multiarray.scalar,
    (np._core.multiarray.scalar, "numpy.core.multiarray.scalar"),
    # numpy 2 pickles an array's dtype by its class (the RNG state is uint32); plain numeric dtypes only
    *(
        getattr(np.dtypes, f"{name}DType")
        for name in (
            "Bool", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
            "Float16", "Float32", "Float64",
        )
    ),
]  # fmt: skip

MAX_DEPTH = 100
"""Deepest nesting of containers accepted in a pickle; the top-level dict is level 1.

Containers are dicts, lists, tuples, sets and objects built from arguments (a tensor is 3 levels: its rebuild call,
the argument tuple, the size tuple). The test Trainer's checkpoint nests 9 levels deep, llm-foundry's tiny-plateau
run 10 (``test_real_checkpoint_depth_is_far_below_the_limit``); the limit leaves room for callbacks with nested state
while staying far below where unpickling exhausts the stack (a tuple nested 1,000,000 deep used as a dict key crashes
CPython 3.11 in ``hash``).
"""

MAX_PICKLE_BYTES = 256 * 2**20
"""Largest pickle part accepted (256 MiB): ``data.pkl`` of a zip checkpoint, the pickles of a legacy one.

Tensor data is stored outside the pickle, so a checkpoint's pickle is small: 51 KB for llm-foundry's tiny-plateau run
(114 tensors, about 0.4 KB each); 256 MiB would be more than half a million tensors. A larger pickle is refused
without being read to its end, since walking it would take minutes.
"""

SHARDED_KEY = "foundry_ext_sharded"
"""Key that :func:`load_checkpoint_safely` adds to a sharded checkpoint's dict: what was and was not read."""

# Types the .metadata of a sharded checkpoint may name (a plain pickle of torch.distributed.checkpoint dataclasses).
_METADATA_GLOBALS = {
    ("torch.distributed.checkpoint.metadata", name)
    for name in (
        "Metadata",
        "MetadataIndex",
        "ChunkStorageMetadata",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "TensorProperties",
        "StorageMeta",
        "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("collections", "OrderedDict"),
}

# torch words it "Unsupported global: GLOBAL x.y was not an allowed global" or "unsupported GLOBAL posix.system whose
# module posix is blocked", depending on the module
_UNSUPPORTED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")
_NOT_ALLOWLISTED = re.compile(r"allowlisted via `add_safe_globals`, but got <class '([^']+)'>")

_SNIFF_BYTES = 4096  # enough to tell a text file from binary data, and to read a tar header


class CheckpointError(Exception):
    """The path is not a checkpoint this module can read safely: one line that says why."""


# -- loading ---------------------------------------------------------------------------------------------------------


def load_checkpoint_safely(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load the Composer checkpoint at ``path`` on CPU without running code from it.

    Args:
        path (str | os.PathLike): A checkpoint file, a sharded checkpoint folder, or a symlink to either.

    Returns:
        dict: The checkpoint: ``{"state": {...}, "rng": [...]}`` for a file. For a sharded folder, the non-tensor
        values nested the same way, plus :data:`SHARDED_KEY` with the counts of what was not loaded.

    Raises:
        CheckpointError: Missing, a symlink loop, not a regular file or folder, not a torch file, truncated, not a
            Composer checkpoint, nested deeper than :data:`MAX_DEPTH`, or it needs a type outside
            :data:`ALLOWED_GLOBALS`. The message is one line.
    """
    path = Path(path)
    shown = _show(path)
    info = _stat(path, shown)
    if stat.S_ISDIR(info.st_mode):
        checkpoint = _load_sharded(path.resolve(), shown)
    else:
        with _open_regular(path, shown, info) as f:
            checkpoint = _load_file(f, os.fstat(f.fileno()).st_size, shown)
        if isinstance(checkpoint, Mapping) and SHARDED_KEY in checkpoint:
            raise CheckpointError(
                f"{shown} holds the key {SHARDED_KEY!r}, which only foundry-ext adds when it reads a sharded folder: "
                "not a Composer checkpoint"
            )
    _check_composer(checkpoint, shown)
    return checkpoint


def _show(text: str | os.PathLike[str]) -> str:
    """``text`` for a one-line message: newlines and other unprintable characters (lone surrogates too) escaped."""
    text = os.fspath(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _stat(path: Path, shown: str) -> os.stat_result:
    """``os.stat`` (symlinks followed), with a one-line reason when it fails."""
    try:
        return os.stat(path)
    except ValueError as e:  # an embedded NUL byte
        raise CheckpointError(f"{shown} is not a valid path: {e}") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CheckpointError(_loop_message(path, shown)) from None
        if e.errno == errno.ENOENT and os.path.islink(path):
            chain, _ = _symlink_chain(path)
            raise CheckpointError(f"{shown} is a symlink to {' -> '.join(chain[1:])}, which does not exist") from None
        if e.errno == errno.ENOENT:
            raise CheckpointError(f"no such file or folder: {shown}") from None
        raise CheckpointError(f"cannot read {shown}: {e.strerror}") from None


def _symlink_chain(path: Path, hops: int = 40) -> tuple[list[str], bool]:
    """``[path, target, target's target, ...]`` as written in the links, and whether the chain comes back on itself."""
    chain = [_show(path)]
    seen: set[str] = set()
    current = str(path)
    for _ in range(hops):
        key = os.path.abspath(current)
        if key in seen:
            return chain, True
        seen.add(key)
        if not os.path.islink(current):
            return chain, False
        target = os.readlink(current)
        chain.append(_show(target))
        current = os.path.join(os.path.dirname(current), target)  # an absolute target replaces the folder
    return chain, True


def _loop_message(path: Path, shown: str) -> str:
    chain, loop = _symlink_chain(path)
    if loop and len(chain) > 1:
        return f"{shown} is a symlink loop: {' -> '.join(chain)}"
    # the loop is in a folder on the way (dir/x with dir -> dir), or the chain is longer than the kernel follows
    return f"{shown}: too many levels of symbolic links (a symlink loop in its path)"


def _file_kind(mode: int) -> str | None:
    """What a non-regular, non-folder path is, or None for a regular file or a folder."""
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def _open_regular(path: Path, shown: str, info: os.stat_result | None = None) -> IO[bytes]:
    """Open a regular file for reading; never open anything else, never block.

    A FIFO, socket or device is refused from its ``stat`` without being opened: opening a FIFO for reading blocks
    until a writer appears, and opening some devices has side effects. ``O_NONBLOCK`` covers the file being swapped
    for a FIFO between the ``stat`` and the ``open``; the ``fstat`` afterwards refuses such a swap.
    """
    info = info or _stat(path, shown)
    kind = _file_kind(info.st_mode)
    if kind is not None or stat.S_ISDIR(info.st_mode):
        raise CheckpointError(
            f"{shown} is {kind or 'a folder'}, not a checkpoint: only regular files (and sharded checkpoint folders) "
            "are read"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise CheckpointError(f"cannot open {shown}: {e.strerror}") from None
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise CheckpointError(f"{shown} was replaced while it was being opened; try again")
    return os.fdopen(fd, "rb")


def _load_file(f: IO[bytes], size: int, origin: str) -> Any:
    """Sniff, walk the pickle, then ``torch.load`` a file object (a regular file or the bytes of a sharded value)."""
    head = f.read(_SNIFF_BYTES) if size else b""
    f.seek(0)
    if head.startswith(b"PK\x03\x04"):
        _check_torch_zip(f, origin)
    elif head.startswith(b"\x80") and not _is_tar(head):
        # (torch.load tries tarfile first: a file that is both a pickle and a tar would be read as a tar, unwalked)
        _check_legacy_pickles(f, origin)
    else:
        raise CheckpointError(
            f"{origin} is not a checkpoint: it is {_looks_like(head, size)}, and torch.save files are zip archives or "
            "pickles"
        )
    f.seek(0)
    return _torch_load(f, origin)


def _looks_like(head: bytes, size: int) -> str:
    """A few words on what a file that is not a torch file is, from its first bytes (cheap guesses only)."""
    if size == 0:
        return "an empty file"
    compressed = "(compressed or tar checkpoints are not read; decompress/extract it first)"
    for magic, kind in (
        (b"\x1f\x8b", f"gzip-compressed data {compressed}"),
        (b"BZh", f"bzip2-compressed data {compressed}"),
        (b"\xfd7zXZ\x00", f"xz-compressed data {compressed}"),
        (b"\x28\xb5\x2f\xfd", f"zstd-compressed data {compressed}"),
        (b"\x04\x22\x4d\x18", f"lz4-compressed data {compressed}"),
        (b"\x89PNG\r\n\x1a\n", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (b"%PDF", "a PDF document"),
        (b"\x7fELF", "an ELF executable"),
        (b"\x93NUMPY", "a numpy .npy file"),
        (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
        (b"PK\x05\x06", "an empty zip archive"),
    ):
        if head.startswith(magic):
            return kind
    if _is_tar(head):
        return f"a tar archive {compressed}"
    if len(head) >= 10 and head[8:10] == b'{"' and int.from_bytes(head[:8], "little") < size:
        return "a safetensors file (weights only, no training state)"
    if b"\x00" not in head:
        try:
            # a multi-byte character may be cut at the end of the sniffed bytes
            head.decode("utf-8") if len(head) < _SNIFF_BYTES else head[:-3].decode("utf-8")
            return "a text file"
        except UnicodeDecodeError:
            pass
    return f"binary data of an unknown kind (first bytes {head[:8].hex(' ')})"


def _check_torch_zip(f: IO[bytes], origin: str) -> None:
    """The zip must hold the ``data.pkl`` torch will read; that pickle is walked (:func:`_walk_pickle`) before loading.

    torch reads ``<folder>/data.pkl``, the folder being that of the archive's first entry, and looks names up without
    regard to case; a zip with two names that differ only in case (or twice the same name) is refused, so that the
    pickle walked here is the one torch loads.
    """
    try:
        with zipfile.ZipFile(f) as archive:
            names = archive.namelist()
            if not names or "/" not in names[0]:
                raise CheckpointError(
                    f"{origin} is not a checkpoint: it is a zip archive whose entries are not in one folder, so not "
                    "written by torch.save"
                )
            folder = names[0].split("/", 1)[0]
            if any(n.lower() == f"{folder}/constants.pkl".lower() for n in names):
                raise CheckpointError(f"{origin} is not a checkpoint: it is a TorchScript archive (torch.jit.save)")
            if len({n.lower() for n in names}) != len(names):
                raise CheckpointError(
                    f"{origin} is not a checkpoint: it is a zip archive with duplicate entry names, which torch.save "
                    "never writes"
                )
            wanted = f"{folder}/data.pkl".lower()
            data_pkl = next((i for i in archive.infolist() if i.filename.lower() == wanted), None)
            if data_pkl is None:
                raise CheckpointError(
                    f"{origin} is not a checkpoint: it is a zip archive without data.pkl, so not written by torch.save"
                )
            if data_pkl.file_size > MAX_PICKLE_BYTES:
                raise _too_large(origin)
            data = archive.read(data_pkl)
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, RuntimeError,
            NotImplementedError) as e:  # fmt: skip
        raise _unreadable(origin, e) from None
    _walk_pickle(io.BytesIO(data), origin)


def _is_tar(head: bytes) -> bool:
    """Whether the first 512 bytes are a valid tar header: torch.load then reads the file as its oldest format."""
    try:
        tarfile.TarInfo.frombuf(head[:512], tarfile.ENCODING, "surrogateescape")
    except (tarfile.HeaderError, ValueError):
        return False
    return True


def _check_legacy_pickles(f: IO[bytes], origin: str) -> None:
    """Walk the pickles of a legacy ``torch.save`` file: its magic number, then four more.

    A pickle whose first value is not the magic number is not walked further (what follows it is not a pickle); it
    is still passed to ``torch.load``, which reads that first pickle, so that a file naming a forbidden global
    (``os.system``, ...) is refused with the global's name, and any other one as "a pickle torch.save did not write".
    """
    from torch.serialization import MAGIC_NUMBER

    capped = _Capped(f, MAX_PICKLE_BYTES, origin)
    _walk_pickle(capped, origin)
    end = f.tell()
    f.seek(0)
    try:
        first = _NoGlobalsUnpickler(io.BytesIO(f.read(end))).load()
    except Exception:  # any failure means "not the magic number"; torch.load words the error
        first = None
    f.seek(end)
    if type(first) is not int or first != MAGIC_NUMBER:
        return
    for _ in range(4):  # protocol version, sys info, the object itself, the storage keys; then raw tensor bytes
        _walk_pickle(capped, origin)


class _NoGlobalsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"GLOBAL {module}.{name} not allowed here")


class _Capped:
    """A read-only view of a file that refuses to read more than ``limit`` bytes in total (for the pickle walk)."""

    def __init__(self, f: IO[bytes], limit: int, origin: str) -> None:
        self._f, self._left, self._origin = f, limit, origin

    def _take(self, data: bytes) -> bytes:
        self._left -= len(data)
        if self._left < 0:
            raise _too_large(self._origin)
        return data

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > self._left:  # a length field larger than the budget: refused without reading
            raise _too_large(self._origin)
        return self._take(self._f.read(n))

    def readline(self) -> bytes:
        # the text opcodes' arguments (a module and name, a number) are short; a line cut here fails genops' own
        # "no newline found" check, so a multi-GB file without newlines is not read to its end
        return self._take(self._f.readline(min(self._left, 2**16) + 1))

    def tell(self) -> int:
        return self._f.tell()


def _too_large(origin: str) -> CheckpointError:
    return CheckpointError(
        f"{origin} is not a checkpoint: its pickle is larger than {MAX_PICKLE_BYTES // 2**20} MiB "
        "(a Composer checkpoint's pickle holds no tensor data and is far smaller)"
    )


# -- the pickle walk: depth and cycles, decided from the opcodes before anything is built ------------------------------

_MARK = pickletools.markobject
_MUTATORS = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"})


def _opcode_kinds() -> dict[str, int]:
    """How the walk treats each opcode, decided once (the walk's inner loop only looks this up)."""
    kinds = {}
    for op in pickletools.opcodes:
        if op.name in ("PROTO", "FRAME", "STOP", "READONLY_BUFFER"):
            kind = _SKIP
        elif op.name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
            kind = _PUT
        elif op.name in ("GET", "BINGET", "LONG_BINGET"):
            kind = _GET
        elif op.name in ("MARK", "DUP", "POP"):
            kind = {"MARK": _MARK_OP, "DUP": _DUP, "POP": _POP}[op.name]
        elif not op.stack_before and len(op.stack_after) == 1 and not op.name.startswith("EMPTY_"):
            kind = _SCALAR  # an int, a string, a global's name...: pushed, never a container
        else:
            kind = _OTHER
        kinds[op.name] = kind
    return kinds


_SKIP, _PUT, _GET, _MARK_OP, _DUP, _POP, _SCALAR, _OTHER = range(8)
_KINDS = _opcode_kinds()
_depth_of = operator.attrgetter("depth")


class _Node:
    """A container in the replayed pickle: its child containers, and a lower bound of its nesting depth."""

    __slots__ = ("children", "depth", "used")

    def __init__(self, children: list[_Node]) -> None:
        self.children = children
        self.depth = 1 + max(map(_depth_of, children), default=0)
        self.used = False  # put into another container (or into itself) yet


def _walk_pickle(stream: Any, origin: str) -> int:
    """Refuse a pickle nested deeper than :data:`MAX_DEPTH` or holding a cycle, without building any object.

    The pickle machine is replayed on a graph: every container (an empty list/dict/set/tuple, or an object made from
    popped items) is a :class:`_Node` holding its child containers; scalars are ``None``. Items added to a container
    later (``APPEND``, ``SETITEMS``, ``BUILD``) become its children, and the memo holds the same nodes, so shared and
    self-referencing objects are seen as such. Each node's depth is computed as it is built, so that a deep pickle is
    refused as soon as it gets too deep (after ~100 opcodes for a deep tuple, not after all of them).

    That running depth is exact unless a container is filled after it was put into another one (``pickle`` never
    writes that, except for self-referencing objects); only then is the whole graph walked again at the end, which
    also finds cycles.

    Returns:
        int: The nesting depth of the pickle (a flat list of scalars is 1).
    """
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[Any, Any] = {}
    nodes: list[_Node] = []
    deepest = 0
    refilled = False  # a container was filled after it was put into another: depths above it may be stale
    try:
        for op, arg, _ in pickletools.genops(stream):
            kind = _KINDS[op.name]
            if kind == _SCALAR:
                stack.append(None)
                continue
            if kind == _PUT:
                memo[len(memo) if arg is None else arg] = stack[-1]
                continue
            if kind == _GET:
                stack.append(memo[arg])
                continue
            if kind == _SKIP:
                continue
            if kind == _MARK_OP:
                marks.append(len(stack))
                stack.append(_MARK)
                continue
            if kind == _DUP:
                stack.append(stack[-1])
                continue
            if kind == _POP and stack and stack[-1] is _MARK:  # as pickle's own machine does
                marks.pop()
                stack.pop()
                continue
            before = op.stack_before
            if _MARK in before:
                start = marks.pop()
                popped = stack[start + 1 :]
                del stack[start:]
                for _ in range(before.index(_MARK)):  # the list/dict/set that APPENDS/SETITEMS/ADDITEMS fill
                    popped.insert(0, stack.pop())
            else:
                if len(before) > len(stack):
                    raise IndexError("stack underflow")
                popped = stack[len(stack) - len(before) :] if before else []
                del stack[len(stack) - len(before) :]
            if _MARK in popped:  # identity comparisons only: nodes, None and the mark define no __eq__
                raise ValueError(f"{op.name} across a MARK")
            if not op.stack_after:
                continue
            if op.name in _MUTATORS and isinstance(popped[0], _Node):
                node = popped[0]
                children = [item for item in popped[1:] if isinstance(item, _Node)]
                refilled = refilled or node.used or node in children
                node.children.extend(children)
                node.depth = max(node.depth, 1 + max(map(_depth_of, children), default=0))
            else:
                children = [item for item in popped if isinstance(item, _Node)]
                node = _Node(children)
                nodes.append(node)
            for child in children:
                child.used = True
            if node.depth > MAX_DEPTH:
                raise _too_deep(origin)
            deepest = max(deepest, node.depth)
            stack.append(node)
    except CheckpointError:
        raise
    except (ValueError, IndexError, KeyError, EOFError, OverflowError) as e:  # genops' and the replay's errors
        raise _unreadable(origin, e) from None
    return _check_depth(nodes, origin) if refilled else deepest


def _too_deep(origin: str) -> CheckpointError:
    return CheckpointError(
        f"{origin} is not a checkpoint: it nests containers more than {MAX_DEPTH} levels deep (the limit; a Composer "
        "checkpoint nests about 10), refused before unpickling"
    )


def _check_depth(nodes: list[_Node], origin: str) -> int:
    """Depth-first over every node, iteratively: refuse a path longer than :data:`MAX_DEPTH` or a cycle."""
    depth: dict[int, int] = {}
    for root in nodes:
        if id(root) in depth:
            continue
        path: list[tuple[_Node, Iterator[_Node]]] = [(root, iter(root.children))]
        on_path = {id(root)}
        while path:
            node, children = path[-1]
            for child in children:
                if id(child) in depth:
                    continue
                if id(child) in on_path:
                    raise CheckpointError(
                        f"{origin} is not a checkpoint: its pickle holds a reference cycle (a container that "
                        "contains itself), which Composer checkpoints never do"
                    )
                if len(path) >= MAX_DEPTH:
                    raise _too_deep(origin)
                on_path.add(id(child))
                path.append((child, iter(child.children)))
                break
            else:
                path.pop()
                on_path.discard(id(node))
                depth[id(node)] = 1 + max((depth[id(child)] for child in node.children), default=0)
                if depth[id(node)] > MAX_DEPTH:  # deep below a child measured from an earlier root
                    raise _too_deep(origin)
    return max(depth.values(), default=0)


# -- torch.load ------------------------------------------------------------------------------------------------------


def _torch_load(source: IO[bytes], origin: str) -> Any:
    try:
        # torch warns about odd files (an unusual pickle protocol, deprecated storages): the answer is the one line
        with torch.serialization.safe_globals(ALLOWED_GLOBALS), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        message = str(e)
        needed = _UNSUPPORTED_GLOBAL.search(message) or _NOT_ALLOWLISTED.search(message)
        if needed:
            raise CheckpointError(
                f"refusing to load {origin}: it needs {needed.group(1)}, which is not on the allow-list of types "
                "Composer checkpoints use (trusting it could run code from the file)"
            ) from None
        raise _unreadable(origin, message) from None
    except RuntimeError as e:
        if "Invalid magic number" in str(e):
            raise CheckpointError(
                f"{origin} is not a checkpoint: it is a pickle that torch.save did not write"
            ) from None
        raise _unreadable(origin, e) from None
    except Exception as e:  # the bytes are untrusted: any failure of torch's reader means unreadable
        raise _unreadable(origin, e) from None


def _unreadable(origin: str, error: BaseException | str) -> CheckpointError:
    return CheckpointError(
        f"{origin} is not a readable torch checkpoint (truncated, or not written by torch.save): {_first_line(error)}"
    )


def _first_line(error: BaseException | str) -> str:
    text = str(error).strip()
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    elif text.startswith("Weights only load failed."):  # the reason is on the next line
        text = text.split("\n", 1)[-1]
    line = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    if isinstance(error, (KeyError, IndexError, TypeError, AttributeError, AssertionError)):  # "27" says nothing
        line = f"{type(error).__name__}: {line}"
    return _show(line[:300])


def _check_composer(checkpoint: Any, origin: str) -> None:
    if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("state"), Mapping):
        keys = (
            ", ".join(_brief_key(k) for k in islice(checkpoint, 8))
            if isinstance(checkpoint, Mapping)
            else type(checkpoint).__name__
        )
        raise CheckpointError(
            f"{origin} is a torch file but not a Composer checkpoint (no 'state' dict; found: {keys})"
        )
    state = checkpoint["state"]
    if not any(k in state for k in ("timestamp", "model", "optimizers")):
        raise CheckpointError(
            f"{origin} is not a Composer checkpoint: its 'state' has none of timestamp, model, optimizers"
        )


# -- sharded (torch.distributed.checkpoint) folders ------------------------------------------------------------------


class _MetadataUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the dataclasses ``torch.distributed.checkpoint`` writes."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _METADATA_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"Unsupported global: GLOBAL {module}.{name} was not an allowed global")


def _load_sharded(folder: Path, shown: str) -> dict[str, Any]:
    meta_path = folder / ".metadata"
    meta_shown = f"{shown}/.metadata"
    if not os.path.lexists(meta_path):
        raise CheckpointError(
            f"{shown} is a folder but not a sharded checkpoint (no .metadata); pass a checkpoint file or folder"
        )
    with _open_regular(meta_path, meta_shown) as f:
        _walk_pickle(_Capped(f, MAX_PICKLE_BYTES, meta_shown), meta_shown)
        f.seek(0)
        try:
            metadata = _MetadataUnpickler(f).load()
        except pickle.UnpicklingError as e:
            needed = _UNSUPPORTED_GLOBAL.search(str(e))
            if needed:
                raise CheckpointError(
                    f"refusing to load {meta_shown}: it needs {needed.group(1)}, which is not on the allow-list of "
                    "torch.distributed.checkpoint types"
                ) from None
            raise CheckpointError(f"{meta_shown} is not readable (truncated?): {_first_line(e)}") from None
        except Exception as e:  # untrusted bytes: any failure of the unpickler means unreadable
            raise CheckpointError(f"{meta_shown} is not readable (truncated?): {_first_line(e)}") from None
    try:
        return _read_shards(folder, shown, metadata)
    except CheckpointError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, OSError) as e:  # dataclasses with unexpected fields
        raise CheckpointError(
            f"{meta_shown} is not valid torch.distributed.checkpoint metadata: {_first_line(e)}"
        ) from None


def _read_shards(folder: Path, shown: str, metadata: Any) -> dict[str, Any]:
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata

    if not isinstance(metadata, Metadata):
        raise CheckpointError(f"{shown}/.metadata is not torch.distributed.checkpoint metadata")
    paths = metadata.planner_data if isinstance(metadata.planner_data, dict) else {}
    storage = {index.fqn: info for index, info in (metadata.storage_data or {}).items()}
    flat: dict[tuple[Any, ...], Any] = {}
    files: dict[str, tuple[IO[bytes], int]] = {}
    tensors = unread = 0
    try:
        for fqn, item in dict(metadata.state_dict_metadata).items():
            if not isinstance(item, BytesStorageMetadata):
                tensors += 1
                continue
            info = storage.get(fqn)
            if info is None or getattr(info, "transform_descriptors", None):
                unread += 1  # no location, or stored compressed: not shown
                continue
            name, offset, length = info.relative_path, info.offset, info.length
            if not (isinstance(name, str) and name == os.path.basename(name) and name not in ("", ".", "..")):
                raise CheckpointError(f"{shown}/.metadata names a shard outside the folder: {_show(repr(name))}")
            if name not in files:
                f = _open_regular(folder / name, f"{shown}/{_show(name)}")
                files[name] = (f, os.fstat(f.fileno()).st_size)
            f, size = files[name]
            if not (type(offset) is int and type(length) is int and 0 <= offset and 0 <= length):
                raise CheckpointError(f"{shown}/.metadata gives {_show(str(fqn))} an invalid byte range")
            if offset + length > size:
                raise CheckpointError(f"{shown}/{_show(name)} is truncated: {_show(str(fqn))} is cut short")
            f.seek(offset)
            data = f.read(length)
            keys = paths.get(fqn, str(fqn).split("."))
            if not isinstance(keys, (list, tuple)) or not keys or len(keys) > MAX_DEPTH:
                raise CheckpointError(f"{shown}/.metadata gives {_show(str(fqn))} an invalid key path")
            if not all(isinstance(k, (str, int)) for k in keys):
                raise CheckpointError(f"{shown}/.metadata gives {_show(str(fqn))} an invalid key path")
            flat[tuple(keys)] = _load_file(io.BytesIO(data), length, f"{shown} ({_show(str(fqn))})")
    finally:
        for f, _ in files.values():
            f.close()
    checkpoint = _nest(flat, shown)
    checkpoint[SHARDED_KEY] = {
        "tensors": tensors,
        "unread": unread,
        "files": sorted(p.name for p in folder.glob("*.distcp")),
    }
    return checkpoint


def _nest(flat: Mapping[tuple[Any, ...], Any], shown: str) -> dict[str, Any]:
    root: dict[Any, Any] = {}
    for keys, value in flat.items():
        node = root
        dotted = _show(".".join(map(str, keys)))
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):  # a value was read at this path already
                raise CheckpointError(f"{shown}/.metadata has conflicting key paths at {dotted}")
        if keys[-1] in node:
            raise CheckpointError(f"{shown}/.metadata has conflicting key paths at {dotted}")
        node[keys[-1]] = _Leaf(value)
    return _listify(root)


class _Leaf:
    """A value read from a shard, kept apart from the dicts :func:`_nest` makes, until :func:`_listify` unwraps it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _listify(node: dict[Any, Any] | _Leaf) -> Any:
    """Turn the ``{0: a, 1: b}`` dicts that flattening made of lists back into lists (depth <= :data:`MAX_DEPTH`).

    Values read from the shards are left as they were saved.
    """
    if isinstance(node, _Leaf):
        return node.value
    node = {k: _listify(v) for k, v in node.items()}
    if node and all(type(k) is int for k in node) and sorted(node) == list(range(len(node))):
        return [node[i] for i in range(len(node))]
    return node


# -- describing ------------------------------------------------------------------------------------------------------

_MAX_ITEMS = 64  # param groups, schedulers, callbacks, list elements shown; the rest is counted


class _Unexpected(Exception):
    """A field of the checkpoint has a type ``describe`` does not expect; shown in its row, with its path."""

    def __init__(self, where: str, expected: str, value: Any) -> None:
        super().__init__(f"{where}: expected {expected}, got {_brief(value)}")


def describe(checkpoint: Mapping[str, Any], path: str | os.PathLike[str] | None = None) -> str:
    """A few lines saying what ``checkpoint`` holds: run, time, LRs, schedulers, plateau state, versions.

    Never raises on a mapping: a field of unexpected type is shown in its row with its path in the checkpoint and what
    was found (``state.timestamp: expected a mapping, got int 5``); the other rows are still shown.

    Args:
        checkpoint (Mapping): What :func:`load_checkpoint_safely` returned.
        path (str | os.PathLike, optional): Where it was loaded from, shown first (symlinks with their target).
    """
    return "\n".join(f"{label:<12} {text}" if label else f"{'':<12} {text}" for label, text in _rows(checkpoint, path))


def _rows(checkpoint: Mapping[str, Any], path: str | os.PathLike[str] | None) -> Iterator[tuple[str, str]]:
    state = checkpoint.get("state", {})
    sharded = checkpoint.get(SHARDED_KEY)
    if path is not None:
        yield "checkpoint", _where(Path(path), sharded)
    if not isinstance(state, Mapping):
        yield "state", str(_Unexpected("state", "a mapping", state))
        return
    for label, build in (
        ("run name", lambda: _run_name(state)),
        ("timestamp", lambda: _timestamp(state)),
        ("versions", lambda: _versions(state)),
        ("saved by", lambda: _saved_by(state)),
        ("optimizer", lambda: _optimizers(state)),
        ("schedulers", lambda: _schedulers(state)),
        ("plateau", lambda: _plateau(state)),
        ("callbacks", lambda: _callbacks(state)),
        ("not shown", lambda: _not_shown(sharded)),
    ):
        yield from _guarded(label, build)


def _guarded(label: str, build: Callable[[], Iterator[tuple[str, str]]]) -> Iterator[tuple[str, str]]:
    """The rows ``build`` makes; where it meets an unexpected field, a row that says so instead of the rest."""
    try:
        for row in build():
            yield row
            label = ""  # a failure after the first row continues the same block
    except _Unexpected as e:
        yield label, str(e)


def _where(path: Path, sharded: Any) -> str:
    try:
        where = f"{_show(path)} -> {_show(os.readlink(path))}" if path.is_symlink() else _show(path)
    except OSError:  # replaced since it was loaded
        where = _show(path)
    if isinstance(sharded, Mapping):
        files = sharded.get("files")
        return f"{where} (sharded, {len(files) if isinstance(files, list) else '?'} .distcp file(s))"
    try:
        return f"{where} (monolithic, {os.stat(path).st_size / 1e6:.1f} MB)"
    except OSError:
        return f"{where} (monolithic)"


def _run_name(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    name = state.get("run_name")
    yield "run name", "not stored" if name is None else _text(name, "state.run_name")


def _timestamp(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    outer = state.get("timestamp")
    timestamp = None if outer is None else _mapping(outer, "state.timestamp").get("Timestamp")
    if timestamp is None:
        yield "timestamp", "not stored"
        return
    where = "state.timestamp.Timestamp"
    timestamp = _mapping(timestamp, where)
    text = ", ".join(
        f"{key} {'?' if timestamp.get(key) is None else _integer(timestamp[key], f'{where}.{key}')}"
        for key in ("epoch", "batch", "token", "sample")
    )
    wct = timestamp.get("total_wct")
    if wct is not None:
        if not isinstance(wct, datetime.timedelta):
            raise _Unexpected(f"{where}.total_wct", "a timedelta", wct)
        text += f" (training time {wct})"
    yield "timestamp", text


def _metadata(state: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = state.get("metadata")
    return {} if metadata is None else _mapping(metadata, "state.metadata")


def _versions(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    metadata = _metadata(state)
    env = metadata.get("composer_env_info")
    env = {} if env is None else _mapping(env, "state.metadata.composer_env_info")
    versions = []
    if env.get("composer_version") is not None:
        where = "state.metadata.composer_env_info.composer_version"
        versions.append(f"composer {_text(env['composer_version'], where)}")
    if metadata.get("torch_version") is not None:
        versions.append(f"torch {_text(metadata['torch_version'], 'state.metadata.torch_version')}")
    foundry_ext = metadata.get("foundry_ext_version")
    if foundry_ext is None or (isinstance(foundry_ext, str) and not foundry_ext):
        versions.append("foundry-ext not stored")
    else:
        versions.append(f"foundry-ext {_text(foundry_ext, 'state.metadata.foundry_ext_version')}")
    yield "versions", ", ".join(versions)


def _saved_by(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    metadata = _metadata(state)
    if "world_size" not in metadata:
        return
    world_size = _integer(metadata["world_size"], "state.metadata.world_size")
    device, precision = (
        "?" if metadata.get(key) is None else _text(metadata[key], f"state.metadata.{key}")
        for key in ("device", "precision")
    )
    yield "saved by", f"world size {world_size}, device {device}, precision {precision}"


def _optimizers(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    optimizers = state.get("optimizers")
    if optimizers is None or (isinstance(optimizers, Mapping) and not optimizers):
        yield "optimizer", "not stored"
        return
    for name, where, optimizer in _items(_mapping(optimizers, "state.optimizers"), "state.optimizers"):
        yield from _guarded("optimizer", lambda n=name, w=where, o=optimizer: _param_groups(n, w, o))


def _param_groups(name: str, where: str, optimizer: Any) -> Iterator[tuple[str, str]]:
    groups = _mapping(optimizer, where).get("param_groups")
    if groups is None:
        yield "optimizer", f"{name}: param groups not stored"
        return
    if not isinstance(groups, (list, tuple)):
        raise _Unexpected(f"{where}.param_groups", "a list", groups)
    for i, group in enumerate(groups[:_MAX_ITEMS]):
        label = "optimizer" if i == 0 else ""
        yield from _guarded(
            label, lambda lb=label, i=i, g=group: _param_group(lb, name, i, g, f"{where}.param_groups[{i}]")
        )
    if len(groups) > _MAX_ITEMS:
        yield "", f"{name}: {len(groups) - _MAX_ITEMS} more param groups not shown"


def _param_group(label: str, name: str, i: int, group: Any, where: str) -> Iterator[tuple[str, str]]:
    group = _mapping(group, where)
    lr = "None" if group.get("lr") is None else _number(group["lr"], f"{where}.lr")
    initial = f" (initial_lr {_number(group['initial_lr'], f'{where}.initial_lr')})" if "initial_lr" in group else ""
    yield label, f"{name} group {i}: lr {lr}{initial}"


def _schedulers(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    schedulers = state.get("schedulers")
    if schedulers is None or (isinstance(schedulers, Mapping) and not schedulers):
        yield "schedulers", "none stored"
        return
    items = _items(_mapping(schedulers, "state.schedulers"), "state.schedulers")
    for i, (name, where, sched) in enumerate(items):
        label = "schedulers" if i == 0 else ""
        yield from _guarded(label, lambda lb=label, n=name, w=where, s=sched: _scheduler(lb, n, w, s))


def _scheduler(label: str, name: str, where: str, sched: Any) -> Iterator[tuple[str, str]]:
    sched = _mapping(sched, where)
    fields: dict[str, Callable[[Any, str], str]] = {"last_epoch": _integer, "base_lrs": _numbers, "_last_lr": _numbers}
    text = ", ".join(f"{f} {show(sched[f], f'{where}.{f}')}" for f, show in fields.items() if f in sched)
    yield label, f"{name}: {text or 'no LambdaLR fields'}"


def _plateau(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    callbacks = state.get("callbacks")
    plateau = callbacks.get("ReduceLROnPlateauCallback") if isinstance(callbacks, Mapping) else None
    if plateau is None:
        yield "plateau", "no ReduceLROnPlateauCallback state (not a reduce_lr_on_plateau run)"
        return
    where = "state.callbacks.ReduceLROnPlateauCallback"
    plateau = _mapping(plateau, where)
    fields = plateau.get("plateau")
    fields = {} if fields is None else _mapping(fields, f"{where}.plateau")
    yield (
        "plateau",
        ", ".join(
            f"{_key(k)} {'None' if v is None else _number(v, _path(f'{where}.plateau', k))}"
            for k, v in islice(fields.items(), _MAX_ITEMS)
        ),
    )
    window_sum, window_count = plateau.get("window_sum"), plateau.get("window_count")
    total = "None" if window_sum is None else _number(window_sum, f"{where}.window_sum")
    count = "None" if window_count is None else _integer(window_count, f"{where}.window_count")
    yield "", f"train-loss window: sum {total}, count {count}"


def _callbacks(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    callbacks = state.get("callbacks")
    if callbacks is None:
        return
    callbacks = _mapping(callbacks, "state.callbacks")
    names = ", ".join(_key(name) for name in islice(callbacks, _MAX_ITEMS))
    more = f" and {len(callbacks) - _MAX_ITEMS} more" if len(callbacks) > _MAX_ITEMS else ""
    yield "callbacks", (names + more) or "none"


def _not_shown(sharded: Any) -> Iterator[tuple[str, str]]:
    if sharded is None:
        return
    sharded = _mapping(sharded, SHARDED_KEY)
    tensors = _integer(sharded.get("tensors"), f"{SHARDED_KEY}.tensors")
    unread = int(_integer(sharded.get("unread", 0), f"{SHARDED_KEY}.unread"))
    yield (
        "not shown",
        f"{tensors} tensors (model weights and optimizer moments) stay in the shards: reading them needs the model; "
        "load with the Trainer instead" + (f"; {unread} compressed values not read" if unread else ""),
    )


# -- typed access for describe: each returns the text to show or raises _Unexpected with the field's path ------------


def _items(mapping: Mapping[Any, Any], where: str) -> Iterator[tuple[str, str, Any]]:
    """``(shown key, path of the value, value)`` for the first :data:`_MAX_ITEMS` entries."""
    for key, value in islice(mapping.items(), _MAX_ITEMS):
        yield _key(key), _path(where, key), value


def _path(where: str, key: Any) -> str:
    if isinstance(key, str) and key and key.isprintable() and not any(c in key for c in ".[] "):
        return f"{where}.{key}"
    return f"{where}[{_brief_key(key)}]"


def _key(key: Any) -> str:
    return _show(key[:200]) if isinstance(key, str) else _brief_key(key)


def _brief_key(key: Any) -> str:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return _show(repr(key)[:200]) if not isinstance(key, str) else _show(key[:200])
    return type(key).__name__


def _mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise _Unexpected(where, "a mapping", value)
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):  # TorchVersion is a str
        raise _Unexpected(where, "a string", value)
    return _show(value[:200]) + (f"... ({len(value)} characters)" if len(value) > 200 else "")


def _scalar(value: Any) -> Any:
    """A one-element tensor's Python value (so that a tensor LR is shown as a number); anything else unchanged."""
    if not isinstance(value, torch.Tensor):
        return value
    try:  # sparse, quantized or nested tensors may refuse: they are then shown as unexpected
        return value.item() if value.numel() == 1 else value
    except (RuntimeError, ValueError, TypeError):
        return value


def _integer(value: Any, where: str) -> str:
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _Unexpected(where, "an integer", value)
    return str(int(value))


def _number(value: Any, where: str) -> str:
    """Floats in full precision (repr), so that values can be compared exactly."""
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _Unexpected(where, "a number", value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    return str(value) if not math.isfinite(value) else repr(value)


def _numbers(value: Any, where: str) -> str:
    if not isinstance(value, (list, tuple)):
        raise _Unexpected(where, "a list of numbers", value)
    shown = [_number(v, f"{where}[{i}]") for i, v in enumerate(value[:_MAX_ITEMS])]
    if len(value) > _MAX_ITEMS:
        shown.append(f"... {len(value) - _MAX_ITEMS} more")
    return "[" + ", ".join(shown) + "]"


def _brief(value: Any) -> str:
    """What a value is, in a few words: ``int 5``, ``str 'abc'``, ``list of 3 items``, ``Tensor of shape (2, 3)``."""
    kind = type(value).__name__
    if value is None:
        return "None"
    if isinstance(value, (bool, int, float, np.generic)):
        return f"{kind} {_show(repr(value)[:60])}"
    if isinstance(value, str):
        return f"{kind} {_show(repr(value[:60]))}{'...' if len(value) > 60 else ''}"
    if isinstance(value, (bytes, bytearray)):
        return f"{kind} of length {len(value)}"
    if isinstance(value, Mapping):
        return f"{kind} with {len(value)} key{'s' * (len(value) != 1)}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return f"{kind} of {len(value)} item{'s' * (len(value) != 1)}"
    if isinstance(value, (torch.Tensor, np.ndarray)):
        try:
            return f"{kind} of shape {tuple(value.shape)}, dtype {value.dtype}"
        except (RuntimeError, ValueError, TypeError):  # a nested tensor has no single shape
            return kind
    if isinstance(value, datetime.timedelta):
        return f"timedelta {value}"
    return kind
