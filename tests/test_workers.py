"""WorkerPool (server/workers.py) on its own: few threads for a stream of fast jobs, the idle
worker that slept last woken first, the watcher asleep once jobs stop, and shutdown.

The fairness of the pool (each key's share, turns, a slow call not holding another client's)
is tested with the hostile clients, tests/reliability/test_hostile_transport.py. No test here
asserts a timing: the bounds are generous, so a slow machine passes and a wrong pool does not.
"""

from __future__ import annotations

import collections
import threading

from mcpkit.server.workers import WorkerPool

STEP = 10.0  # bound on one wait: generous, never a performance assertion


def _wait_for(cond, timeout: float = STEP) -> bool:
    for _ in range(int(timeout / 0.01)):
        if cond():
            return True
        threading.Event().wait(0.01)
    return cond()


def _sleeping(pool: WorkerPool, n: int) -> bool:
    with pool._lock:
        return len(pool._sleepers) == n


def test_a_stream_of_fast_jobs_runs_on_a_few_threads():
    # Like the HTTP transport under 32 keep-alive clients: one thread submits bursts of fast calls
    # of one session and waits for their answers. Each burst is more jobs than idle workers: a
    # pool that started a worker for each job no idle one was free for would grow to its cap.
    pool = WorkerPool(32, max_per_key=8)
    done = threading.Semaphore(0)
    threads: set[int] = set()

    def job() -> None:
        threads.add(threading.get_ident())

    for _ in range(300):
        for _ in range(8):
            pool.submit(job, lambda r, e: done.release(), "session")
        for _ in range(8):
            assert done.acquire(timeout=STEP)
    assert pool._workers <= 4, f"{pool._workers} workers for a stream of fast jobs"
    assert len(threads) <= 4
    pool.shutdown()


def test_the_idle_worker_that_slept_last_is_woken_first():
    # Calls one at a time find every worker idle: the same one takes them all (its stack and
    # caches are warm) and the others sleep on, instead of each being woken in turn.
    pool = WorkerPool(4, max_per_key=4)
    hold = threading.Event()
    started = threading.Semaphore(0)
    for _ in range(4):
        pool.submit(lambda: (started.release(), hold.wait(STEP)), lambda r, e: None, None)
    for _ in range(4):
        assert started.acquire(timeout=STEP)  # four workers, each in a job of its own
    hold.set()
    assert _wait_for(lambda: _sleeping(pool, 4))
    ran: list[int] = []
    finished = threading.Semaphore(0)
    for _ in range(40):
        pool.submit(lambda: ran.append(threading.get_ident()), lambda r, e: finished.release(), "k")
        assert finished.acquire(timeout=STEP)
    (_, most), = collections.Counter(ran).most_common(1)
    assert most >= 36, collections.Counter(ran)  # a stall of the machine may let another in, rarely
    pool.shutdown()


def test_the_watcher_goes_to_sleep_when_jobs_stop_and_wakes_for_the_next():
    pool = WorkerPool(4, max_per_key=2, spare_after=0.002)
    release = threading.Event()
    ran = threading.Event()
    pool.submit(lambda: release.wait(STEP), lambda r, e: None, "slow")
    pool.submit(ran.set, lambda r, e: None, "fast")  # a worker is busy: the watcher is called
    assert ran.wait(STEP)
    release.set()
    assert _wait_for(lambda: not pool._watching), "the watcher still polls with no job coming"
    # asleep, it is woken again by the next job that waits for a busy worker
    release.clear()
    ran.clear()
    pool.submit(lambda: release.wait(STEP), lambda r, e: None, "slow")
    pool.submit(ran.set, lambda r, e: None, "fast")
    try:
        assert ran.wait(STEP), "the second fast job waited behind the slow one"
    finally:
        release.set()
    pool.shutdown()


def test_shutdown_ends_the_idle_workers_and_the_watcher():
    pool = WorkerPool(4, "shutdown-probe", max_per_key=2)
    finished = threading.Semaphore(0)
    for n in range(6):
        pool.submit(lambda: threading.Event().wait(0.01), lambda r, e: finished.release(), n % 3)
    for _ in range(6):
        assert finished.acquire(timeout=STEP)
    assert any(t.name == "shutdown-probe-watcher" for t in threading.enumerate())
    pool.shutdown()
    assert _wait_for(lambda: pool._workers == 0)
    assert _wait_for(lambda: not any(t.name.startswith("shutdown-probe") for t in threading.enumerate()))
    try:
        pool.submit(lambda: None, lambda r, e: None)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a shut-down pool took a job")
