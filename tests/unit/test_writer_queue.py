"""SQLite's writers in one process are served in arrival order (``adapter/store/writers.py``)."""

from __future__ import annotations

import threading
import time

from adapter.domain.errors import StoreUnavailable
from adapter.store.writers import WriterQueue


def test_waiting_writers_get_their_turn_in_the_order_they_came() -> None:
    queue = WriterQueue()
    served: list[int] = []
    queue.acquire()  # the lock is taken while the others line up
    threads = []
    for n in range(5):
        thread = threading.Thread(target=lambda n=n: (queue.acquire(), served.append(n), queue.release()))
        thread.start()
        threads.append(thread)
        time.sleep(0.05)  # each one is waiting before the next arrives
    queue.release()
    for thread in threads:
        thread.join(5)
    assert served == [0, 1, 2, 3, 4]


def test_a_greedy_writer_cannot_jump_the_queue() -> None:
    """The holder releasing and at once acquiring again goes behind the writer already waiting."""
    queue = WriterQueue()
    order: list[str] = []
    queue.acquire()
    waiter = threading.Thread(target=lambda: (queue.acquire(), order.append("waiter"), queue.release()))
    waiter.start()
    time.sleep(0.05)
    queue.release()
    queue.acquire()
    order.append("greedy")
    queue.release()
    waiter.join(5)
    assert order == ["waiter", "greedy"]


def _acquire_in_another_thread(queue: WriterQueue) -> str:
    outcome: list[str] = []

    def attempt() -> None:
        try:
            queue.acquire()
        except StoreUnavailable:
            outcome.append("timed out")
        else:
            outcome.append("acquired")
            queue.release()

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join(5)
    return outcome[0]


def test_the_same_thread_may_enter_again() -> None:
    queue = WriterQueue(timeout=0.2)
    queue.acquire()
    queue.acquire()
    queue.release()
    assert _acquire_in_another_thread(queue) == "timed out"  # still held once
    queue.release()
    assert _acquire_in_another_thread(queue) == "acquired"  # free again


def test_a_writer_that_waits_too_long_gets_store_unavailable_and_leaves_the_line() -> None:
    queue = WriterQueue(timeout=0.1)
    queue.acquire()
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            queue.acquire()
        except StoreUnavailable as exc:
            failed.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    thread.join(5)
    assert len(failed) == 1
    queue.release()
    later = threading.Thread(target=lambda: (queue.acquire(), queue.release()))
    later.start()
    later.join(1)
    assert not later.is_alive(), "a writer that gave up must not block those after it"
