"""The FSDP reference run that the sharded-checkpoint tests share: ``FSDP_VERSION=2 composer -n 2`` on CPU.

``yamls/tiny-fsdp.yaml`` (the demo MPT, FSDP2 through torch's ``fully_shard`` over gloo, ``state_dict_type:
sharded``) for 12 batches, a checkpoint every 4 (``ep0-ba4/``, ``ep0-ba8/``, ``ep0-ba12/``: ``__0_0.distcp``,
``__1_0.distcp`` and ``.metadata`` each, ``latest-sharded-rank0`` -> ``ep0-ba12``), an evaluation every 4 batches
of every validation sample (``eval_subset_num_batches=-1``: the same 256 samples on any world size), ``autoresume``
with ``callbacks.checkpoint_guard``, every LR and eval metric of each rank logged as JSON lines
(:mod:`tests.support.jsonl_logger`; read them with :func:`tests.support.multirank.read_metrics`), and the fault hooks
loaded (:mod:`tests.support.fault_hooks`: idle unless a ``FAULT_*`` variable is set). One command for every sharded
test: the exact resumes, the world-size changes and refusals (test_fsdp_resume.py), the kill chain
(test_checkpoint_guard_sharded.py), the finished relaunch (test_finished_relaunch.py), the sharded average
(tests/average/test_average_sharded.py) and the anneal branch's stable run (tests/anneal/test_anneal_fsdp.py) all
compare with this one run, trained once: one 2-rank launch per suite.

Use it from any test module::

    from tests.support.fsdp import FSDP_ENV, FSDP_YAML, fsdp_overrides, fsdp_reference  # noqa: F401 (a fixture)

    def test_x(fsdp_reference: Path, demo_data: Path, tmp_path: Path) -> None:
        launch_and_wait(FSDP_YAML, fsdp_overrides(demo_data, tmp_path / "run", "load_path=..."), nproc=2,
                        log=tmp_path / "run.log", env=FSDP_ENV)

The run is trained once per session (under pytest-xdist, by the first worker that needs it, the others wait on a
lock), in ``<basetemp>/fsdp_reference/``: ``checkpoints/``, ``metrics-rank0.jsonl``, ``metrics-rank1.jsonl``.
Read it, never write into it (load its checkpoints with ``load_path``, copy a folder to damage it). About 25 s of
wall time on an idle 2-core machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.launcher import REPO
from tests.support.multirank import FAULT_HOOKS, JSONL_LOGGER, launch_and_wait
from tests.support.references import FSDP_ENV, trained_once

__all__ = ["FSDP_ENV", "FSDP_YAML", "fsdp_overrides", "fsdp_reference"]

FSDP_YAML = REPO / "yamls" / "tiny-fsdp.yaml"


def fsdp_overrides(data: Path, run_dir: Path, *extra: str) -> list[str]:
    """The reference run's overrides with ``save_folder`` and the JSONL metrics in ``run_dir``; ``extra`` last."""
    return [
        f"variables.data_local={data}",
        "run_name=tiny-fsdp",  # fixed: autoresume needs it
        f"save_folder={run_dir}/checkpoints",
        "max_duration=12ba",
        "save_interval=4ba",
        "eval_interval=4ba",
        "eval_subset_num_batches=-1",
        "autoresume=true",  # an empty folder: load_path, when given, is loaded
        "save_overwrite=false",
        "callbacks.checkpoint_guard={}",
        f"code_paths=[{JSONL_LOGGER},{FAULT_HOOKS}]",
        f"loggers.jsonl.path={run_dir}/metrics-rank{{rank}}.jsonl",
        *extra,
    ]


@pytest.fixture(scope="session")
def fsdp_reference(demo_data: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """The folder of the uninterrupted 2-rank FSDP2 run described in this module's docstring (trained once)."""
    return trained_once(
        "fsdp_reference",
        tmp_path_factory,
        request,
        lambda run_dir, log: launch_and_wait(
            FSDP_YAML, fsdp_overrides(demo_data, run_dir), nproc=2, log=log, env=FSDP_ENV, timeout=900
        ),
    )
