"""Checks the fenced-store tests share (Go: internal/fencetest)."""

from __future__ import annotations

import random
import threading
import time

from fencer import StaleTokenError


def want_stale(exc_info, resource, token, highest):
    e = exc_info.value
    assert isinstance(e, StaleTokenError)
    assert (e.resource, e.token, e.highest) == (resource, token, highest)


def refusal(token, fn) -> bool:
    """Run fn; True if it was refused for a higher token."""
    try:
        fn()
    except StaleTokenError as e:
        assert e.token == token and e.highest > token, e
        return True
    return False


def writers(holders: int, writes: int, write) -> list[int]:
    """Holders with tokens 1..holders each write writes times at once;
    holder h starts 2(h-1) ms after the first, so each overlaps the next
    few, as a paused holder overlaps its successors. write(token, i)
    returns whether it was refused. Returns the refusals per token."""
    refused = [0] * (holders + 1)
    errors = []

    def run(h):
        time.sleep((h - 1) * 0.002)
        for i in range(writes):
            if random.randrange(3) == 0:
                time.sleep(random.random() / 1000)
            try:
                if write(h, i):
                    refused[h] += 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append((h, i, e))
                return

    threads = [threading.Thread(target=run, args=(h,)) for h in range(1, holders + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return refused


def check_history(refused, holders, writes, *landed):
    """In each landed history (tokens in landing order) a lower token never
    lands after a higher one; some write landed; the newest holder was never
    refused; every write landed or was refused."""
    total = 0
    for history in landed:
        for i in range(1, len(history)):
            assert history[i] >= history[i - 1], f"token {history[i]} landed after {history[i - 1]}"
        total += len(history)
    assert total > 0, "no write landed"
    assert refused[holders] == 0, f"the newest holder was refused {refused[holders]} times"
    assert total + sum(refused) == holders * writes
