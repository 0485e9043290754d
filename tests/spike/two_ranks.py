"""Run by ``composer -n 2 tests/spike/two_ranks.py OUT``: the guard under DDP, a bad batch on rank 1 only.

Each rank writes ``OUT/rank<r>.json``: its decisions, whether its weights and optimizer state after the skipped batch
equal those before it (bitwise), and its final weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from composer import Trainer
from composer.optim import DecoupledAdamW
from composer.utils import dist
from torch.utils.data import DataLoader, TensorDataset

from foundry_ext.trainer.spike_guard.callback import SpikeGuard
from foundry_ext.trainer.spike_guard.inject import InjectBadBatches
from tests.spike.test_guard import GUARD, Snapshots, _bitwise
from tests.support.trainer_utils import TinyModel

BAD = 12


def main(out: Path) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 4, generator=g)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(128, 1, generator=g)
    dataset = TensorDataset(x, y)
    loader = DataLoader(dataset, batch_size=4, sampler=dist.get_sampler(dataset, shuffle=False))
    model = TinyModel()
    rank = dist.get_global_rank() if dist.is_initialized() else int(__import__("os").environ.get("RANK", "0"))
    guard, snaps = SpikeGuard(**GUARD), Snapshots()
    callbacks = [guard, snaps]
    if rank == 1:
        callbacks.append(InjectBadBatches([BAD]))
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration="20ba",
        optimizers=DecoupledAdamW(model.parameters(), lr=0.01),
        callbacks=callbacks,
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        seed=0,
    )
    trainer.fit()
    result = {
        "world_size": dist.get_world_size(),
        "decisions": guard.decisions,
        "bitwise_at_skip": _bitwise(snaps.start[BAD], snaps.end[BAD]),
        "changed_before": not _bitwise(snaps.start[BAD - 1], snaps.end[BAD - 1]),
        "weights": [p.detach().flatten().tolist() for p in trainer.state.model.parameters()],
    }
    (out / f"rank{dist.get_global_rank()}.json").write_text(json.dumps(result))
    trainer.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
