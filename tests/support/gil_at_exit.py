"""A rank of a 2-rank gloo job whose rank 1 exits while a gloo worker thread needs the GIL (test_clean_exit.py).

``python gil_at_exit.py`` with ``RANK`` (0 or 1), ``MASTER_ADDR``, ``MASTER_PORT``, ``GO_FILE`` (a path that does not
exist yet) and ``EXIT``: ``raise`` (``sys.exit(0)``), ``exit_run`` (``foundry_ext._exit.exit_run(0)``),
``raise_stopped`` (``raise RunStopped(...)``, status 2, as the package raised it before) or ``stop_run``
(``foundry_ext.config.errors.stop_run``: its line on rank 0 only, status 2).

Rank 1 queues an async broadcast (a gloo worker thread runs it, waiting for rank 0), lets go of the tensor and the work
(the worker now holds the tensor's last reference, hence its Python object), and exits. Its last ``atexit`` handler is
a C call that holds the GIL without running bytecode (``sum`` over a range: the GIL is not handed over while it runs);
the handler before it creates ``GO_FILE``. Rank 0 waits for ``GO_FILE``, then joins the broadcast: the worker thread
finishes, drops the tensor, and waits for the GIL to decref its Python object while rank 1's main thread is in the C
call. When the call returns, the interpreter goes straight into finalisation, and the waiting thread is ended with
``pthread_exit`` inside the tensor's ``noexcept`` destructor: ``terminate called without an active exception``. This is
the abort of a finished run's relaunch, made to happen every time instead of once in many runs (the real one needs a
worker thread that is late after a checkpoint load's collective).
"""

import atexit
import os
import sys
import time

# Registered before anything else, so it runs last among the exit handlers (they run last registered first).
atexit.register(sum, range(int(os.environ.get("GIL_HOLD_ITEMS", "60000000"))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=2)
go = os.environ["GO_FILE"]
if rank == 0:
    while not os.path.exists(go):
        time.sleep(0.001)
    dist.broadcast(torch.ones(4), src=0)
    time.sleep(float(os.environ.get("RANK0_LINGER", "20")))  # rank 1 must not see its peer vanish first
    os._exit(0)

tensor = torch.zeros(4)
work = dist.broadcast(tensor, src=0, async_op=True)  # queued to a gloo worker thread, which waits for rank 0
del tensor, work  # the worker thread now holds the last reference
atexit.register(lambda: open(go, "w").close())  # runs first: rank 0 joins while the GIL is held by `sum`
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
