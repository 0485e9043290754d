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


# -- with a batch-size ramp ------------------------------------------------------------------------------------------
# 4 samples per batch, 8 from sample 24 (batch 6 on): checkpoints at batches 4 (stage 0) and 8 (stage 1).
RAMP = {"stages": [{"at": "24sp", "global_train_batch_size": 8}], "lr_scaling": "sqrt"}


class Samples(Callback):
    """Every sample (its tokens) each batch trains on, by batch."""

    def __init__(self) -> None:
        self.rows: dict[int, list[tuple[int, ...]]] = {}

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del logger
        self.rows[state.timestamp.batch.value] = [tuple(r) for r in state.batch["tokens"].tolist()]


def _ramp_trainer(
    data: Path, callbacks: list[Callback], max_duration: str, ramp: dict[str, Any] = RAMP, **kwargs: Any
) -> Trainer:
    from streaming import StreamingDataset

    from foundry_ext.trainer.batch_size import BatchSizeScheduleCallback, RampDataLoader

    torch.manual_seed(0)
    dataset = StreamingDataset(local=str(data), batch_size=4, shuffle=False)
    model = _model()
    return Trainer(
        model=model,
        train_dataloader=RampDataLoader(dataset, batch_size=4, drop_last=True),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[BatchSizeScheduleCallback(**ramp), *callbacks],
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        seed=0,
        **kwargs,
    )


@pytest.fixture(scope="module")
def ramped_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Samples]:
    """The uninterrupted ramped run: 16 batches (6 of 4 samples, 10 of 8), its checkpoints every 4 batches, its samples.

    Longer than the continuations (12 batches), which read on past the samples they skip.
    """
    root = tmp_path_factory.mktemp("ramp")
    data = root / "train"
    shutil.copytree(REPO / "demo-data" / "train", data)
    whole = Samples()
    with streaming_cleanup():
        t = _ramp_trainer(data, [whole], "16ba", save_folder=str(root / "a"), save_interval="4ba", run_name="a")
        t.fit()
        t.close()
    assert [len(whole.rows[b]) for b in range(16)] == [4] * 6 + [8] * 10
    return data, root / "a", whole


@pytest.mark.slow
@pytest.mark.parametrize(
    ("at_batch", "batches"),
    [
        pytest.param(8, 3, id="inside-a-stage"),  # batches 8-10: 8 samples each
        pytest.param(4, 3, id="across-a-stage-change"),  # batches 4, 5 (4 samples), 6 (8)
    ],
)
def test_skip_data_with_a_ramp_skips_the_samples_of_the_skipped_batches(
    ramped_run: tuple[Path, Path, Samples], at_batch: int, batches: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """The continuation resumes at the checkpoint's batch and trains on exactly the samples after those the named
    batches of the stopped run read (each batch its stage's size), in order, its batches the ramp's by its own count."""
    data, folder, whole = ramped_run
    skipped = [row for b in range(at_batch, at_batch + batches) for row in whole.rows[b]]
    order = [row for b in range(16) for row in whole.rows[b]]  # the data order of the whole run
    start = sum(len(whole.rows[b]) for b in range(at_batch))
    cont = Samples()
    with streaming_cleanup():
        guard = SpikeGuard(skip_data={"at_batch": at_batch, "batches": batches})
        t = _ramp_trainer(data, [guard, cont], "12ba", load_path=str(next(folder.glob(f"ep*-ba{at_batch}-rank0.pt"))))
        t.fit()
        t.close()
    trained = [row for b in range(at_batch, 12) for row in cont.rows[b]]
    assert not set(trained) & set(skipped)
    after = start + len(skipped)
    assert after + len(trained) <= len(order)
    assert trained == order[after : after + len(trained)]
    assert f"skipping {batches} data batches ({len(skipped)} samples) after batch {at_batch}" in capsys.readouterr().out
    # the batch sizes follow the ramp from the checkpoint's sample count, as in the whole run
    assert [len(cont.rows[b]) for b in range(at_batch, 12)] == [len(whole.rows[b]) for b in range(at_batch, 12)]


class Burst(Callback):
    """The loss (and so the gradient) of the chosen batches times 1000: a burst the guard skips, then stops at."""

    def __init__(self, at: set[int]) -> None:
        self.at = at

    def after_loss(self, state: State, logger: Logger) -> None:
        del logger
        if state.timestamp.batch.value in self.at:
            state.loss = state.loss * 1000.0


@pytest.mark.slow
def test_a_burst_across_a_stage_change_rolls_back_and_skips_its_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end with a ramp (4 samples per batch, 8 from batch 10): a burst at batches 9-11 stops the run at the
    third skip; the rollback names the checkpoint at batch 8 and its 4 batches (8, 9: 4 samples; 10, 11: 8), and the
    continuation, loading it with the written skip_data, trains on the samples after those 24."""
    import yaml

    ramp = {"stages": [{"at": "40sp", "global_train_batch_size": 8}], "lr_scaling": "sqrt"}
    data = tmp_path / "train"
    shutil.copytree(REPO / "demo-data" / "train", data)
    whole = Samples()
    guard = SpikeGuard(threshold=6.0, window=16, min_history=6, max_skips=3, rollback={})
    with streaming_cleanup():
        t = _ramp_trainer(
            data, [Burst({9, 10, 11}), guard, whole], "20ba", ramp=ramp, save_folder=str(tmp_path / "run"),
            save_interval="4ba", run_name="burst",
        )  # fmt: skip
        with pytest.raises(SystemExit):
            t.fit()
        t.close()
    assert [b for b, s, _ in guard.decisions if s] == [9, 10, 11], guard.decisions
    stop = capsys.readouterr().err
    assert "stopped at batch 12" in stop and "skipping 4 data batches (24 samples), into" in stop, stop
    written = yaml.safe_load((tmp_path / "spike_guard-rollback-ba8.yaml").read_text())
    skip = written["callbacks"]["spike_guard"]["skip_data"]
    assert skip == {"at_batch": 8, "batches": 4}
    read = [row for b in range(8, 12) for row in whole.rows[b]]
    assert [len(whole.rows[b]) for b in range(8, 12)] == [4, 4, 8, 8]
    cont = Samples()
    with streaming_cleanup():
        t = _ramp_trainer(data, [SpikeGuard(skip_data=skip), cont], "14ba", ramp=ramp, load_path=written["load_path"])
        t.fit()
        t.close()
    assert "skipping 4 data batches (24 samples) after batch 8" in capsys.readouterr().out
    trained = [row for b in range(8, 14) for row in cont.rows[b]]
    assert not set(trained) & set(read)
    # the whole run read 8 x 4 samples before batch 8, then the 24 of the burst: the continuation starts after them
    from streaming import StreamingDataset

    dataset = StreamingDataset(local=str(data), batch_size=4, shuffle=False)
    with streaming_cleanup():
        expected = [tuple(dataset[i]["tokens"].tolist()) for i in range(56, 56 + len(trained))]
    assert trained == expected
