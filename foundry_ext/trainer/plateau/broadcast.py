"""The monitored value, the same on every rank: rank 0's, broadcast (one float64 collective per check)."""

from __future__ import annotations

from typing import Any

import torch
from composer.core import State
from composer.utils import dist

__all__ = ["as_float", "broadcast_value"]


def as_float(value: Any) -> float:
    """A metric value (a tensor or a number) as a Python float."""
    return float(value.item() if isinstance(value, torch.Tensor) else value)


def broadcast_value(state: State, value: float) -> float:
    """Rank 0's ``value`` on every rank: each rank's decision then has bitwise the same input."""
    if dist.get_world_size() == 1:
        return value
    tensor = state.device.tensor_to_device(torch.tensor([value], dtype=torch.float64))
    dist.broadcast(tensor, src=0)
    return float(tensor.item())
