"""Close a Composer ``Trainer`` run in this process so that its streaming threads do not outlive it.

A run that stops before the end of an epoch (the LR range test's ramp, a benchmark's short run, a ``max_duration``
shorter than an epoch) leaves each of its mosaicml-streaming ``StreamingDataset`` iterators mid-epoch: their
download and ready threads poll for the next sample for as long as the process lives. Under the ``composer``
launcher the process ends there; a process that trains again (a notebook, a test session, a benchmark) would
collect two polling threads per dataset and run. :func:`close_trainer` ends them.

What it cannot free: Composer registers each Engine's close with ``atexit``, which holds the run's State (model and
dataloaders) until the process exits, and mosaicml-streaming registers each of a dataset's six ``/dev/shm`` blocks
the same way, so their file descriptors stay open (tests/conftest.py raises the open-files limit for that).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["close_trainer"]


def _datasets(state: Any) -> Iterator[Any]:
    """The datasets of the run's train and eval dataloaders."""
    loaders = [state.train_dataloader] + [evaluator.dataloader.dataloader for evaluator in state.evaluators]
    for loader in loaders:
        dataset = getattr(loader, "dataset", None)
        if dataset is not None:
            yield dataset


def close_trainer(trainer: Any) -> None:
    """``trainer.close()``, then stop the background threads of its streaming datasets (they exit within a tick).

    ``_iterator`` and ``_executor`` are ``StreamingDataset``'s own: ``_iterator.exit()`` is what it calls itself
    when a new epoch starts before the last one ended.
    """
    trainer.close()
    for dataset in _datasets(trainer.state):
        iterator = getattr(dataset, "_iterator", None)
        if iterator is not None:
            iterator.exit()
        executor = getattr(dataset, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=True)
