"""The unpickler for a sharded checkpoint's ``.metadata``: only ``torch.distributed.checkpoint``'s own types.

Used by ``foundry-ext inspect`` (:mod:`foundry_ext.checkpoint.sharded`) and by the completeness check of a sharded
folder (:mod:`foundry_ext.checkpoint.layout`: the pre-flight check and ``checkpoint_guard`` ask it), which both read
``.metadata`` files they must not trust.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["METADATA_GLOBALS", "MetadataUnpickler"]

# The dataclasses torch.distributed.checkpoint pickles into .metadata (torch 2.7); anything else is refused.
METADATA_GLOBALS = {
    ("torch.distributed.checkpoint.metadata", name)
    for name in (
        "Metadata",
        "MetadataIndex",
        "ChunkStorageMetadata",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "TensorProperties",
        "StorageMeta",
        "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("collections", "OrderedDict"),
}


class MetadataUnpickler(pickle.Unpickler):
    """Resolves only the classes in :data:`METADATA_GLOBALS` and torch dtypes: no code from the file runs.

    The refusal's text is ``torch.load``'s (``Unsupported global: GLOBAL m.n was not an allowed global``), which
    :data:`foundry_ext.checkpoint.errors.UNSUPPORTED_GLOBAL` parses.
    """

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in METADATA_GLOBALS:
            return super().find_class(module, name)
        if module == "torch":
            import torch  # a dtype (torch.float32, ...) is allowed; only torch can tell one

            if isinstance(getattr(torch, name, None), torch.dtype):
                return getattr(torch, name)
        raise pickle.UnpicklingError(f"Unsupported global: GLOBAL {module}.{name} was not an allowed global")
