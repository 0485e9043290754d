"""``node_signal_files``: one signal file name per node in a multi-node job, unchanged on one node (in-process, quick).

The multi-node run itself is ``tests/resume/test_two_nodes.py`` (slow: two launchers); this checks the transform.
"""

from __future__ import annotations

import pytest
from composer.utils import dist

from foundry_ext.trainer.node_signal_files import node_signal_files


@pytest.mark.parametrize(
    ("world", "local", "name"), [("4", "2", "._signal_file_node1_Kf"), ("2", "2", "._signal_file_node0_Kf")]
)
def test_the_signal_file_carries_this_node_in_a_multi_node_job(
    world: str, local: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", local)
    monkeypatch.setattr(dist, "get_node_signal_file_name", lambda *a, **k: "._signal_file_node0_Kf")  # rank 0's
    monkeypatch.setattr(dist, "get_node_rank", lambda: 1)
    cfg = {"max_duration": "2ba"}
    assert node_signal_files(cfg) is cfg
    assert dist.get_node_signal_file_name() == name
    node_signal_files(cfg)  # a second call does not wrap twice
    assert dist.get_node_signal_file_name() == name
