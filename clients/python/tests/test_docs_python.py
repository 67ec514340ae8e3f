"""docs/clients-python.md's examples, run as pasted: each ```python block is
a program, run by this interpreter against a real fencerd, redis-server and
PostgreSQL, with only the addresses replaced by the test's (127.0.0.1:7379
for fencer, localhost:6379 for Redis, the PostgreSQL DSN)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import PKG, ROOT
from fencer._conn import redis_version

DOC = os.path.join(ROOT, "docs", "clients-python.md")


def examples() -> list[tuple[int, str]]:
    """(line, code) of every ```python block of the doc."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```$", text, re.S | re.M):
        out.append((text[: m.start()].count("\n") + 1, m.group(1)))
    return out


def test_the_doc_has_examples():
    assert len(examples()) >= 8


@pytest.mark.parametrize("line,code", examples(), ids=[f"line{n}" for n, _ in examples()])
def test_example_runs(line, code, node, redis_server, postgres, tmp_path):
    # On a redis-py before 5.0.1 (Debian's), the documented outcome of an
    # asyncio example is the ImportError.
    needs_asyncio = "fencer.asyncio" in code
    db = postgres.new_database()
    code = code.replace("127.0.0.1:7379", node.addr)
    code = code.replace("localhost:6379", f"127.0.0.1:{redis_server.port}")
    code = code.replace("host=localhost dbname=app", postgres.dsn(db))
    path = tmp_path / f"example_line{line}.py"
    path.write_text(code)
    env = dict(os.environ)
    if os.environ.get("FENCER_INSTALLED") != "1":
        env["PYTHONPATH"] = PKG + os.pathsep + os.environ.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    if needs_asyncio and redis_version() < (5, 0, 1):
        assert r.returncode != 0 and "fencer.asyncio needs redis-py" in r.stderr, r.stderr
        return
    assert r.returncode == 0, f"docs/clients-python.md line {line}:\n{code}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.stdout.strip(), "the example printed nothing"
    print(f"--- docs/clients-python.md line {line}:\n{r.stdout}")
