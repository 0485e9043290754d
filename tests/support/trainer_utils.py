"""A tiny real Composer ``Trainer`` for scheduler tests: a 1-layer regression model and a scripted eval metric."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from composer import Trainer
from composer.core import Callback, Event, State
from composer.loggers import Logger
from composer.models import ComposerModel
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import Metric

BASE_LR = 0.1


class ScriptedMetric(Metric):
    """An eval metric whose n-th ``compute()`` returns ``values[n]``: drives the plateau adapter deterministically."""

    full_state_update = False

    def __init__(self, values: Sequence[float]) -> None:
        super().__init__()
        self.values = list(values)
        self.calls = 0
        self.add_state("dummy", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def compute(self) -> torch.Tensor:
        value = self.values[min(self.calls, len(self.values) - 1)]
        self.calls += 1
        return torch.tensor(value, dtype=torch.float64)


class TinyModel(ComposerModel):
    def __init__(self, eval_values: Sequence[float] | None = None) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 1)
        self.eval_values = eval_values

    def forward(self, batch: Any) -> torch.Tensor:
        return self.net(batch[0])

    def loss(self, outputs: torch.Tensor, batch: Any) -> torch.Tensor:
        return torch.nn.functional.mse_loss(outputs, batch[1])

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        if is_train or self.eval_values is None:
            return {}
        return {"Scripted": ScriptedMetric(self.eval_values)}

    def eval_forward(self, batch: Any, outputs: Any = None) -> torch.Tensor:
        return outputs if outputs is not None else self.forward(batch)

    def update_metric(self, batch: Any, outputs: Any, metric: Metric) -> None:
        metric.update(outputs, batch[1])


def loader(n: int = 64, batch_size: int = 4, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=False)


class LRRecorder(Callback):
    """Records the LR the optimizer really uses for each batch (read at BATCH_START), keyed by batch index."""

    def __init__(self) -> None:
        self.lrs: dict[int, list[float]] = {}

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        del logger
        if event == Event.BATCH_START:
            self.lrs[state.timestamp.batch.value] = [g["lr"] for g in state.optimizers[0].param_groups]


def make_trainer(
    schedulers: Iterable[Any],
    *,
    max_duration: str = "40ba",
    eval_values: Sequence[float] | None = None,
    eval_interval: str = "5ba",
    callbacks: Sequence[Callback] = (),
    train_size: int = 64,
    train_dataloader: Any = None,
    optimizer: Callable[[TinyModel], torch.optim.Optimizer] | None = None,
    **kwargs: Any,
) -> tuple[Trainer, LRRecorder]:
    """The tiny real Trainer every scheduler test shares: seeded, on CPU, quiet; ``kwargs`` go to ``Trainer``.

    ``train_dataloader`` replaces the ``train_size`` regression samples; ``optimizer(model)`` replaces
    ``SGD(lr=BASE_LR)`` (e.g. two param groups). An evaluator (8 samples, every ``eval_interval``) exists when
    ``eval_values`` is given: its metric ``metrics/eval/Scripted`` returns them in order.
    """
    torch.manual_seed(0)
    model = TinyModel(eval_values)
    recorder = LRRecorder()
    trainer = Trainer(
        model=model,
        train_dataloader=loader(train_size) if train_dataloader is None else train_dataloader,
        eval_dataloader=loader(8, seed=1) if eval_values is not None else None,
        eval_interval=eval_interval,
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=BASE_LR) if optimizer is None else optimizer(model),
        schedulers=list(schedulers),
        callbacks=[recorder, *callbacks],
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        seed=0,
        **kwargs,
    )
    return trainer, recorder
