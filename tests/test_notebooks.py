"""The walk-through notebooks (docs/walkthrough.ipynb and its Chinese twin) run from a fresh
kernel, as a learner runs them, and print what the model gives."""

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient


@pytest.mark.parametrize("notebook", ["docs/walkthrough.ipynb", "docs/zh/walkthrough.ipynb"])
def test_the_walkthrough_runs_in_a_fresh_kernel(notebook):
    book = nbformat.read(ROOT / notebook, as_version=4)
    assert all(not cell.get("outputs") for cell in book.cells if cell.cell_type == "code")
    NotebookClient(book, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str((ROOT / notebook).parent)}}).execute()
    outputs = [output for cell in book.cells if cell.cell_type == "code"
               for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert "split_heads (4, 5, 16)" in text and "gpt2 (5, 50257)" in text  # each shape printed
    assert "Alan Turing theorized that" in text and "\nTrue\n" in text  # generate, trace
    html = [output.data["text/html"] for output in outputs if "text/html" in output.get("data", {})]
    assert len(html) == 1 and "<iframe srcdoc=" in html[0] and "Views.attention" in html[0]
