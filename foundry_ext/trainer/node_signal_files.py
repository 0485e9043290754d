"""One signal file per node, so that a multi-node job on a shared filesystem starts and autoresumes.

Composer 0.32 and llm-foundry 0.22 make the local ranks of a node wait for their local rank 0 through a signal file:
local rank 0 writes ``._signal_file_node<N>_<random>``, the others wait until it exists, then local rank 0 removes
it. The name comes from ``composer.utils.dist.get_node_signal_file_name()``, which broadcasts global rank 0's name to
every rank, so every node uses ``._signal_file_node0_<random>``. Where two nodes see the same folder (a shared
filesystem: NFS, Lustre, a shared home), both local ranks 0 write and remove the same file and the second removal
fails: ``FileNotFoundError: ... '._signal_file_node0_KfmwNg'`` in llm-foundry's ``build_tokenizer`` (the working
directory) and in the Trainer's autoresume (the ``save_folder``), i.e. every multi-node ``autoresume`` run on a shared
folder fails before training (llm-foundry issue 1736; Composer's open pull request 2363 proposes the node rank in the
name).

:func:`node_signal_files` is a config transform (entry point group ``llmfoundry_config_transforms``, run at the start
of llm-foundry's ``train()``, before the tokenizer): in a multi-node job (``WORLD_SIZE`` > ``LOCAL_WORLD_SIZE``) it
wraps ``get_node_signal_file_name`` so that the broadcast name carries this node's rank, ``._signal_file_node<this
node>_<rank 0's random part>``: the ranks of one node agree on it, two nodes differ. Single-node runs are unchanged.
The config is returned as it came.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

__all__ = ["node_signal_files"]

_NAME = re.compile(r"^\._signal_file_node\d+_")


def node_signal_files(cfg: Any) -> Any:
    """llm-foundry config transform: in a multi-node job, one signal file name per node (see the module docstring)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)) or world)
    if world > local:
        _install()
    return cfg


def _install() -> None:
    from composer.utils import dist

    original = dist.get_node_signal_file_name
    if getattr(original, "_foundry_ext_per_node", False):
        return

    @functools.wraps(original)
    def per_node(*args: Any, **kwargs: Any) -> str:
        name = original(*args, **kwargs)  # global rank 0's name, on every rank
        return _NAME.sub(f"._signal_file_node{dist.get_node_rank()}_", name)

    per_node._foundry_ext_per_node = True  # type: ignore[attr-defined]
    dist.get_node_signal_file_name = per_node
