"""Plateau decisions in real loggers: MLflow (a local file store read back with MlflowClient) and the console.

Each evaluation's ``lr_plateau/*`` values are logged at that evaluation's timestamp, from ``Event.EVAL_END`` (Composer
runs callbacks before loggers, so the console prints them in the evaluation's block, with the cut line just above).
MLflow keeps a value at every evaluation with ``log_duplicated_metric_every_n_steps: 1``, the setting docs/plateau.md
recommends; with Composer's default of 100 a repeated value is dropped, which the last test shows.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from composer import Trainer
from composer.callbacks import LRMonitor
from composer.loggers import MLFlowLogger

from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
from tests.support.launcher import REPO
from tests.support.trainer_utils import BASE_LR, TinyModel, loader, make_trainer

MONITOR = "metrics/eval/Scripted"
PLATEAU_KEYS = ("lr_plateau/scale", "lr_plateau/best", "lr_plateau/num_bad_evals", "lr_plateau/cuts")
# evaluations every 4 batches; patience 1: best 3 at 4, bad at 8, cut at 12, bad 16, cut 20, bad 24
VALUES = [3.0] * 6
EXPECTED = {  # step -> (scale, best, num_bad_evals, cuts), from torch's rule by hand
    4: (1.0, 3.0, 0, 0),
    8: (1.0, 3.0, 1, 0),
    12: (0.5, 3.0, 0, 1),
    16: (0.5, 3.0, 1, 1),
    20: (0.25, 3.0, 0, 2),
    24: (0.25, 3.0, 1, 2),
}


def mlflow_history(tracking_uri: str, names: tuple[str, ...]) -> dict[str, list[tuple[int, float]]]:
    """(step, value) of every logged point of each metric in the one run of the store, read back with MlflowClient."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = client.search_experiments()
    runs = [r for e in experiments for r in client.search_runs([e.experiment_id])]
    assert len(runs) == 1, runs
    run_id = runs[0].info.run_id
    return {n: sorted((m.step, m.value) for m in client.get_metric_history(run_id, n)) for n in names}


def run_with_mlflow(tmp_path: Path, **mlflow_kwargs: Any) -> tuple[str, Any]:
    uri = f"file://{tmp_path / 'mlruns'}"
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=1)
    logger = MLFlowLogger(tracking_uri=uri, experiment_name="plateau", log_system_metrics=False, **mlflow_kwargs)
    trainer, recorder = make_trainer([scheduler], max_duration="24ba", eval_values=VALUES, eval_interval="4ba",
                                     loggers=[logger], callbacks=[LRMonitor()])  # fmt: skip
    trainer.fit()
    trainer.close()  # ends the MLflow run: every queued point is written
    return uri, recorder


def test_mlflow_shows_the_lr_of_every_batch_and_every_decision_at_its_evaluation(tmp_path: Path) -> None:
    uri, recorder = run_with_mlflow(tmp_path, log_duplicated_metric_every_n_steps=1)
    history = mlflow_history(uri, ("lr-SGD/group0", *PLATEAU_KEYS))
    for i, name in enumerate(PLATEAU_KEYS):
        assert history[name] == [(step, float(v[i])) for step, v in EXPECTED.items()], name
    # lr_monitor logs at BATCH_END, before that timestamp's evaluation: the value at step b is the LR of 0-indexed
    # batch b, except right after a cut (b = 12, 20), where it is the LR before the cut; lr_plateau/scale at the same
    # step has the cut, and the LR the optimizer really used (recorded at BATCH_START) agrees from step b + 1 on
    lrs = dict(history["lr-SGD/group0"])
    assert sorted(lrs) == list(range(1, 25))
    for b, lr in lrs.items():
        scale = [s for step, (s, *_) in EXPECTED.items() if step < b]
        assert lr == (BASE_LR * scale[-1] if scale else BASE_LR), b
        if b not in EXPECTED:
            assert recorder.lrs[b] == [lr], b
    assert recorder.lrs[12] == [BASE_LR * 0.5] and recorder.lrs[20] == [BASE_LR * 0.25]


def test_with_composers_default_mlflow_drops_repeated_plateau_values(tmp_path: Path) -> None:
    """Why docs/plateau.md sets log_duplicated_metric_every_n_steps: with the default (100) best shows one point."""
    uri, _ = run_with_mlflow(tmp_path)
    history = mlflow_history(uri, ("lr_plateau/best", "lr_plateau/cuts", "lr-SGD/group0"))
    assert history["lr_plateau/best"] == [(4, 3.0)]
    assert history["lr_plateau/cuts"] == [(4, 0.0), (12, 1.0), (20, 2.0)]  # a value is kept only when it changes
    assert len(history["lr-SGD/group0"]) < 24


def test_console_prints_each_cut_and_the_plateau_values_in_their_evaluations_block() -> None:
    stream = io.StringIO()
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=1)
    torch.manual_seed(0)
    model = TinyModel(VALUES)
    trainer = Trainer(
        model=model,
        train_dataloader=loader(64),
        eval_dataloader=loader(8, seed=1),
        eval_interval="4ba",
        max_duration="24ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=BASE_LR),
        schedulers=[scheduler],
        device="cpu",
        progress_bar=False,
        log_to_console=True,
        console_stream=stream,
        console_log_interval="4ba",
        seed=0,
    )
    trainer.fit()
    console = stream.getvalue()
    end_of_eval = "[Eval batch=2/2] Eval on eval data:"  # the eval loader has 2 batches; the block comes at the end
    blocks = console.split(end_of_eval)[1:]
    assert len(blocks) == 6  # one per evaluation, the last one (at batch 24) included
    for block, (scale, best, bad, cuts) in zip(blocks, EXPECTED.values(), strict=True):
        assert f"Eval lr_plateau/scale: {scale:.4f}" in block
        assert f"Eval lr_plateau/best: {best:.4f}" in block
        assert f"Eval lr_plateau/num_bad_evals: {bad}" in block
        assert f"Eval lr_plateau/cuts: {cuts}" in block
    assert "Train lr_plateau" not in console  # never under a later batch's header
    # each cut line comes right before the block of the evaluation that decided it
    cut_lines = [m.start() for m in re.finditer(r"reduce_lr_on_plateau: cut LR scale", console)]
    headers = [m.start() for m in re.finditer(re.escape(end_of_eval), console)]
    assert [sum(h < c for h in headers) for c in cut_lines] == [2, 4]  # after 2 and 4 earlier blocks: at 12 and 20
    assert "cut LR scale 1 -> 0.5 at epoch 0, batch 12" in console
    assert "cut LR scale 0.5 -> 0.25 at epoch 1, batch 20" in console


# -- a real llm-foundry run through the launcher, with the settings docs/plateau.md recommends ----------------------


def docs_mlflow_settings() -> dict[str, Any]:
    """The ``loggers.mlflow`` block of docs/plateau.md's logging section (the test uses exactly what the docs show)."""
    import yaml

    text = (REPO / "docs" / "plateau.md").read_text()
    block = re.search(r"<!-- mlflow-example -->\n```yaml\n(.*?)```", text, re.S)
    assert block is not None, "docs/plateau.md lost its MLflow example"
    return yaml.safe_load(block.group(1))["loggers"]["mlflow"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tiny_plateau_run_shows_every_decision_in_mlflow_and_on_the_console(run_composer: Any, tmp_path: Path) -> None:
    """yamls/tiny-resume.yaml: evaluations every 3 batches, cuts at 9, 15, 21 (deterministic, see its comment)."""
    settings = docs_mlflow_settings()
    assert settings["log_duplicated_metric_every_n_steps"] == 1
    settings["tracking_uri"] = uri = f"file://{tmp_path / 'mlruns'}"
    run = run_composer("yamls/tiny-resume.yaml", *(f"loggers.mlflow.{k}={v}" for k, v in settings.items()),
                       "save_folder=null", cwd=tmp_path)  # fmt: skip
    evals = [3, 6, 9, 12, 15, 18, 21, 24]
    scales = [1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125]
    history = mlflow_history(uri, ("lr-DecoupledAdamW/group0", "metrics/eval/LanguageCrossEntropy", *PLATEAU_KEYS))
    assert [s for s, _ in history["lr-DecoupledAdamW/group0"]] == list(range(1, 25))  # the LR at every batch
    first_ce = history["metrics/eval/LanguageCrossEntropy"][0][1]
    assert history["lr_plateau/scale"] == list(zip(evals, scales, strict=True))
    assert history["lr_plateau/best"] == [(t, first_ce) for t in evals]  # threshold 100: the first stays best
    assert history["lr_plateau/num_bad_evals"] == [(t, float(i % 2)) for i, t in enumerate(evals)]
    assert history["lr_plateau/cuts"] == [(t, float(i // 2)) for i, t in enumerate(evals)]
    for b, lr in history["lr-DecoupledAdamW/group0"]:  # lr_monitor: before the cut of its own step (see above)
        scale = [s for t, s in zip(evals, scales, strict=True) if t < b]
        assert lr == pytest.approx(3e-3 * min(1.0, (b - 1) / 2) * (scale[-1] if scale else 1.0), rel=1e-12), b

    # the console (Composer's ConsoleLogger writes to stderr): each evaluation's block holds its lr_plateau values,
    # and each cut line comes between that batch's header and its evaluation's block
    console = run.stderr
    for t, scale in zip(evals, scales, strict=True):
        segment = console.split(f"[batch={t}/24]:")[1].split("[batch=")[0]
        assert f"Eval lr_plateau/scale: {scale:.4f}" in segment, t
        cut = re.search(r"reduce_lr_on_plateau: cut LR scale .* at epoch 0, batch (\d+),", segment)
        assert (int(cut.group(1)) if cut else None) == (t if t in (9, 15, 21) else None), t
        if cut:
            assert cut.start() < segment.index("[Eval batch=1/1] Eval on eval data:"), t
    assert "Train lr_plateau" not in console


def test_a_standalone_evaluation_never_decides() -> None:
    """Trainer.eval() outside fit() logs metrics but is not one of the run's evaluations: no plateau decision."""
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=0)
    trainer, _ = make_trainer([scheduler], max_duration="8ba", eval_values=[3.0] * 5, eval_interval="4ba")
    trainer.fit()
    before = (scheduler.callback.plateau.num_evals, scheduler.callback.plateau.cuts)
    trainer.eval()
    trainer.eval()
    assert (scheduler.callback.plateau.num_evals, scheduler.callback.plateau.cuts) == before == (2, 1)
