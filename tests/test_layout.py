"""The house: the book (picogpt/'s root, train/, tasks/ and transformer/) imports nothing from
the machinery (cli, data, files, web), and no module imports itself back through others, not
even from inside a function. Read from the source, not by importing."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "picogpt"
MACHINERY = ("picogpt.cli", "picogpt.data", "picogpt.files", "picogpt.web")
# The doors: __init__.py is the package's front (it exports the loaders), and each __main__.py
# runs a command: picogpt/__main__.py the picogpt command, picogpt/train/__main__.py the training
# command (python -m picogpt.train), picogpt/data/__main__.py the corpus command. A door is a
# file of its own, so no module of the book reaches the command line through it.
DOORS = {("picogpt/__init__.py", None), ("picogpt/__main__.py", None),
         ("picogpt/train/__main__.py", None), ("picogpt/data/__main__.py", None)}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[str, str | None, int]]:
    """(module imported, the function or __main__ block it is in, line) for every import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
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


ROOT = sorted(PACKAGE.glob("*.py"))
BOOK = (ROOT + sorted((PACKAGE / "tasks").glob("*.py")) + [PACKAGE / "train" / "__init__.py"]
        + sorted((PACKAGE / "transformer").glob("*.py")))


def test_the_root_holds_the_book_and_at_most_25_modules():
    # 25 with the table of kinds (kinds.py), the optimizer (optim.py) and the params tree
    # (tree.py); the 2017 encoder-decoder's three modules are to move into its own package
    assert len(ROOT) <= 25, [path.name for path in ROOT]
    rooms = [path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()]
    assert {"cli", "files", "web", "tasks", "train"} <= set(rooms)


@pytest.mark.parametrize("path", BOOK, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_the_book_imports_nothing_from_the_machinery(path):
    name = str(path.relative_to(PACKAGE.parent))
    leaks = [(target, where, line) for target, where, line in imports(path)
             if target.startswith(MACHINERY) and (name, where) not in DOORS
             and (name, None) not in DOORS]
    assert not leaks, f"{name} imports the machinery: {leaks}"


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the picogpt modules it imports, at its top or inside any function. An import
    in an `if __name__ == "__main__"` block is left out: it runs only when the module is the
    program, and no module imports the program."""
    graph = {}
    for path in package.rglob("*.py"):
        graph[module_name(path, package)] = {target for target, where, _ in imports(path, package)
                                    if where != "__main__" and target.startswith("picogpt.")}
    known = set(graph)

    def resolve(target):  # `from picogpt.web import show` names a module inside a package
        while target not in known and "." in target:
            target = target.rpartition(".")[0]
        return target

    graph = {name: {resolve(t) for t in targets} - {name} for name, targets in graph.items()}
    for name in graph:  # packages import their own rooms: picogpt.cli -> picogpt.cli.generate
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[str]:
    """The modules that reach themselves through their imports."""
    def reaches(start):
        seen, todo = set(), [start]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target not in seen and not start.startswith(target + "."):
                    seen.add(target)
                    todo.append(target)
        return seen

    return [name for name in graph if name in reaches(name)]


def test_no_module_reaches_itself_through_its_imports():
    """No circle, function-level imports included (a late import hides a circle from Python,
    not from a reader)."""
    assert circles(import_graph(PACKAGE)) == []


def test_a_circle_through_a_functions_import_is_found(tmp_path):
    """The check is not blind to imports inside functions: a planted pair, a module importing
    another at its top and the other importing it back inside a function, is a circle."""
    planted = tmp_path / "picogpt"
    (planted / "files").mkdir(parents=True)
    (planted / "__init__.py").write_text("")
    (planted / "files" / "__init__.py").write_text("")
    (planted / "files" / "vocab.py").write_text("def read():\n    from .json_reader import x\n")
    (planted / "files" / "json_reader.py").write_text("from .vocab import read\nx = 1\n")
    (planted / "main.py").write_text('if __name__ == "__main__":\n    from .files import vocab\n')
    assert sorted(circles(import_graph(planted))) == ["picogpt.files.json_reader",
                                                       "picogpt.files.vocab"]


# Where a model's kind may be decided: the table, and each kind's own modules (the 2017
# encoder-decoder's tied or separate tables are an option within its kind)
KIND_HOMES = ("picogpt/kinds.py", "picogpt/transformer", "picogpt/llama/")
# Where a Hugging Face config.json's model_type may be read: the Hugging Face loader, which reads
# it into a kind's hparams ({"model": "llama"} for llama, qwen2 and qwen3)
HF_LOADER = ("picogpt/files/hf.py", "picogpt/files/llama_hf.py", "picogpt/files/hub.py")
# Functions that decided a kind beside the table before it had the kind's row (a kind's own
# test, or what generate takes in n_head's place): a call to one is a second dispatch
OWN_DISPATCH = re.compile(r"\w+_kind|head_argument|llama_first|seq2seq_first")
TABLE_ASKS = {"kind_of", "hf_kind"}  # the table, and the Hugging Face loader's way to it


def kind_sniffs(path: Path, root: Path = PACKAGE) -> list[str]:
    """Where path reads hparams' "model" (hparams["model"], hparams.get("model")), or, in the
    machinery, tests a params tree for a key ("wte" in params), or, outside the Hugging Face
    loader, reads a config's "model_type" or calls a kind test of its own (llama_kind(...),
    head_argument(...)): deciding a model's kind."""
    machinery = module_name(path, root).startswith(MACHINERY)
    loader = str(path.relative_to(root.parent)) in HF_LOADER
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        key = (node.slice if isinstance(node, ast.Subscript) else node.args[0]
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "get" and node.args else None)
        called = (node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  else node.func.attr if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Attribute) else None)
        if not loader and isinstance(key, ast.Constant) and key.value == "model_type":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif not loader and called and OWN_DISPATCH.fullmatch(called) \
                and called not in TABLE_ASKS:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("hparams") \
                and isinstance(node.slice, ast.Constant) and node.slice.value == "model":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and ast.unparse(node.func.value).endswith("hparams") \
                and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "model":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif machinery and isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str) \
                and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops) \
                and ast.unparse(node.comparators[0]).endswith("params"):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", [path for path in sorted(PACKAGE.rglob("*.py"))
                                  if not str(path.relative_to(PACKAGE.parent)).startswith(
                                      KIND_HOMES)],
                         ids=lambda path: str(path.relative_to(PACKAGE)))
def test_only_the_table_of_kinds_decides_a_models_kind(path):
    name = str(path.relative_to(PACKAGE.parent))
    assert not kind_sniffs(path), f"{name} decides a model's kind itself: {kind_sniffs(path)}"


def test_a_sniff_of_the_kind_is_found(tmp_path):
    """The check above finds each way of deciding the kind outside the table."""
    folder = tmp_path / "picogpt" / "files"
    folder.mkdir(parents=True)
    for text in ('seq2seq = hparams.get("model") == "transformer"\n',
                 'if loaded.hparams["model"] != "llama":\n    pass\n',
                 'gpt = "wte" in self.params\n',
                 'if config.get("model_type") == "qwen2":\n    pass\n',
                 'engine = llama_kind(hparams)\n', 'n_head = head_argument(hparams)\n'):
        (folder / "sniff.py").write_text(text)
        assert kind_sniffs(folder / "sniff.py", tmp_path / "picogpt"), text
    (folder / "sniff.py").write_text('kind = kind_of(hparams)\nok = "top_k" in sampler\n'
                                     'heads = loaded.kind.runs_with(hparams)\n')
    assert not kind_sniffs(folder / "sniff.py", tmp_path / "picogpt")


@pytest.mark.parametrize("path", sorted((PACKAGE / "files").glob("*.py")),
                         ids=lambda path: str(path.relative_to(PACKAGE)))
def test_the_file_layer_imports_no_task(path):
    """files/ reads folders for every command; a task (tasks/) is one kind of training, above it."""
    leaks = [(target, line) for target, _where, line in imports(path)
             if target.startswith("picogpt.tasks")]
    assert not leaks, f"{path.name} imports a task: {leaks}"
