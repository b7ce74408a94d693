"""The house: the book at picogpt/'s root imports nothing from the machinery (cli, files, web),
and no module imports itself back through others. Read from the source, not by importing."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "picogpt"
MACHINERY = ("picogpt.cli", "picogpt.data", "picogpt.files", "picogpt.web")
# The doors: __init__.py is the package's front (it exports the loaders) and __main__.py runs
# the picogpt command; `python -m picogpt.train` runs picogpt.cli.train as a program (runpy).
DOORS = {("picogpt/__init__.py", None), ("picogpt/__main__.py", None)}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(module imported, the function or __main__ block it is in, line) for every import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(
        ".")[0]
    found = []

    def visit(node, where):
        for child in ast.iter_child_nodes(node):
            inside = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inside = where or child.name
            if isinstance(child, ast.If) and "__main__" in ast.unparse(child.test):
                inside = "__main__"
            if isinstance(child, ast.ImportFrom):
                base = package.split(".")
                base = base[: len(base) - child.level + 1] if child.level else []
                target = ".".join([*base, *([child.module] if child.module else [])])
                for alias in child.names:  # `from . import gate` imports the module gate
                    found.append((f"{target}.{alias.name}" if not child.module else target,
                                  inside, child.lineno))
            elif isinstance(child, ast.Import):
                found.extend((alias.name, inside, child.lineno) for alias in child.names)
            visit(child, inside)

    visit(tree, None)
    return found


BOOK = sorted(PACKAGE.glob("*.py"))


def test_the_root_holds_the_book_and_at_most_22_modules():
    assert len(BOOK) <= 22, [path.name for path in BOOK]
    rooms = [path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()]
    assert {"cli", "files", "web"} <= set(rooms)


@pytest.mark.parametrize("path", BOOK, ids=lambda path: path.name)
def test_the_book_imports_nothing_from_the_machinery(path):
    name = f"picogpt/{path.name}"
    leaks = [(target, where, line) for target, where, line in imports(path)
             if target.startswith(MACHINERY) and (name, where) not in DOORS
             and (name, None) not in DOORS]
    assert not leaks, f"{name} imports the machinery: {leaks}"


def test_no_module_reaches_itself_through_its_imports():
    """Module-level imports between picogpt's modules form no circle (a function's own import,
    made when it runs, is left out: it is how a command reaches a room it needs late)."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        graph[module_name(path)] = {target for target, where, _ in imports(path)
                                    if where is None and target.startswith("picogpt.")}
    known = set(graph)

    def resolve(target):  # `from picogpt.web import show` names a module inside a package
        while target not in known and "." in target:
            target = target.rpartition(".")[0]
        return target

    graph = {name: {resolve(t) for t in targets} - {name} for name, targets in graph.items()}
    for name in graph:  # packages import their own rooms: picogpt.cli -> picogpt.cli.run
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}

    def reaches(start):
        seen, todo = set(), [start]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target not in seen and not start.startswith(target + "."):
                    seen.add(target)
                    todo.append(target)
        return seen

    circles = [name for name in graph if name in reaches(name)]
    assert not circles, circles
