"""Shared by the training benchmarks: demo data, configs derived from ``yamls/tiny-wsd.yaml``, in-process runs.

Runs go through ``train.py``'s ``main`` (llm-foundry's ``train_from_yaml``) in this process, one after another: the
multi-second import and launcher start-up is paid once, not per run, and the measured part is ``Trainer.fit``.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from composer.core import Callback, Event, State
from composer.loggers import Logger

ROOT = Path(__file__).resolve().parent.parent
BASE_YAML = ROOT / "yamls" / "tiny-wsd.yaml"
DEFAULT_DATA = Path(os.environ.get("FOUNDRY_EXT_BENCH_DATA", Path(tempfile.gettempdir()) / "foundry-ext-bench-data"))

# The scheduler blocks compared, as a user writes them (warmup 20 batches everywhere).
SCHEDULERS: dict[str, dict[str, Any]] = {
    "cosine_with_warmup": {"name": "cosine_with_warmup", "t_warmup": "20ba", "alpha_f": 0.1},
    "constant_with_warmup": {"name": "constant_with_warmup", "t_warmup": "20ba"},
    "warmup_stable_decay": {"name": "warmup_stable_decay", "t_warmup": "20ba", "t_decay": "0.2dur", "alpha_f": 0.1},
    "reduce_lr_on_plateau": {"name": "reduce_lr_on_plateau", "t_warmup": "20ba", "patience": 1, "factor": 0.5},
}


def ensure_data(path: Path = DEFAULT_DATA) -> Path:
    """The demo corpus at ``path``, written on first use (``foundry-ext demo-data`` does the same)."""
    from foundry_ext.demo_data import write_demo_data

    return write_demo_data(path).path


def machine_info() -> dict[str, str]:
    """Machine, versions and date, for the report header."""
    import composer
    import llmfoundry
    import torch

    import foundry_ext

    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "load": f"{load:.1f}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "composer": composer.__version__,
        "llm-foundry": llmfoundry.__version__,
        "foundry-ext": foundry_ext.__version__,
    }


def header(info: dict[str, str], command: str) -> str:
    return (
        f"{info['date']}; {info['nproc']} CPUs ({info['cpu']}), 1-min load average at start {info['load']}; "
        f"torch {info['torch']}, composer {info['composer']}, llm-foundry {info['llm-foundry']}, "
        f"foundry-ext {info['foundry-ext']}, Python {info['python']}.\nCommand: `{command}`"
    )


class Recorder(Callback):
    """Composer callback (registered as ``bench_recorder``): wall-clock of ``fit``, LR, train loss and evals.

    Attributes:
        fit_start, fit_end: ``time.perf_counter()`` at FIT_START and FIT_END.
        fit_cpu: the process's CPU seconds (every thread's, ``time.process_time()``) from FIT_START to FIT_END: the
            work of the fit, which a busy machine's other jobs do not inflate as they do its wall time.
        batch_end: perf_counter at each BATCH_END, one per batch.
        lr, loss: LR used by, and train loss of, each batch.
        evals: ``(batch, eval cross-entropy)`` after each evaluation.
        schedule_seconds: time spent inside the LR schedulers' ``step()`` (which calls the multiplier) and inside
            the plateau adapter's events, during ``fit``: the whole cost of the schedule, measured directly.
        plateau_scale: the plateau adapter's scale at the start of each batch (empty without the adapter).
        n_params: the model's parameter count.
    """

    last: Recorder | None = None

    def __init__(self) -> None:
        self.fit_start = self.fit_end = self.fit_cpu = 0.0
        self.batch_end: list[float] = []
        self.lr: list[float] = []
        self.loss: list[float] = []
        self.evals: list[tuple[int, float]] = []
        self.schedule_seconds = 0.0
        self.plateau_scale: list[float] = []
        self.n_params = 0
        self._plateau: Any = None
        Recorder.last = self

    def _timed(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.schedule_seconds += time.perf_counter() - start

        return timed

    def _instrument(self, state: State) -> None:
        from foundry_ext.trainer.plateau.callback import ReduceLROnPlateauCallback

        for scheduler in state.schedulers:
            scheduler.step = self._timed(scheduler.step)
        for callback in state.callbacks:
            if isinstance(callback, ReduceLROnPlateauCallback):
                callback.run_event = self._timed(callback.run_event)
                self._plateau = callback

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        del logger  # unused
        if event == Event.FIT_START:
            self._instrument(state)
            self.n_params = sum(p.numel() for p in state.model.parameters())
            self.fit_start = time.perf_counter()
            self.fit_cpu = -time.process_time()
        elif event == Event.BATCH_START:
            self.lr.append(float(state.optimizers[0].param_groups[0]["lr"]))
            if self._plateau is not None:
                self.plateau_scale.append(float(self._plateau.plateau.scale))
        elif event == Event.BATCH_END:
            self.batch_end.append(time.perf_counter())
            self.loss.append(float(state.loss.item() if hasattr(state.loss, "item") else state.loss))
        elif event == Event.EVAL_END and state.dataloader_label == "eval":
            values = state.eval_metric_values
            if "LanguageCrossEntropy" in values:
                self.evals.append((state.timestamp.batch.value, float(values["LanguageCrossEntropy"])))
        elif event == Event.FIT_END:
            self.fit_end = time.perf_counter()
            self.fit_cpu += time.process_time()


def register_recorder() -> None:
    from llmfoundry import registry

    if "bench_recorder" not in registry.callbacks.get_all():
        registry.callbacks.register("bench_recorder", func=Recorder)


def make_config(data: Path, scheduler: dict[str, Any], t_warmup: str | None = None, **overrides: Any) -> Any:
    """``tiny-wsd.yaml`` with ``scheduler``, the demo data at ``data``, no checkpoints, the recorder, ``overrides``.

    ``t_warmup`` replaces the scheduler's warmup (short smoke runs need a short one).
    """
    from omegaconf import OmegaConf as om

    cfg = om.load(BASE_YAML)
    cfg.variables.data_local = str(data)
    cfg.scheduler = dict(scheduler)
    if t_warmup is not None and "t_warmup" in cfg.scheduler:
        cfg.scheduler.t_warmup = t_warmup
    for key in ("save_folder", "save_interval", "save_overwrite"):
        cfg.pop(key, None)
    cfg.callbacks = {"bench_recorder": {}}
    cfg.log_to_console = False
    cfg.python_log_level = "warn"
    for key, value in overrides.items():
        om.update(cfg, key, value, merge=False)
    return cfg


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def run(cfg: Any, quiet: bool = True) -> Recorder:
    """Train ``cfg`` in this process through ``train.py`` and return what the recorder saw."""
    import warnings

    from omegaconf import OmegaConf as om

    from foundry_ext.streaming_cleanup import streaming_cleanup

    sys.path.insert(0, str(ROOT))
    try:
        import train  # the repository's train.py
    finally:
        sys.path.remove(str(ROOT))
    register_recorder()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.yaml")
        om.save(cfg, path)
        for attempt in range(3):
            Recorder.last = None
            try:
                # a short run stops mid-epoch: its dataset threads and shared memory must not outlive it
                with streaming_cleanup(), _quiet(quiet), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    train.main(path, []).close()
                break
            except FileExistsError as err:
                # mosaicml-streaming names its shared memory by scanning /dev/shm for a free prefix: another process
                # starting a dataset at the same moment can take it first. Starting again picks a new prefix.
                if attempt == 2:
                    raise
                print(f"bench: retrying a run after a shared-memory name clash ({err})", file=sys.stderr)
    assert Recorder.last is not None, "the bench_recorder callback was not built"
    return Recorder.last


def save_figure(fig: Any, path: Path, dpi: int) -> None:
    """Lay out ``fig``, write it to ``path`` (making its folder), close it: :func:`foundry_ext.figures.save_figure`."""
    from foundry_ext.figures import save_figure as save

    save(fig, path, dpi=dpi, make_folder=True)
