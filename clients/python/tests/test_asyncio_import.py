"""fencer.asyncio imports on a redis-py with redis.asyncio's cancellation
fixes, and refuses to on an older one (Debian 12's 4.3.4) with a message
that says what to do. Runs under every redis-py: the other test_async_*
files need one it imports on."""

from __future__ import annotations

import importlib
import sys

import pytest
import redis

from fencer._conn import redis_version


def fresh_import():
    for m in [m for m in sys.modules if m == "fencer.asyncio" or m.startswith("fencer.asyncio.")]:
        del sys.modules[m]
    return importlib.import_module("fencer.asyncio")


def test_imports_or_refuses_by_the_installed_redis_py():
    if redis_version() < (5, 0, 1):  # Debian's redis-py: refused
        with pytest.raises(ImportError, match="fencer.asyncio needs redis-py"):
            fresh_import()
        return
    fa = fresh_import()
    assert fa.Client and fa.Lock


def test_import_is_refused_on_an_old_redis_py(monkeypatch):
    monkeypatch.setattr(redis, "__version__", "4.3.4")
    with pytest.raises(ImportError) as e:
        fresh_import()
    assert "needs redis-py 5.0.1 or later, found 4.3.4" in str(e.value)
    assert "fencer[asyncio]" in str(e.value)

