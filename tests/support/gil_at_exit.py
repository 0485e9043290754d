"""A rank of a 2-rank gloo job whose rank 1 exits while a gloo worker thread needs the GIL (test_clean_exit.py).

``python gil_at_exit.py`` with ``RANK`` (0 or 1), ``MASTER_ADDR``, ``MASTER_PORT``, ``GO_FILE`` (a path that does not
exist yet) and ``EXIT``: ``raise`` (``sys.exit(0)``), ``exit_run`` (``foundry_ext._exit.exit_run(0)``),
``raise_stopped`` (``raise RunStopped(...)``, status 2, as the package raised it before) or ``stop_run``
(``foundry_ext.config.errors.stop_run``: its line on rank 0 only, status 2).

Rank 1 queues an async broadcast (a gloo worker thread runs it, waiting for rank 0), lets go of the tensor and the work
(the worker now holds the tensor's last reference, hence its Python object), and exits. Its first exit handler creates
``GO_FILE``; its last two are C calls through ``ctypes.PyDLL``, which keeps the GIL while the C function runs: a
``read`` of a FIFO that blocks until rank 0 writes to it, then ``sleep(HOLD_SECONDS)``. Rank 0 waits for ``GO_FILE``,
joins the broadcast, and only then writes to the FIFO. So the worker thread finishes, drops the tensor and waits for
the GIL to decref its Python object while rank 1's main thread holds the GIL, whatever the machine's load: nothing
here races on time (an earlier version held the GIL for a fixed ``sum`` over a range, and a loaded CI machine once let
it end before rank 0 joined). When ``sleep`` returns, the interpreter goes straight into finalisation, and the waiting
thread is ended with ``pthread_exit`` inside the tensor's ``noexcept`` destructor: ``terminate called without an
active exception``. This is the abort of a finished run's relaunch, made to happen every time instead of once in many
runs (the real one needs a worker thread that is late after a checkpoint load's collective).
"""

import atexit
import ctypes
import os
import sys
import time

HOLD_SECONDS = 2  # for the worker thread to receive rank 0's data and reach the GIL; it needs milliseconds
GO = os.environ["GO_FILE"]
JOINED = GO + ".joined"  # the FIFO rank 0 writes to once its broadcast has returned
rank = int(os.environ["RANK"])

if rank == 1:
    # Registered before anything else (torch registers handlers at import), so they run last, in this order: read,
    # then sleep (handlers run last registered first). PyDLL calls keep the GIL: no bytecode runs between them.
    libc = ctypes.PyDLL(None)
    os.mkfifo(JOINED)
    fifo = os.open(JOINED, os.O_RDWR)  # RDWR: does not block waiting for a writer, as O_RDONLY would
    atexit.register(libc.sleep, HOLD_SECONDS)
    atexit.register(libc.read, fifo, ctypes.create_string_buffer(1), 1)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", rank=rank, world_size=2)
if rank == 0:
    while not os.path.exists(GO):
        time.sleep(0.001)
    dist.broadcast(torch.ones(4), src=0)
    with open(JOINED, "wb") as joined:  # rank 1's main thread is blocked in `read`, holding the GIL
        joined.write(b"j")
    time.sleep(HOLD_SECONDS + 20)  # rank 1 must not see its peer vanish first; the test kills this rank
    os._exit(0)

tensor = torch.zeros(4)
work = dist.broadcast(tensor, src=0, async_op=True)  # queued to a gloo worker thread, which waits for rank 0
del tensor, work  # the worker thread now holds the last reference
atexit.register(lambda: open(GO, "w").close())  # runs first: rank 0 joins while the GIL is held by `read`
print("rank 1: exiting", flush=True)
how = os.environ["EXIT"]
if how == "exit_run":
    from foundry_ext._exit import exit_run

    exit_run(0)
if how in ("stop_run", "raise_stopped"):
    from foundry_ext.config.errors import Problem, RunStopped, stop_run

    problem = Problem("scheduler.t_max", "refused at the first call")
    if how == "stop_run":
        stop_run([problem])
    raise RunStopped([problem])
sys.exit(0)
