r"""End a launched rank with the status the package means, every time: :func:`exit_run`.

Why not simply ``raise SystemExit(status)``: a rank of ``composer -n N train.py`` has torch.distributed's gloo process
group alive, and its worker threads (C++ ``std::thread``\ s, one queue per process group) can need Python's GIL at any
moment: a collective's ``AsyncWork`` is dropped by the worker thread *after* the caller has been woken
(``ProcessGroupGloo::runLoop`` resets ``workInProgress_`` once the work is marked done), and when that drop releases
the last reference to a tensor whose Python object the C++ side owns (the caller let go of it first), the tensor's
destructor decrefs the Python object under ``pybind11::gil_scoped_acquire`` (torch's ``PyInterpreter`` ``decref``,
after a ``Py_IsInitialized()`` check). If that thread is still waiting for the GIL when the interpreter enters
finalisation (``Py_FinalizeEx`` after the ``atexit`` handlers: ``_PyRuntimeState_SetFinalizing``), CPython 3.11's
``take_gil`` ends the thread with ``pthread_exit``. ``pthread_exit`` unwinds the C++ stack (a forced unwind), the
unwind meets the tensor's destructor, which is ``noexcept``, and the C++ runtime calls ``std::terminate``:
``terminate called without an active exception``, SIGABRT, exit -6, and the launcher kills the other ranks. It takes
a worker thread that is late (a loaded machine) right after a collective, which is exactly what a finished run's
relaunch does: ``checkpoint_guard`` raises ``SystemExit`` right after the checkpoint load's collectives. Rare (one
failed relaunch in four CI runs of the suite), and reproduced every time by ``tests/resume/test_clean_exit.py``,
which holds the GIL in the last ``atexit`` handlers until a gloo worker has dropped a tensor and waits for it.

The same worker, in ``~AsyncBroadcastWork``'s ``gil_scoped_acquire``, deadlocks ``destroy_process_group()`` (its
destructor joins the workers while holding the GIL; seen with py-spy, ``tests/support/multirank.py``
``write_sharded_checkpoint``; pytorch/pytorch#56297, fixed after torch 2.7), so tearing the group down first is no cure.

The cure is to never finalise the interpreter on such a rank: :func:`exit_run` raises ``SystemExit`` as before (so
``finally`` blocks, ``with`` exits and Composer's own handlers run, and a caller in the same process sees the same
exception), and registers one more ``atexit`` handler. Registered last, it runs first at exit, after
``threading``'s non-daemon threads were joined; it runs every other handler (Composer's ``Engine.close``, the
checkpoint guard's folder release, ``logging.shutdown``, ...) in the interpreter's order, flushes stdout and stderr,
and ends the process with ``os._exit(status)``: the exit status intended, and no finalisation for a C++ thread to
trip over.

Only a launched rank (``MASTER_ADDR`` and ``RANK`` in the environment, as ``composer``, ``torchrun`` and the like
set them) does that: a test or a notebook that catches the ``SystemExit`` goes on, and its process ends its own way.

Every early exit of the package ends this way: ``checkpoint_guard``'s finished run (0) and refused folder (2),
``spike_guard``'s refusals (2) and stop, and :func:`foundry_ext.config.errors.stop_run` (2: the pre-flight, the
scheduler's first call, ``torch_lr_scheduler``, the plateau's checks at ``FIT_START``), which raises its own
``RunStopped`` after :func:`end_with_at_exit`. Hence this module sits at the package's floor, importing nothing of it.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

__all__ = ["end_with_at_exit", "exit_run", "launched"]

_status: list[int] = []  # the status of the pending os._exit; empty until exit_run registers it


def launched() -> bool:
    """Whether this process is a rank started by a distributed launcher (``composer -n N``, ``torchrun``)."""
    return "MASTER_ADDR" in os.environ and "RANK" in os.environ


def exit_run(status: int) -> NoReturn:
    """Raise ``SystemExit(status)``; on a launched rank, also make sure the process ends with ``status``.

    Args:
        status (int): The exit status: 0 for a run that has nothing left to do, 2 for a refused input.

    Raises:
        SystemExit: Always, with ``status``.
    """
    end_with_at_exit(status)
    raise SystemExit(status)


def end_with_at_exit(status: int) -> None:
    """On a launched rank, end the process with ``status`` by ``os._exit`` after the exit handlers; else nothing.

    For code that raises its own ``SystemExit`` subclass (:func:`foundry_ext.config.errors.stop_run` raises
    ``RunStopped``, also a ``ConfigError``): call this, then raise. Called again (a ``SystemExit`` caught and the run
    went on), the last status counts.
    """
    if not launched():
        return
    if not _status:
        atexit.register(_exit_now)
        _status.append(status)
    else:
        _status[0] = status


def _exit_now() -> None:
    """The first ``atexit`` handler to run: run the others, flush, ``os._exit`` before finalisation (see above)."""
    atexit.unregister(_exit_now)
    try:
        atexit._run_exitfuncs()  # the remaining handlers, last registered first, errors printed as at a normal exit
    finally:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:  # a closed or broken stream: nothing more can be written there anyway
                pass
        os._exit(_status[0])
