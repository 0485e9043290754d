"""End what mosaicml-streaming leaves behind when a run in this process is over: threads, shared memory, lock files.

A run that stops before the end of an epoch (the LR range test's ramp, a benchmark's short run, a ``max_duration``
shorter than an epoch) leaves each of its ``StreamingDataset`` iterators mid-epoch: their download and ready threads
poll for the next sample for as long as the process lives. And streaming registers every ``/dev/shm`` block it
opens for cleanup with ``atexit``, which keeps it open until the process exits, run over or not: each dataset's six
blocks, plus the blocks of every prefix in use that ``get_shm_prefix`` opens to compare local folders when a
dataset starts (12 to 20 open files for a run with an eval set, more when ``/dev/shm`` holds stale prefixes). Under
the ``composer`` launcher the process ends there; a process that trains again (a notebook, a test session, a
benchmark) would collect the threads and the files run after run, until ``Too many open files``. And each
dataset's two lock files (``<tempfile.gettempdir()>/000007_barrier_filelock``, ``..._cache_filelock``) stay in the
temporary folder for good: streaming never removes them, and its scan for a free prefix skips every prefix whose lock
files exist, so a machine's ``/tmp`` collects them run after run (7,800 here) and every later dataset scans past them.
:func:`streaming_cleanup` ends all three for the runs started inside it, whether they finished or raised.

What it leaves: Composer registers each Engine's close with ``atexit`` too, holding the run's State (model,
optimizer, dataloaders) in memory until the process exits; that registration cannot be removed for one Trainer
alone (``atexit.unregister`` of Composer's static ``_close`` would drop every live Trainer's).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import weakref
from collections.abc import Iterator

__all__ = ["streaming_cleanup"]


@contextlib.contextmanager
def streaming_cleanup() -> Iterator[None]:
    """Run the block; then end its StreamingDatasets' threads, close their shared memory, remove their lock files.

    On leaving, normally or by an exception, every ``StreamingDataset`` created inside has its threads ended, and
    every streaming shared-memory block opened inside is closed (unlinked when this process created it). The
    datasets cannot be iterated again afterwards: use it around a whole run (``train(...)`` and the ``Trainer``'s
    ``close()``). ``_iterator.exit()`` and ``_executor`` are ``StreamingDataset``'s own (``exit()`` is what it calls
    itself when a new epoch starts before the last one ended); a block's ``cleanup`` is what its ``atexit`` entry
    would run at exit, and that entry is dropped. Another rank's process keeps its own mapping of a block this rank
    unlinks. The lock files are removed by the local leader, which registered the prefix; a rank still running locks
    a file of that name anew (``filelock`` creates it), so removing one early costs nothing but a file left behind.
    """
    try:
        from streaming import StreamingDataset
        from streaming.base.shared.memory import SharedMemory
    except ImportError:  # no mosaicml-streaming: nothing of its kind to end
        yield
        return
    kinds = (StreamingDataset, SharedMemory)

    def live() -> Iterator[object]:
        # type(), not isinstance(): isinstance reads __class__, which some objects (torch.distributed.reduce_op)
        # answer with a deprecation warning
        return (obj for obj in gc.get_objects() if issubclass(type(obj), kinds))

    before = weakref.WeakSet(live())
    try:
        yield
    finally:
        new = [obj for obj in live() if obj not in before]
        for dataset in (obj for obj in new if isinstance(obj, StreamingDataset)):
            # threads first: they read the blocks closed below
            iterator = getattr(dataset, "_iterator", None)
            if iterator is not None:
                iterator.exit()
            executor = getattr(dataset, "_executor", None)
            if executor is not None:
                executor.shutdown(wait=True)
            world = getattr(dataset, "_unique_rank_world", None)
            if world is not None and world.is_local_leader:  # its lock files: no thread of this process locks them now
                barrier = getattr(dataset, "_shared_barrier", None)
                for path in (getattr(barrier, "filelock_path", None), getattr(dataset, "_cache_filelock_path", None)):
                    if path:
                        with contextlib.suppress(OSError):
                            os.remove(path)
        for shm in (obj for obj in new if isinstance(obj, SharedMemory)):
            # BufferError: a numpy view of the block is still alive; streaming's atexit closes it then, as before
            with contextlib.suppress(BufferError, OSError):
                shm.cleanup()
                atexit.unregister(shm.cleanup)
