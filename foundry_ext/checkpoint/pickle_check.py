"""Refuse a pickle before anything in it is unpickled: too large, nested too deep, or holding a reference cycle.

The pickle is walked opcode by opcode (``pickletools.genops``, nothing is built) and refused if it is larger than
:data:`MAX_PICKLE_BYTES`, nests containers deeper than :data:`MAX_DEPTH`, or holds a reference cycle. Deep nesting
must be refused *before* unpickling: torch's unpickler builds deep lists iteratively, but a deeply nested tuple used
as a dict key is hashed recursively in C, which overflows the C stack and kills the process (a segmentation fault
that no ``except`` can catch).

:func:`check_pickles` walks the pickles ``torch.load`` will read in each ``torch.save`` format: the zip's
``data.pkl``, or the legacy file's sequence of pickles.
"""

from __future__ import annotations

import io
import operator
import pickle
import pickletools
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO, Any

from foundry_ext.checkpoint.errors import CheckpointError, unreadable
from foundry_ext.checkpoint.limits import check_zip_directory, check_zip_entries, file_size
from foundry_ext.checkpoint.sniff import TorchFormat

__all__ = [
    "LEGACY_MAGIC_NUMBER",
    "MAX_DEPTH",
    "MAX_OPCODES",
    "MAX_PICKLE_BYTES",
    "Capped",
    "check_pickles",
    "walk_pickle",
]

MAX_DEPTH = 100
"""Deepest nesting of containers accepted in a pickle; the top-level dict is level 1.

Containers are dicts, lists, tuples, sets and objects built from arguments (a tensor is 3 levels: its rebuild call,
the argument tuple, the size tuple). The test Trainer's checkpoint nests 9 levels deep, llm-foundry's tiny-resume
run 10 (``test_real_checkpoint_depth_is_far_below_the_limit``); the limit leaves room for callbacks with nested state
while staying far below where unpickling exhausts the stack (a tuple nested 1,000,000 deep used as a dict key crashes
CPython 3.11 in ``hash``).
"""

MAX_PICKLE_BYTES = 32 * 2**20
"""Largest pickle part accepted (32 MiB): ``data.pkl`` of a zip checkpoint, the pickles of a legacy one.

Tensor data is stored outside the pickle, so a checkpoint's pickle is small: 51 KB for llm-foundry's tiny-resume run
(114 tensors, about 0.4 KB each); 32 MiB would be about 70,000 tensors. A larger pickle is refused without being read
to its end: the walk reads it as a stream, but a pickle of a few hundred MB takes minutes to walk and GBs to unpickle.
"""

MAX_OPCODES = 1_000_000
"""Most opcodes walked in one pickle: the walk's time is in its opcodes (a few microseconds each), not its bytes.

Each tensor of a state dict adds 32 opcodes, and the test Trainer's whole checkpoint has about 1,200
(``test_real_checkpoint_is_far_below_the_caps``), so the cap is about 30,000 tensors; a crafted pickle of one-byte
opcodes reaches it within 2 MB and is refused after a few CPU seconds instead of walking for minutes.
"""


def check_pickles(f: IO[bytes], fmt: TorchFormat, origin: str) -> None:
    """Walk (:func:`walk_pickle`) every pickle ``torch.load`` will read from ``f``, a file in format ``fmt``."""
    if fmt == "zip":
        _check_torch_zip(f, origin)
    else:
        _check_legacy_pickles(f, origin)


def _check_torch_zip(f: IO[bytes], origin: str) -> None:
    """The zip must hold the ``data.pkl`` torch will read; that pickle is walked (:func:`walk_pickle`) before loading.

    torch reads ``<folder>/data.pkl``, the folder being that of the archive's first entry, and looks names up without
    regard to case; a zip with two names that differ only in case (or twice the same name) is refused, so that the
    pickle walked here is the one torch loads.
    """
    check_zip_directory(f, origin)
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
            check_zip_entries(archive, file_size(f), origin)
            if data_pkl.file_size > MAX_PICKLE_BYTES:
                raise _too_large(origin)
            # streamed: zipfile inflates at most what each read asks for and stops at the declared size, so a
            # data.pkl declared as 64 bytes that would inflate to 1 GiB costs 64 bytes (then fails its CRC)
            with archive.open(data_pkl) as member:
                walk_pickle(Capped(member, MAX_PICKLE_BYTES, origin), origin)
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, RuntimeError,
            NotImplementedError, zlib.error) as e:  # fmt: skip
        raise unreadable(origin, e) from None


#: ``torch.serialization.MAGIC_NUMBER``, the first pickle of a legacy file: written here, not imported, so that the file
#: size check after the walk refuses a huge legacy file without torch (its import alone is ~500 MB and seconds);
#: tests/checkpoint/test_inspect_limits.py keeps it equal to torch's
LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C


def _check_legacy_pickles(f: IO[bytes], origin: str) -> None:
    """Walk the pickles of a legacy ``torch.save`` file: its magic number, then four more.

    A pickle whose first value is not the magic number is not walked further (what follows it is not a pickle); it
    is still passed to ``torch.load``, which reads that first pickle, so that a file naming a forbidden global
    (``os.system``, ...) is refused with the global's name, and any other one as "a pickle torch.save did not write".
    """
    capped = Capped(f, MAX_PICKLE_BYTES, origin)
    walk_pickle(capped, origin)
    end = f.tell()
    f.seek(0)
    try:
        first = _NoGlobalsUnpickler(io.BytesIO(f.read(end))).load()
    except Exception:  # any failure means "not the magic number"; torch.load words the error
        first = None
    f.seek(end)
    if type(first) is not int or first != LEGACY_MAGIC_NUMBER:
        return
    for _ in range(4):  # protocol version, sys info, the object itself, the storage keys; then raw tensor bytes
        walk_pickle(capped, origin)


class _NoGlobalsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"GLOBAL {module}.{name} not allowed here")


class Capped:
    """A read-only view of a file that refuses to read more than ``limit`` bytes in total (for the pickle walk)."""

    def __init__(self, f: IO[bytes], limit: int, origin: str) -> None:
        self._f, self._left, self._origin = f, limit, origin

    def _take(self, data: bytes) -> bytes:
        self._left -= len(data)
        if self._left < 0:
            raise _too_large(self._origin)
        return data

    def read(self, n: int = -1) -> bytes:
        """At most ``n`` bytes; a read past the budget (or of unbounded length) is refused without reading."""
        if n < 0 or n > self._left:  # a length field larger than the budget: refused without reading
            raise _too_large(self._origin)
        return self._take(self._f.read(n))

    def readline(self) -> bytes:
        """One line, cut at the budget or 64 KiB."""
        # the text opcodes' arguments (a module and name, a number) are short; a line cut here fails genops' own
        # "no newline found" check, so a multi-GB file without newlines is not read to its end
        return self._take(self._f.readline(min(self._left, 2**16) + 1))

    def tell(self) -> int:
        """The position in the underlying file."""
        return self._f.tell()


def _too_large(origin: str) -> CheckpointError:
    return CheckpointError(
        f"{origin} is not a checkpoint: its pickle is larger than {MAX_PICKLE_BYTES // 2**20} MiB "
        "(a Composer checkpoint's pickle holds no tensor data and is far smaller)"
    )


# -- the walk: depth and cycles, decided from the opcodes before anything is built ------------------------------------

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


def walk_pickle(stream: Any, origin: str) -> int:
    """Refuse a pickle nested deeper than :data:`MAX_DEPTH` or holding a cycle, without building any object.

    The pickle machine is replayed on a graph: every container (an empty list/dict/set/tuple, or an object made from
    popped items) is a :class:`_Node` holding its child containers; scalars are ``None``. Items added to a container
    later (``APPEND``, ``SETITEMS``, ``BUILD``) become its children, and the memo holds the same nodes, so shared and
    self-referencing objects are seen as such. Each node's depth is computed as it is built, so that a deep pickle is
    refused as soon as it gets too deep (after ~100 opcodes for a deep tuple, not after all of them).

    That running depth is exact unless a container is filled after it was put into another one (``pickle`` never
    writes that, except for self-referencing objects); only then is the whole graph walked again at the end, which
    also finds cycles.

    Args:
        stream: A binary file object (or :class:`Capped`) positioned at the start of a pickle; left after its STOP.
        origin (str): How the file is named in the refusal.

    Returns:
        int: The nesting depth of the pickle (a flat list of scalars is 1).

    Raises:
        CheckpointError: Too deep, a cycle, too large (through :class:`Capped`), or not a valid pickle.
    """
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[Any, Any] = {}
    nodes: list[_Node] = []
    deepest = 0
    refilled = False  # a container was filled after it was put into another: depths above it may be stale
    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(stream)):
            if count >= MAX_OPCODES:
                raise _too_many_opcodes(origin)
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
        raise unreadable(origin, e) from None
    return _check_depth(nodes, origin) if refilled else deepest


def _too_many_opcodes(origin: str) -> CheckpointError:
    return CheckpointError(
        f"{origin} is not a checkpoint: its pickle has more than {MAX_OPCODES:,} opcodes (the limit; a Composer "
        "checkpoint has about 30 per tensor), refused before unpickling"
    )


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
