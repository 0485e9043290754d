"""Fixtures shared by the lr-find tests."""

from __future__ import annotations

from typing import Any

import pytest
import torch


@pytest.fixture(autouse=True)
def _torch_threads() -> Any:
    """Runs here train on one torch thread, as the command and the benchmark do (fast on a busy CPU); restored
    afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
