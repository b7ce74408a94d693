"""The walk-through notebooks (docs/walkthrough.ipynb and its Chinese twin) run from a fresh
kernel, as a learner runs them, print what the model gives, and are saved with those outputs:
a fresh run prints exactly the text that is saved (scripts.fixtures.notebooks says which parts
compare: all text; pictures and pages by their type only)."""

import nbformat
import pytest
from conftest import ROOT

from scripts.fixtures.notebooks import NOTEBOOKS, comparable, run


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_walkthrough_runs_in_a_fresh_kernel_and_prints_what_is_saved(notebook, tmp_path):
    saved = nbformat.read(ROOT / notebook, as_version=4)
    code = [cell for cell in saved.cells if cell.cell_type == "code"]
    assert all(cell.outputs for cell in code), "a cell was saved without its output"
    book = run(ROOT / notebook, tmp_path)  # an empty folder: the offline model, as in CI
    outputs = [output for cell in book.cells if cell.cell_type == "code"
               for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert "split_heads (4, 5, 16)" in text and "gpt2 (5, 50257)" in text  # each shape printed
    assert "Alan Turing theorized that" in text and "\nTrue\n" in text  # generate, trace
    html = [output.data["text/html"] for output in outputs if "text/html" in output.get("data", {})]
    assert len(html) == 1 and "<iframe srcdoc=" in html[0] and "Views.attention" in html[0]
    assert comparable(book) == comparable(saved), (
        f"{notebook}'s saved outputs differ from a fresh run; after changing the notebook or what "
        "it calls, save it again with: python -m scripts.fixtures.notebooks")
