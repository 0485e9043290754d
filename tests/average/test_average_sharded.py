"""``foundry-ext average`` of real FSDP2 sharded checkpoints, without a process group, and what Composer loads.

The shared FSDP reference run (:mod:`tests.support.fsdp`: ``FSDP_VERSION=2 composer -n 2`` of
``yamls/tiny-fsdp.yaml``, 12 batches, sharded checkpoints ``ep0-ba4/``, ``ep0-ba8/``, ``ep0-ba12/``, each tensor in two
chunks, one per rank). Checked:

* the sharded average, made chunk by chunk, equals the weighted average of the whole tensors that torch's own
  ``torch.distributed.checkpoint`` reader assembles from both ranks' chunks (float tolerance); every non-tensor value
  is the newest checkpoint's; the run's folder is unchanged;
* Composer with FSDP2 on 2 ranks loads it with ``load_weights_only``: the average with weights ``0,0,1`` (the newest
  checkpoint's weights, written by the chunk path) evaluates to the reference run's eval loss at batch 12;
* a checkpoint of the same model saved in another shard layout is refused in one line;
* memory: averaging three sharded checkpoints of 64 MiB of weights each raises the peak RSS by less than one model
  (measured in a fresh process; the ``.pt`` path, which holds up to two models, is measured beside it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from foundry_ext.cli import main
from tests.support.fsdp import FSDP_ENV, FSDP_YAML, fsdp_overrides, fsdp_reference  # noqa: F401 (a fixture)
from tests.support.launcher import REPO
from tests.support.multirank import checkpoint_differences, launch_and_wait, read_metrics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

EVAL = "metrics/eval/LanguageCrossEntropy"


def dcp_model(folder: Path) -> dict[str, torch.Tensor]:
    """The whole model tensors of a sharded checkpoint, assembled from every rank's chunks by torch's reader."""
    meta = FileSystemReader(folder).read_metadata()
    model = {}
    for fqn, md in meta.state_dict_metadata.items():
        path = meta.planner_data[fqn]
        if isinstance(md, TensorStorageMetadata) and tuple(path[:2]) == ("state", "model"):
            model[path[2]] = torch.empty(md.size, dtype=md.properties.dtype)
    loaded = {"state": {"model": model}}
    dcp.load(loaded, storage_reader=FileSystemReader(folder), no_dist=True)
    return loaded["state"]["model"]


def _files(folder: Path) -> dict[str, bytes | str]:
    return {
        str(p.relative_to(folder)): ("-> " + os.readlink(p)) if p.is_symlink() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def test_the_sharded_average_is_the_average_of_the_whole_tensors(fsdp_reference: Path, tmp_path: Path) -> None:  # noqa: F811
    ckpts = fsdp_reference / "checkpoints"
    before = _files(ckpts)
    out = tmp_path / "avg"
    assert main(["average", str(ckpts), "--weights", "exp:0.5", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in (ckpts / "ep0-ba12").iterdir())
    weights = [1 / 7, 2 / 7, 4 / 7]
    full = [dcp_model(ckpts / f"ep0-ba{b}") for b in (4, 8, 12)]
    got = dcp_model(out)
    assert got.keys() == full[0].keys() and len(got) > 10
    for name, tensor in got.items():
        expected = sum(w * m[name].double() for w, m in zip(weights, full, strict=True))
        torch.testing.assert_close(tensor.double(), expected, rtol=0, atol=1e-6)
        assert not torch.equal(tensor, full[-1][name])
    assert checkpoint_differences(ckpts / "ep0-ba12", out) == []  # every non-tensor value: the newest's
    assert _files(ckpts) == before


def test_composer_fsdp_loads_the_sharded_average(fsdp_reference: Path, demo_data: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "newest"
    ckpts = fsdp_reference / "checkpoints"
    assert main(["average", str(ckpts), "--weights", "0,0,1", "--out", str(out)]) == 0
    run = tmp_path / "eval"
    extra = [f"load_path={out}", "load_weights_only=true", "eval_first=true", "max_duration=1ba",
             "scheduler.t_warmup=0ba"]  # fmt: skip
    status, output = launch_and_wait(
        FSDP_YAML, fsdp_overrides(demo_data, run, *extra), nproc=2, log=tmp_path / "eval.log", env=FSDP_ENV
    )
    assert status == 0, output[-4000:]
    reference = read_metrics(fsdp_reference / "metrics-rank0.jsonl")[EVAL][12]
    evaluated = read_metrics(run / "metrics-rank0.jsonl")[EVAL][0]  # eval_first: before any batch of this run
    assert evaluated == pytest.approx(reference, rel=1e-6, abs=0), (evaluated, reference)


def test_another_shard_layout_is_refused(fsdp_reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:  # noqa: F811
    ckpts = fsdp_reference / "checkpoints"
    # the same run's weights at batch 8, saved whole (one chunk), as one rank saves
    whole = tmp_path / "other" / "ep0-ba8"
    state = {"state": {"model": dcp_model(ckpts / "ep0-ba8"), "run_name": "tiny-fsdp",
                       "timestamp": {"Timestamp": {"batch": 8}}}}  # fmt: skip
    dcp.save(state, checkpoint_id=whole, no_dist=True)
    assert main(["average", str(whole), str(ckpts / "ep0-ba12"), "--out", str(tmp_path / "avg")]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert "has shard layout (chunk offsets and sizes) 1 chunks" in err and "2 chunks" in err, err
    assert not (tmp_path / "avg").exists()


# the peak RSS (VmHWM) is reset once the imports are done (Linux: clear_refs 5), so that it measures the work alone
MEASURE = """
import json, sys
import torch, torch.distributed.checkpoint.metadata
import foundry_ext.average.full, foundry_ext.average.sharded, foundry_ext.average.write
from foundry_ext.checkpoint import load_checkpoint_safely, describe
from foundry_ext.cli import main
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status("VmRSS")
code = main(sys.argv[1:])
after = status("VmHWM")
print(json.dumps({"code": code, "before_kib": before, "after_kib": after}))
"""


def _peak(tmp_path: Path, *argv: str) -> int:
    done = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, cwd=REPO, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0, done.stderr
    return (result["after_kib"] - result["before_kib"]) * 1024


def test_memory_stays_within_a_few_chunks_sharded_and_two_models_for_pt(tmp_path: Path) -> None:
    tensors, numel = 16, 2**20  # 16 tensors of 4 MiB: 64 MiB of weights per checkpoint
    model_bytes = tensors * numel * 4
    for i, batch in enumerate((10, 20, 30)):
        g = torch.Generator().manual_seed(i)
        state = {"state": {"model": {f"w{j}": torch.randn(numel, generator=g) for j in range(tensors)},
                           "run_name": "big", "timestamp": {"Timestamp": {"batch": batch}}}}  # fmt: skip
        dcp.save(state, checkpoint_id=tmp_path / "sharded" / f"ep0-ba{batch}", no_dist=True)
        (tmp_path / "pt").mkdir(exist_ok=True)
        torch.save(state, tmp_path / "pt" / f"ep0-ba{batch}-rank0.pt")
        del state
    sharded = _peak(tmp_path, "average", str(tmp_path / "sharded"), "--out", str(tmp_path / "avg"))
    full = _peak(tmp_path, "average", *(str(tmp_path / "pt" / f"ep0-ba{b}-rank0.pt") for b in (10, 20, 30)),
                 "--out", str(tmp_path / "avg.pt"))  # fmt: skip
    print(f"peak RSS above the imports: sharded {sharded / 2**20:.1f} MiB, .pt {full / 2**20:.1f} MiB, "
          f"one model {model_bytes / 2**20:.0f} MiB, one chunk {numel * 4 / 2**20:.0f} MiB")  # fmt: skip
    # measured: 12.5 MiB here (16.5 MiB for 64 such tensors, 256 MiB); 52-67 MiB before each chunk's memory was freed
    # (foundry_ext/average/heap.py): one chunk more per chunk, a model's worth
    assert sharded < 6 * numel * 4
    assert full < 3 * model_bytes  # the accumulator and the checkpoint being added (mapped), plus the one written
