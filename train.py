"""Train with llm-foundry: ``composer train.py YAML [key=value ...]``, as llm-foundry's ``scripts/train/train.py``.

Two additions: a copy of this process's console output goes to ``train-rank{RANK}.log`` next to the checkpoint
folder (the launcher shows only rank 0 and discards the others), and at the end rank 0 says where both are.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

# Everything this repository trains on is local: never wait on the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One CPU thread per process unless told otherwise, as torchrun does: on a busy CPU, OpenMP threads that spin-wait
# for each other make the tiny demo model 5-10x slower. GPU runs are unaffected.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from llmfoundry.command_utils import train_from_yaml  # after the offline defaults above
from omegaconf import OmegaConf as om


class _Tee:
    """A text stream that writes to the console and to a log file."""

    def __init__(self, stream: TextIO, log: TextIO) -> None:
        self._stream, self._log = stream, log

    def write(self, text: str) -> int:
        self._log.write(text)
        return self._stream.write(text)

    def flush(self) -> None:
        self._log.flush()
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...: the console's
        return getattr(self._stream, name)


def _save_folder(yaml_path: str, args_list: list[str]) -> str | None:
    """``save_folder`` of the merged config, ``{run_name}`` filled in, as the Trainer will use it."""
    cfg = om.load(yaml_path)
    if args_list:
        cfg = om.merge(cfg, om.from_cli(args_list))
    try:
        folder, run_name = cfg.get("save_folder"), cfg.get("run_name")
    except Exception:  # an interpolation this script cannot resolve: llm-foundry will report it
        return None
    if folder is None:
        return None
    return str(folder).replace("{run_name}", str(run_name or os.environ.get("RUN_NAME", "")))


def main(yaml_path: str, args_list: list[str]) -> Any:
    """Train; return the ``Trainer`` (a caller in the same process closes it, see ``foundry_ext.streaming_cleanup``)."""
    from foundry_ext.config.errors import ConfigError, stop_run
    from foundry_ext.config.train_yaml import read_train_yaml

    try:  # a file that is not a train YAML (a key given twice): validate's one line, not OmegaConf's traceback
        read_train_yaml(yaml_path)
    except ConfigError as e:
        stop_run(e.problems)
    save_folder = _save_folder(yaml_path, args_list)
    local = save_folder is not None and "://" not in save_folder
    log_path = None
    if local:
        run_dir = os.path.dirname(os.path.abspath(save_folder))
        os.makedirs(run_dir, exist_ok=True)
        log_path = os.path.join(run_dir, f"train-rank{os.environ.get('RANK', '0')}.log")
        log = open(log_path, "w", buffering=1)
        sys.stdout, sys.stderr = _Tee(sys.stdout, log), _Tee(sys.stderr, log)

    trainer = train_from_yaml(yaml_path, args_list)

    if os.environ.get("RANK", "0") == "0":
        where = os.path.abspath(save_folder) if local else save_folder
        latest = os.path.join(where, "latest-rank0.pt") if local else None
        print(f"checkpoints are in {where}" if where else "checkpoints: none (no save_folder)")
        if latest and os.path.exists(latest):
            print(f"latest checkpoint: {latest} -> {os.path.basename(os.path.realpath(latest))}")
        print(f"logs are in {log_path}" if log_path else "logs: the console output above")
        sys.stdout.flush()
    return trainer


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
