"""The threads a training run uses (cli/threads.py, fasttrain.workers): the count whose step
was fastest at start, --threads over it, OPENBLAS_NUM_THREADS kept when the user set it, said
in the run's first line, and applied to OpenBLAS's pool and fasttrain's alike."""

from types import SimpleNamespace

import pytest
from test_openai import assert_one_line_error, picogpt
from threadpoolctl import threadpool_limits

from picogpt import fasttrain
from picogpt import train as train_module
from picogpt.cli import threads
from picogpt.cli.train import main

TINY = ["--task", "induction", "--n_embd", "16", "--n_ctx", "16", "--n_batch", "4", "--steps",
        "2", "--curve_every", "2", "--warmup", "1", "--block_max", "6", "--lead_in_from", "6",
        "--lead_in_max", "4"]


def test_the_count_whose_step_took_least_is_kept_and_the_pool_is_sized_during_each_step():
    """A step that costs (by a clock the test keeps) 5 s on 1 thread, 2 on 2 and 3 on 4 is
    timed at each count with the BLAS pool of that size: 2 wins, and the medians are said."""
    cost, spent = {1: 5.0, 2: 2.0, 4: 3.0}, [0.0]

    def step(batch, params):  # costs what its pool's size costs
        spent[0] += cost[fasttrain.blas_threads()]

    count, seconds = threads.fastest(step, None, {}, [1, 2, 4], rounds=3,
                                     clock=lambda: spent[0])
    assert count == 2 and seconds == cost


def test_the_element_wise_pool_follows_the_blas_pool():
    """fasttrain shares the logits among as many threads as OpenBLAS runs on: one when the
    pool is one thread, and never more than the cores."""
    with threadpool_limits(1, user_api="blas"):
        assert fasttrain.workers() == 1
    with threadpool_limits(64, user_api="blas"):
        assert fasttrain.workers() == fasttrain.cores()


def test_counts_timed_are_one_and_powers_of_two_up_to_the_cores():
    assert threads.candidates(1) == [1]
    assert threads.candidates(2) == [1, 2]
    assert threads.candidates(6) == [1, 2, 4, 6]


def first_line(done) -> str:
    """The run's first line on stderr (the bar's carriage returns split lines too)."""
    return done.stderr.replace("\r", "\n").strip().splitlines()[0]


@pytest.mark.parametrize("given, env, count, said", [
    (1, {}, 1, "training with --threads 1, as given."),
    (1, {"OPENBLAS_NUM_THREADS": "2"}, 1, "training with --threads 1, as given."),
    (None, {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"}, 1,
     "training with --threads 1, as OPENBLAS_NUM_THREADS=1 sets; --threads N chooses another "
     "count."),
    (None, {"OMP_NUM_THREADS": "3"}, 3, "training with --threads 3, as OMP_NUM_THREADS=3 sets"),
])
def test_the_flag_then_the_environment_choose_without_timing(given, env, count, said,
                                                            monkeypatch):
    """--threads first, then an OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS) the user set: no
    step is timed, and the line says which chose."""
    for name in threads.SET_BY_USER:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def untimed(*args):
        raise AssertionError("a step was timed")

    plan = SimpleNamespace(loss_and_grads=untimed, params={})
    chosen, line = threads.choose(given, plan, None)
    assert chosen == count and line.startswith(said)


def test_without_either_the_fastest_count_is_measured(tmp_path, monkeypatch):
    """Two cores: the run times its step at 1 and 2 threads and says both."""
    for name in threads.SET_BY_USER:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(threads, "cores", lambda: 2)
    done = picogpt(*TINY, "--models_dir", str(tmp_path), entry=main)
    assert done.returncode == 0, done.stderr
    line = first_line(done)
    assert "the fastest when a step was timed at start (a step took " in line
    assert " s with 1, " in line and " s with 2)" in line


def test_resume_takes_threads(tmp_path, monkeypatch):
    """A stopped run goes on with --resume --threads 1 (the process's, not the run's
    settings: run.json does not hold it) and says so first."""
    real, calls = train_module.loss_and_grads, []

    def interrupted(*args):  # Ctrl-C in step 1, after step 0's measurement and checkpoint
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(train_module, "loss_and_grads", interrupted)
    where = ["--name", "a", "--models_dir", str(tmp_path)]
    assert picogpt(*TINY, *where, "--threads", "2", entry=main).returncode == 130
    monkeypatch.undo()
    resumed = picogpt("--resume", *where, "--threads", "1", entry=main)
    assert resumed.returncode == 0, resumed.stderr
    assert first_line(resumed) == "picogpt: training with --threads 1, as given."


def test_threads_zero_is_refused_before_any_work(tmp_path):
    done = picogpt(*TINY, "--threads", "0", "--models_dir", str(tmp_path / "m"), entry=main)
    assert_one_line_error(done, "threads=0 is not a whole number from 1 up")
    assert not (tmp_path / "m").exists()
