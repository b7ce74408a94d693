"""The programs in scripts/: a benchmark figure is only kept if it measured what it names."""

import shutil
import sys

import pytest

from scripts.benchmarks.common import BenchmarkError, first_output_seconds, run_child
from scripts.benchmarks.speed import first_token_once


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
