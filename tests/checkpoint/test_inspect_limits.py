"""``foundry-ext inspect`` on hostile files stays within 10 s and 500 MB: the limits of foundry_ext.checkpoint.limits.

Each hostile file is made in ``tmp_path`` at test time and is small on disk (sparse where it declares GBs). Each is
inspected in a child process; its CPU time and peak resident memory are read from ``RUSAGE_CHILDREN`` of a wrapper
process whose only child it is. Where the answer needs torch (a sharded folder's ``.metadata`` is unpickled with
torch's classes), what importing torch alone costs here (~500 MB and a few CPU seconds: the CUDA build maps its
libraries) is measured the same way and subtracted: the bounds are on what reading the file costs.
"""

from __future__ import annotations

import functools
import io
import json
import pickle
import pickletools
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
import torch

from foundry_ext.checkpoint import MAX_PICKLE_BYTES, load_checkpoint_safely
from foundry_ext.checkpoint.limits import MAX_INFLATION, MAX_VALUE_BYTES
from foundry_ext.checkpoint.pickle_check import MAX_OPCODES
from tests.support.launcher import REPO
from tests.support.trainer_utils import make_trainer

SECONDS = 10
PEAK_MB = 500

# Runs argv[1:] (`foundry-ext inspect PATH`) as its only child; prints its exit code, CPU seconds (user + system: the
# machine running the tests may be shared, and wall time would measure the others), peak RSS (MB), stdout and stderr
_WRAPPER = r"""
import json, resource, subprocess, sys, time
done = subprocess.run([sys.argv[1], *sys.argv[2:]], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
seconds, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
print(json.dumps([done.returncode, seconds, peak, done.stdout, done.stderr]))
"""


def _inspect_measured(path: Path) -> tuple[int, float, float, str, str]:
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(Path(sys.executable).parent / "foundry-ext"), "inspect", str(path)],
        capture_output=True, text=True, check=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    code, seconds, peak, stdout, stderr = json.loads(out.stdout)
    return code, seconds, peak, stdout, stderr


@functools.cache
def _torch_baseline() -> tuple[float, float]:
    """CPU seconds and peak RSS (MB) of a process that only imports what ``inspect`` imports to unpickle."""
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, sys.executable, "-c", "import numpy, torch.distributed.checkpoint.metadata"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    _, seconds, peak, _, _ = json.loads(out.stdout)
    return seconds, peak


def _assert_refused_within_bounds(path: Path, message: str, *, torch_imported: bool = False) -> None:
    """Refused with one line within :data:`SECONDS`, using at most :data:`PEAK_MB` (above torch's import if the
    refusal comes after ``.metadata`` is unpickled, which needs torch's classes)."""
    code, seconds, peak, stdout, stderr = _inspect_measured(path)
    if torch_imported:
        seconds, peak = seconds - _torch_baseline()[0], peak - _torch_baseline()[1]
    assert (code, stdout) == (2, ""), (code, stdout, stderr)
    assert stderr.startswith("foundry-ext inspect: error: ") and stderr.count("\n") == 1, stderr
    assert message in stderr, stderr
    assert "Traceback" not in stderr and "MemoryError" not in stderr
    assert seconds < SECONDS, f"{seconds:.1f} CPU s"
    assert peak < PEAK_MB, f"{peak:.0f} MB"


def _deflated_zeros(n: int) -> tuple[bytes, int]:
    """``n`` zero bytes deflated (raw, as in a zip) without holding them: the compressed bytes and their CRC-32."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(2**24)
    parts, crc, left = [], 0, n
    while left:
        piece = chunk[: min(left, len(chunk))]
        parts.append(compressor.compress(piece))
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    parts.append(compressor.flush())
    return b"".join(parts), crc


def _zip_with(entries: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A zip from ``(name, compressed bytes, declared size, crc, method)`` entries, sizes as declared (not checked)."""
    out, directory = io.BytesIO(), io.BytesIO()
    for name, data, size, crc, method in entries:
        offset = out.tell()
        encoded = name.encode()
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(data), size, len(encoded), 0))
        out.write(encoded + data)
        directory.write(
            struct.pack(
                "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(data), size, len(encoded), 0, 0, 0,
                0, 0, offset,
            )
            + encoded
        )  # fmt: skip
    start, central = out.tell(), directory.getvalue()
    out.write(central)
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), start, 0))
    return out.getvalue()


def test_deflated_pickle_inflating_to_hundreds_of_mb_is_refused_before_inflating(tmp_path: Path) -> None:
    """The issue's 250 KB checkpoint whose data.pkl inflates to 240 MB (it took 215 s and 3.0 GB)."""
    size = 240 * 2**20
    data, crc = _deflated_zeros(size)
    path = tmp_path / "bomb.pt"
    path.write_bytes(_zip_with([("archive/data.pkl", data, size, crc, zipfile.ZIP_DEFLATED)]))
    assert path.stat().st_size < 300 * 2**10
    _assert_refused_within_bounds(path, f"inflated from {len(data)} (more than {MAX_INFLATION}x, a zip bomb)")


def test_pickle_declared_small_that_inflates_to_1_gib_reads_only_what_it_declares(tmp_path: Path) -> None:
    """The issue's data.pkl declared as 64 bytes that inflates to 1 GiB (it took 2.1 GB)."""
    data, crc = _deflated_zeros(2**30)
    path = tmp_path / "liar.pt"
    path.write_bytes(_zip_with([("archive/data.pkl", data, 64, crc, zipfile.ZIP_DEFLATED)]))
    _assert_refused_within_bounds(path, "is not a readable torch checkpoint")


def test_entries_declaring_more_bytes_than_the_file_has_are_refused(tmp_path: Path) -> None:
    pkl = pickle.dumps({"state": {}}, protocol=2)
    path = tmp_path / "short.pt"
    blob = _zip_with([("archive/data.pkl", pkl, len(pkl), zlib.crc32(pkl), zipfile.ZIP_STORED)])
    # the stored entry claims 2 GiB in both of its size fields, as a truncated copy of a real checkpoint would
    blob = blob.replace(struct.pack("<2L", len(pkl), len(pkl)), struct.pack("<2L", 2**31, 2**31))
    path.write_bytes(blob)
    _assert_refused_within_bounds(path, f"its entries declare {2**31} bytes but the file has")


def test_pickle_of_millions_of_opcodes_is_refused_within_seconds(tmp_path: Path) -> None:
    """Ten million one-byte opcodes (NONE, POP) in a 20 MB legacy file: refused at :data:`MAX_OPCODES`."""
    path = tmp_path / "flood.pt"
    path.write_bytes(b"\x80\x02" + b"N0" * 10_000_000 + b"N.")
    _assert_refused_within_bounds(path, f"its pickle has more than {MAX_OPCODES:,} opcodes")


def test_zip_pickle_larger_than_the_cap_is_refused_unread(tmp_path: Path) -> None:
    """A stored ``data.pkl`` of 32 MiB + 1 (honestly declared): refused from its declared size, never walked."""
    data = bytes(MAX_PICKLE_BYTES + 1)
    path = tmp_path / "big.pt"
    path.write_bytes(_zip_with([("archive/data.pkl", data, len(data), zlib.crc32(data), zipfile.ZIP_STORED)]))
    _assert_refused_within_bounds(path, f"its pickle is larger than {MAX_PICKLE_BYTES // 2**20} MiB")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    trainer, _ = make_trainer([], max_duration="2ba", save_folder=str(folder), save_interval="2ba")
    trainer.fit()
    trainer.close()
    return folder / "ep0-ba2-rank0.pt"


def _sharded_with_value_length(checkpoint: Path, folder: Path, length: int) -> Path:
    """A sharded copy of ``checkpoint`` whose first non-tensor value claims ``length`` bytes of a sparse shard."""
    import torch.distributed.checkpoint as dist_cp
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata

    state = load_checkpoint_safely(checkpoint)
    state.pop("rng")
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(str(folder)))
    metadata = pickle.loads((folder / ".metadata").read_bytes())
    fqn = next(k for k, v in metadata.state_dict_metadata.items() if isinstance(v, BytesStorageMetadata))
    info = next(v for k, v in metadata.storage_data.items() if k.fqn == fqn)
    info.offset, info.length = 0, length
    (folder / ".metadata").write_bytes(pickle.dumps(metadata))
    with open(folder / info.relative_path, "r+b") as f:
        f.truncate(length + 4096)  # sparse: the range really is inside the file, so only a size limit refuses it
    return folder


@pytest.mark.parametrize("gib", [2, 8])
def test_sharded_value_declaring_gibs_is_refused_before_reading(checkpoint: Path, tmp_path: Path, gib: int) -> None:
    """The issue's .metadata declaring an 8 GiB value (MemoryError and a traceback) and a 2 GiB one (2.6 GB)."""
    folder = _sharded_with_value_length(checkpoint, tmp_path / "sharded", gib * 2**30)
    _assert_refused_within_bounds(folder, f"the limit: {MAX_VALUE_BYTES // 2**20} MiB", torch_imported=True)


def test_real_checkpoint_is_far_below_the_caps(checkpoint: Path, tmp_path: Path) -> None:
    """The caps leave room: a real Trainer checkpoint is ~1,200 opcodes, each tensor of a state dict adds 32 (so the
    cap is ~30,000 tensors), and it is read within the bounds."""
    assert _opcodes(checkpoint) < MAX_OPCODES / 100
    per_tensor = (_opcodes(_state_dict_file(tmp_path, 200)) - _opcodes(_state_dict_file(tmp_path, 100))) / 100
    assert per_tensor == 32 and MAX_OPCODES / per_tensor > 30_000
    code, seconds, peak, stdout, stderr = _inspect_measured(checkpoint)
    assert code == 0 and "batch 2" in stdout, stderr
    assert seconds - _torch_baseline()[0] < SECONDS and peak - _torch_baseline()[1] < PEAK_MB, (seconds, peak)
    assert torch.load(checkpoint, weights_only=False)["state"]["timestamp"] is not None


def _state_dict_file(folder: Path, tensors: int) -> Path:
    path = folder / f"sd{tensors}.pt"
    torch.save({f"layer{i}.weight": torch.zeros(4, 4) for i in range(tensors)}, path)
    return path


def _opcodes(path: Path) -> int:
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
        return sum(1 for _ in pickletools.genops(io.BytesIO(archive.read(name))))


@pytest.mark.parametrize("numel", [2**28, 2**33])
def test_legacy_file_declaring_a_huge_storage_is_refused_within_bounds(tmp_path: Path, numel: int) -> None:
    """A legacy-format (not zip) ``torch.save`` file whose storage declares 1-32 GiB of 3 written: torch.load reads
    the storage into memory it maps lazily and fails on the short read; one line, torch's import the only cost."""
    buffer = io.BytesIO()
    torch.save({"state": {"model": {"w": torch.zeros(3)}}}, buffer, _use_new_zipfile_serialization=False)
    blob = buffer.getvalue()
    at = len(blob) - 3 * 4 - 8  # the one storage: its element count (8 bytes), then 3 float32
    assert struct.unpack("<q", blob[at : at + 8])[0] == 3
    path = tmp_path / "legacy.pt"
    path.write_bytes(blob[:at] + struct.pack("<q", numel) + blob[at + 8 :])
    _assert_refused_within_bounds(path, "is not a readable torch checkpoint", torch_imported=True)


def test_sparse_legacy_file_declaring_32_gib_is_refused_before_torch_reads_it(tmp_path: Path) -> None:
    """Issue 34: the storage's 32 GiB are in the file (sparse: no disk used); torch would read them all into memory
    (it maps only the zip format's storages). Refused from the file's size, before torch is imported."""
    numel = 2**33
    buffer = io.BytesIO()
    torch.save({"state": {"model": {"w": torch.zeros(3)}}}, buffer, _use_new_zipfile_serialization=False)
    blob = buffer.getvalue()
    at = len(blob) - 3 * 4 - 8
    path = tmp_path / "legacy-sparse.pt"
    with path.open("wb") as f:
        f.write(blob[:at] + struct.pack("<q", numel))
        f.truncate(at + 8 + numel * 4)  # a hole: the declared storage, all zeros
    assert path.stat().st_size > 32 * 2**30
    size = path.stat().st_size
    _assert_refused_within_bounds(path, f"is a legacy-format (not zip) torch file of {size} bytes")
    # issue 46: torch was imported for the magic number before the size check (455-515 MB, 12-20 s on a fresh machine)
    code = (
        "import sys; from foundry_ext.cli import main; "
        f"rc = main(['inspect', {str(path)!r}]); print(rc, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False"], done.stdout + done.stderr


def test_the_legacy_magic_number_is_torchs() -> None:
    from torch.serialization import MAGIC_NUMBER

    from foundry_ext.checkpoint.pickle_check import LEGACY_MAGIC_NUMBER

    assert LEGACY_MAGIC_NUMBER == MAGIC_NUMBER
