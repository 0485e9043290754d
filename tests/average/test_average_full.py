"""``foundry-ext average`` of ``.pt`` checkpoints of a real (tiny, in-process) Composer run.

The run: the test Trainer (``tests.support.trainer_utils``, a linear model, DecoupledAdamW) for 16 batches with a
checkpoint every 4 (``ep0-ba4-rank0.pt`` ... ``ep0-ba16-rank0.pt``). Checked: the written model weights are the
weighted mean of the inputs' (float tolerance), everything else in the file is the newest checkpoint's exactly, no
file of the run changes, and the model a Composer ``Trainer`` builds from it with ``load_weights_only`` holds the
average.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from foundry_ext.checkpoint import load_checkpoint_safely
from foundry_ext.cli import main
from tests.support.multirank import checkpoint_differences

pytestmark = pytest.mark.slow  # a real Composer run trained in the module's fixture (~10-30 s)

BATCHES = (4, 8, 12, 16)


def _train(folder: Path, run_name: str) -> None:
    from composer.optim import DecoupledAdamW

    from tests.support.trainer_utils import make_trainer

    trainer, _ = make_trainer(
        [],
        max_duration="16ba",
        save_folder=str(folder),
        save_interval="4ba",
        train_size=400,
        optimizer=lambda m: DecoupledAdamW(m.parameters(), lr=0.05),
        run_name=run_name,
    )
    trainer.fit()
    trainer.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("average-full") / "checkpoints"
    _train(folder, "stable")
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _model(path: Path) -> dict[str, torch.Tensor]:
    return dict(load_checkpoint_safely(path)["state"]["model"])


def test_the_average_is_the_weighted_mean_and_the_rest_is_the_newest(run: Path, tmp_path: Path) -> None:
    before = _files(run)
    out = tmp_path / "avg.pt"
    assert main(["average", str(run), "--last", "3", "--weights", "exp:0.5", "--out", str(out)]) == 0
    weights = [1 / 7, 2 / 7, 4 / 7]  # batches 8, 12, 16: the newest weighs 1, each older half the next
    inputs = [_model(run / f"ep0-ba{b}-rank0.pt") for b in BATCHES[1:]]
    got = _model(out)
    assert got.keys() == inputs[0].keys() and got
    for name, tensor in got.items():
        expected = sum(w * m[name].double() for w, m in zip(weights, inputs, strict=True))
        assert tensor.dtype == inputs[0][name].dtype
        torch.testing.assert_close(tensor.double(), expected, rtol=0, atol=1e-6)
        assert not torch.equal(tensor, inputs[-1][name])  # the weights moved between checkpoints: not a copy
    # everything but the model weights: the newest checkpoint's, bit for bit
    differences = checkpoint_differences(run / "ep0-ba16-rank0.pt", out)
    assert differences and all(d.startswith("/state/model/") for d in differences), differences
    assert _files(run) == before  # no checkpoint of the run was changed, moved or added to


def test_composer_loads_the_average_with_load_weights_only(run: Path, tmp_path: Path) -> None:
    from tests.support.trainer_utils import make_trainer

    out = tmp_path / "avg.pt"
    paths = [str(run / f"ep0-ba{b}-rank0.pt") for b in BATCHES]
    assert main(["average", *paths, "--out", str(out)]) == 0
    trainer, _ = make_trainer([], max_duration="1ba", load_path=str(out), load_weights_only=True)
    try:
        loaded = {k: v.detach() for k, v in trainer.state.model.state_dict().items()}
    finally:
        trainer.close()
    inputs = [_model(Path(p)) for p in paths]
    assert loaded.keys() == inputs[0].keys()
    for name, tensor in loaded.items():
        expected = sum(0.25 * m[name].double() for m in inputs)
        torch.testing.assert_close(tensor.double(), expected, rtol=0, atol=1e-6)
    assert trainer.state.timestamp.batch.value == 0  # weights only: the new run starts at batch 0


def test_it_says_what_it_averaged_and_how_to_evaluate_it(run: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "avg.pt"
    assert main(["average", str(run), "--batches", "8:12", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert f"averaged 2 checkpoints of stable into {out} (file):" in printed.out
    assert "batch        8  weight 0.5" in printed.out and "batch       12  weight 0.5" in printed.out
    assert f"composer train.py CONFIG.yaml load_path={out} load_weights_only=true eval_first=true" in printed.out
    assert "[2/2]" in printed.err  # progress, one line per checkpoint
