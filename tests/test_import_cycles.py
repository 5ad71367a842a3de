"""No import cycles inside src/: every import counts, at module level or inside a function
(a lazy import is still a dependency; a cycle through one is the same knot, only later), and so
does a registry-driven ``importlib.import_module(f"<package>.{name}")``, read as an import of
every module of that package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[1] / "src"


def dynamic_prefix(node: ast.AST, package: str) -> str | None:
    """The module name, or the prefix of module names, an ``import_module`` call with a string or
    f-string argument can import (``{__package__}`` read as the caller's package); None for any
    other node."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and node.args
    ):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if not isinstance(arg, ast.JoinedStr):
        return None
    prefix = ""
    for part in arg.values:
        if isinstance(part, ast.Constant):
            prefix += part.value
        elif isinstance(part.value, ast.Name) and part.value.id == "__package__":
            prefix += package
        else:
            break
    return prefix or None


def module_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of ``root`` it imports anywhere in its source."""
    files = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            elif (prefix := dynamic_prefix(node, package)) is not None:
                targets = [m for m in files if m == prefix or m.startswith(prefix)]
            else:
                continue
            for target in targets:
                # the deepest module of root the name is, or is inside
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_src_has_no_import_cycle():
    assert cycles(module_graph(SRC)) == []


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    """The check can fail: a package whose module imports another inside a function, which
    imports it back, is reported; so is a relative import's cycle across subpackages."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    (package / "c.py").write_text("import pkg.a\n")
    assert cycles(module_graph(tmp_path)) == [["pkg.a", "pkg.sub.b"]]


def test_a_cycle_through_a_registry_driven_import_is_found(tmp_path):
    """import_module(f"pkg.plugins.{name}") depends on every module of pkg.plugins: one that
    imports the caller back closes a cycle; {__package__} is the caller's package."""
    package = tmp_path / "pkg"
    (package / "plugins").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugins" / "__init__.py").write_text("")
    (package / "engine.py").write_text(
        "import importlib\n\ndef load(name):\n"
        "    return importlib.import_module(f'pkg.plugins.{name}')\n"
    )
    (package / "plugins" / "one.py").write_text("from ..engine import load\n")
    (package / "plugins" / "two.py").write_text("X = 1\n")
    (package / "plugins" / "runner.py").write_text(
        "import importlib\n\ndef run(name):\n"
        "    return importlib.import_module(f'{__package__}.{name}')\n"
    )
    (package / "plugins" / "three.py").write_text("from .runner import run\n")
    # engine reaches runner (a plugin) and runner reaches one, which imports engine: one knot
    assert cycles(module_graph(tmp_path)) == [
        ["pkg.engine", "pkg.plugins.one", "pkg.plugins.runner", "pkg.plugins.three"]
    ]
    (package / "plugins" / "one.py").write_text("X = 1\n")
    assert cycles(module_graph(tmp_path)) == [["pkg.plugins.runner", "pkg.plugins.three"]]
