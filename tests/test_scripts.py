"""The programs in scripts/: a benchmark figure is only kept if it measured what it names."""

import re
import shutil
import sys
from pathlib import Path

import pytest

from scripts.benchmarks.common import BenchmarkError, first_output_seconds, run_child
from scripts.benchmarks.speed import first_token_once
from scripts.figures.common import source


def test_first_token_times_are_times_to_a_real_token_for_both_engines(tiny, tmp_path):
    """Each engine's process is started as the benchmark starts it and must print a token: the
    transformers child once unpacked five values into three names and crashed, and the figure
    was the time until its pipe closed."""
    work = tmp_path / "work"
    shutil.copytree(tiny.models_dir, work / "models")
    shutil.copy(tiny.reference, work / "reference.npz")
    assert run_child("scripts.benchmarks.speed", "--child", "save-hf", "transformers", "--work",
                     str(work)) == "saved"
    for engine in ("picogpt", "transformers"):
        assert 0 < first_token_once(engine, work) < 120


def test_a_child_that_fails_is_an_error_not_a_figure():
    with pytest.raises(BenchmarkError, match="wrote nothing to stdout:\nno model here"):
        first_output_seconds([sys.executable, "-c",
                              "import sys; print('no model here', file=sys.stderr); sys.exit(3)"])
    with pytest.raises(BenchmarkError, match=r"failed \(exit 1\)"):
        run_child("scripts.benchmarks.speed", "--child", "load", "picogpt", "--work",
                  "/no/such/folder", "--t0", "0")


def test_a_child_run_from_another_checkout_imports_that_checkouts_picogpt(tmp_path):
    """speed.py --before times another checkout by running its children from there: their
    `picogpt` must be that checkout's, not the one installed in the environment."""
    (tmp_path / "picogpt").mkdir()
    (tmp_path / "picogpt" / "__init__.py").write_text("")
    (tmp_path / "probe.py").write_text("import picogpt\nprint(picogpt.__file__)\n")
    assert run_child("probe", cwd=tmp_path) == str(tmp_path / "picogpt" / "__init__.py")
    assert first_output_seconds([sys.executable, "-m", "probe"], cwd=tmp_path) > 0


def test_every_picture_in_the_docs_exists_and_names_the_program_that_drew_it():
    """A learner who sees a picture can find how it was made: each image a doc shows exists,
    carries in its PNG "Source" text the command that wrote it, that command's program is in
    scripts/figures, and the doc names the program. No picture in docs/ is left unshown."""
    root = Path(__file__).parents[1]
    shown = set()
    for doc in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text):
            picture = (doc.parent / target).resolve()
            where = f"{doc.relative_to(root)} shows {target}"
            assert picture.is_file(), f"{where}, which does not exist"
            command = source(picture)
            assert command and command.startswith("python -m scripts.figures."), \
                f"{where}, whose Source is {command!r}"
            module = command.split()[2]
            assert (root / (module.replace(".", "/") + ".py")).is_file(), f"{where}: {command}"
            assert module in text, f"{where} but never names {module}"
            shown.add(picture)
    assert set((root / "docs").rglob("*.png")) - shown == set()


def test_every_name_a_script_imports_from_picogpt_exists():
    """Benchmarks import inside their functions, in children no test starts: after a name
    moved (reuse_freed_memory from cli.py to command.py), speed.py and sizes.py failed only
    when someone ran them. Every `from picogpt... import name` in scripts/ must resolve."""
    import ast
    import importlib

    root = Path(__file__).parents[1]
    for path in sorted((root / "scripts").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("picogpt"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name) or importlib.util.find_spec(
                        f"{node.module}.{alias.name}"), f"{path.name}: {node.module}.{alias.name}"
