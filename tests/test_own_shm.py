"""tests/support/own_shm: each pytest-xdist worker (and each node of tests/resume/test_two_nodes.py) names its
StreamingDatasets' shared memory as on a host of its own.

mosaicml-streaming picks a prefix by scanning ``/dev/shm`` *and* the temporary folder (its filelocks,
``<tempfile.gettempdir()>/000000_barrier_filelock``) for the first free one. Checked with streaming's own scan
(``streaming.base.shared.prefix._check_and_find``): a prefix taken in one namespace, by a shared-memory name or by a
filelock, is free in another, and neither is left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.launcher import REPO

OWN_SHM = REPO / "tests" / "support" / "own_shm"

# In the namespace: take prefix 0 by a filelock and prefix 1 by a shared-memory name, as a SIGKILLed run leaves them
# (the run's ranks each scan; here one scan after each), and report what streaming's scan finds.
TAKE = """
import json, os, tempfile
from streaming.base.shared.prefix import _check_and_find, _pack_locals
tmp = tempfile.gettempdir()
found = [_check_and_find(["/data"], [None], "locals")]
open(os.path.join(tmp, "000000_barrier_filelock"), "w").close()
found.append(_check_and_find(["/data"], [None], "locals"))
with open("/dev/shm/000001_locals", "wb") as f:  # POSIX shared memory is a file there: another run's locals
    f.write(_pack_locals(["/other"], 1))
found.append(_check_and_find(["/data"], [None], "locals"))
print(json.dumps({"tmp": tmp, "shm": sorted(os.listdir("/dev/shm")), "found": found}))
"""


def _in_own_shm(code: str) -> dict:
    done = subprocess.run([str(OWN_SHM), sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no mount namespace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_each_namespace_has_its_own_dev_shm_and_temporary_folder_for_streamings_prefixes() -> None:
    first = _in_own_shm(TAKE)
    assert first["tmp"] == "/dev/shm/tmp" and first["shm"] == ["000001_locals", "tmp"]
    assert first["found"] == [0, 1, 2]  # free, then skipped for the filelock, then for the name
    second = _in_own_shm(TAKE)  # another worker (or a later one): none of the first one's names, so prefix 0 again
    assert second == first
