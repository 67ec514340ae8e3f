"""The fencer package's modules import each other without a cycle: each
imports only modules below itself. Imports inside functions count too: a
cycle broken only by importing late still ties the modules together."""

from __future__ import annotations

import ast
import os

from conftest import PKG

PACKAGE = os.path.join(PKG, "fencer")


def module_name(path: str) -> str:
    rel = os.path.relpath(path, PKG)[: -len(".py")].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join(rel)


def local_imports(name: str, is_package: bool, source: str) -> set[str]:
    """The fencer modules that the module name imports, anywhere in it."""
    base = name.split(".") if is_package else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "fencer")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - node.level + 1]
                mod = ".".join(parent + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "fencer":
                continue
            if node.module is None:  # from . import x: x is a module
                out.update(f"{mod}.{a.name}" for a in node.names)
            else:
                out.add(mod)
    # A module's own packages are imported before it; they are not edges.
    return {m for m in out if not name.startswith(m + ".") and m != name}


def graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for dirpath, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                name = module_name(path)
                with open(path, encoding="utf-8") as fh:
                    g[name] = local_imports(name, f == "__init__.py", fh.read())
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                found.append(path[path.index(d) :] + [d])
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    return found


def test_cycle_check_finds_a_cycle():
    src = "from .b import x\n\ndef f():\n    from . import c\n"
    assert local_imports("fencer.a", False, src) == {"fencer.b", "fencer.c"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_cycle():
    g = graph()
    assert "fencer.client" in g["fencer"], "the imports of fencer/__init__.py were not found"
    assert cycles(g) == []


def test_the_package_under_test():
    """FENCER_INSTALLED=1 tests the copy pip installed, else the source tree's."""
    import fencer

    here = os.path.dirname(os.path.abspath(fencer.__file__))
    if os.environ.get("FENCER_INSTALLED") == "1":
        assert here != PACKAGE and "site-packages" in here, here
    else:
        assert here == PACKAGE, here
