"""A resumed plateau against its checkpoint: the settings saved with the state, and what a change of them does.

A changed ``monitor`` or ``mode`` makes the saved ``best`` meaningless (a value of another metric, or better in the
other direction): the comparison restarts. The other settings only change how later evaluations are judged or cut,
and apply from the resume on; each is named in one line.
"""

from __future__ import annotations

from typing import Any

from foundry_ext.config.notices import warn_once
from foundry_ext.schedules.plateau import ReduceLROnPlateau
from foundry_ext.schedules.plateau_rule import PlateauState
from foundry_ext.trainer.plateau.report import scales

__all__ = ["APPLY_KEYS", "RESET_KEYS", "reconcile", "saved_settings"]

#: Settings saved with the plateau state (module docstring: why a change of these restarts the comparison).
RESET_KEYS = ("monitor", "mode")
APPLY_KEYS = ("threshold_mode", "threshold", "patience", "factor", "cooldown", "min_lr", "min_scale", "eps",
              "check_interval")  # fmt: skip


def saved_settings(config: ReduceLROnPlateau) -> dict[str, Any]:
    """The settings saved with the state (plain values: the checkpoint is loaded with ``weights_only``)."""
    interval = config.check_interval
    return {
        "monitor": config.monitor,
        "mode": config.mode,
        "threshold_mode": config.threshold_mode,
        "threshold": config.threshold,
        "patience": config.patience,
        "factor": config.factor,
        "cooldown": config.cooldown,
        "min_lr": list(config.min_lr) if isinstance(config.min_lr, list) else config.min_lr,
        "min_scale": config.min_scale,
        "eps": config.eps,
        "check_interval": None if interval is None else str(interval),
    }


def reconcile(
    plateau: PlateauState, saved: dict[str, Any] | None, now: dict[str, Any], batch: int, groups: int
) -> bool:
    """After a load: restart the comparison if monitor or mode changed; name every other changed setting.

    Returns:
        bool: Whether the comparison restarted (the caller drops its train-loss window too).
    """
    at = f"batch {batch}"
    if saved is None:
        warn_once(
            "reduce_lr_on_plateau: the checkpoint's plateau state does not record its monitor and settings "
            "(written by an older foundry-ext), so a changed monitor or mode cannot be detected; if you changed "
            "them, reset the state with load_ignore_keys: [state/callbacks/ReduceLROnPlateauCallback]"
        )
        return False
    reset = [k for k in RESET_KEYS if k in saved and saved[k] != now[k]]
    if reset:
        p = plateau
        dropped = f"best {p.best:.6g}" if p.best is not None else "no best yet"
        warn_once(
            f"reduce_lr_on_plateau: resumed at {at} with "
            + ", ".join(f"{k} {now[k]!r} (the checkpoint's: {saved[k]!r})" for k in reset)
            + f": the comparison restarts ({dropped}, {p.num_bad_evals} bad evaluations and cooldown "
            f"{p.cooldown_counter} dropped); the LR scale {scales(p.scales(groups))} and "
            f"{p.cuts} cuts are kept"
        )
        p.best, p.last_value, p.num_bad_evals, p.cooldown_counter = None, None, 0, 0
    changed = [k for k in APPLY_KEYS if k in saved and saved[k] != now[k]]
    if changed:
        warn_once(
            f"reduce_lr_on_plateau: settings changed since the checkpoint apply from {at} on: "
            + ", ".join(f"{k} {saved[k]!r} -> {now[k]!r}" for k in changed)
            + f" (kept: {plateau.num_bad_evals} bad evaluations, cooldown {plateau.cooldown_counter})"
        )
    return bool(reset)
