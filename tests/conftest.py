"""Shared pytest configuration: share the cores between pytest-xdist workers,
start the long tests first, and say plainly which optional tests a run
skipped."""

import importlib.util
import os


def _share_the_cores_between_workers():
    """Under pytest-xdist, give each worker its share of the cores (torch's
    intra-op threads and the BLAS threads of numpy and scikit-learn), unless
    the run sets a thread count itself: two workers of two threads each on
    two cores spend a quarter of the suite's time waiting for each other."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None or "OMP_NUM_THREADS" in os.environ:
        return
    import torch
    from threadpoolctl import threadpool_limits

    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)
    threads = max(1, cores // int(workers))
    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)
    # and the processes the tests start (silos, ranks, fresh fits) inherit it
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)


_share_the_cores_between_workers()


#: Modules with tests that run for tens of seconds (fresh processes, Flower,
#: torch.distributed ranks): collected first, so that pytest-xdist starts
#: them first and the other workers' short tests fill the time beside them.
_LONG_MODULES = ("test_reproducibility.py", "test_federated.py", "test_distributed.py")


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.path.name not in _LONG_MODULES)  # stable


def pytest_terminal_summary(terminalreporter):
    if importlib.util.find_spec("flwr") is None:
        terminalreporter.write_line(
            "skdp: the Flower engine tests were skipped (no flwr); run them with the "
            "federated extra: pip install -e \".[test,federated]\"")
