"""The continuation's data skip on a real StreamingDataset (the demo MDS data), resumed from a real checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from composer import Trainer
from composer.core import Callback, State
from composer.loggers import Logger
from torch.utils.data import DataLoader

from foundry_ext.streaming_cleanup import streaming_cleanup
from foundry_ext.trainer.spike_guard.callback import SpikeGuard
from tests.support.launcher import REPO


class Batches(Callback):
    def __init__(self) -> None:
        self.first_ids: dict[int, list[int]] = {}

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del logger
        self.first_ids[state.timestamp.batch.value] = state.batch["tokens"][:, 0].tolist()


class Bag(torch.nn.Module):
    """Enough of a model to train on token windows: an embedding bag and a scalar loss."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(512, 4)


def _model() -> Any:
    from composer.models import ComposerModel

    class M(ComposerModel):
        def __init__(self) -> None:
            super().__init__()
            self.net = Bag()

        def forward(self, batch: Any) -> torch.Tensor:
            return self.net.emb(batch["tokens"].long()).mean()

        def loss(self, outputs: torch.Tensor, batch: Any) -> torch.Tensor:
            del batch
            return outputs**2

    return M()


def _trainer(data: Path, callbacks: list[Callback], max_duration: str = "20ba", **kwargs: Any) -> Trainer:
    from streaming import StreamingDataset

    torch.manual_seed(0)
    dataset = StreamingDataset(local=str(data), batch_size=4, shuffle=False)
    model = _model()
    return Trainer(
        model=model,
        train_dataloader=DataLoader(dataset, batch_size=4),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=callbacks,
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        seed=0,
        **kwargs,
    )


@pytest.mark.slow
def test_skip_data_moves_the_streaming_resume_point_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "train"
    shutil.copytree(REPO / "demo-data" / "train", data)
    with streaming_cleanup():
        whole = Batches()
        t = _trainer(data, [whole], save_folder=str(tmp_path / "a"), save_interval="10ba", run_name="a")
        t.fit()
        t.close()
    ckpt = tmp_path / "a" / "ep0-ba10-rank0.pt"
    with streaming_cleanup():
        cont = Batches()
        guard = SpikeGuard(skip_data={"at_batch": 10, "batches": 3})
        t = _trainer(data, [guard, cont], load_path=str(ckpt), max_duration="14ba")
        t.fit()
        t.close()
    assert "spike_guard: skipping 3 data batches (12 samples) after batch 10, as the rollback named" in (
        capsys.readouterr().out
    )
    # the continuation's batch 10 is the whole run's batch 13: batches 10, 11, 12 skipped
    assert [cont.first_ids[b] for b in range(10, 14)] == [whole.first_ids[b] for b in range(13, 17)]
    with streaming_cleanup():
        again = Batches()
        t = _trainer(data, [SpikeGuard(skip_data={"at_batch": 5, "batches": 3}), again], load_path=str(ckpt))
        t.fit(duration="2ba")
        t.close()
    assert again.first_ids[10] == whole.first_ids[10]  # another batch than at_batch: no skip
