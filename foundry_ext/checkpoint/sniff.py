r"""What a file is, from its first bytes: one of the two ``torch.save`` formats, or what else it looks like.

``torch.save`` writes a zip archive (``PK\x03\x04``) or, in the legacy format, pickles (``\x80``). Anything else
(text, empty, PNG, gzip, tar, ...) is refused by what it looks like, without reading the rest of it and without
importing torch.
"""

from __future__ import annotations

import tarfile
from typing import IO, Literal

from foundry_ext.checkpoint.errors import CheckpointError

__all__ = ["SNIFF_BYTES", "TorchFormat", "sniff"]

SNIFF_BYTES = 4096  # enough to tell a text file from binary data, and to read a tar header

TorchFormat = Literal["zip", "legacy"]


def sniff(f: IO[bytes], size: int, origin: str) -> TorchFormat:
    """The ``torch.save`` format of ``f`` from its first bytes; ``f`` is left at its start.

    Raises:
        CheckpointError: Not a torch file; the message says what it looks like.
    """
    head = f.read(SNIFF_BYTES) if size else b""
    f.seek(0)
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(b"\x80") and not _is_tar(head):
        # (torch.load tries tarfile first: a file that is both a pickle and a tar would be read as a tar, unwalked)
        return "legacy"
    raise CheckpointError(
        f"{origin} is not a checkpoint: it is {_looks_like(head, size)}, and torch.save files are zip archives or "
        "pickles"
    )


def _is_tar(head: bytes) -> bool:
    """Whether the first 512 bytes are a valid tar header: torch.load then reads the file as its oldest format."""
    try:
        tarfile.TarInfo.frombuf(head[:512], tarfile.ENCODING, "surrogateescape")
    except (tarfile.HeaderError, ValueError):
        return False
    return True


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
            head.decode("utf-8") if len(head) < SNIFF_BYTES else head[:-3].decode("utf-8")
            return "a text file"
        except UnicodeDecodeError:
            pass
    return f"binary data of an unknown kind (first bytes {head[:8].hex(' ')})"
