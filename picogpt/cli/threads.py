"""How many threads a training run uses, chosen before its first step and said in its first line.

A training step's matrix products run on OpenBLAS's threads, and fasttrain.py shares the logits'
element-wise work among as many Python threads (`fasttrain.workers`). OpenBLAS starts one
thread per core, which is right on an idle machine. On a busy one its threads wait for each
other at every product: on two cores shared with other work, a couplet step took 0.55 s of CPU
on two threads against 0.1 s on one (issue 62; docs/performance.md, "Threads"). So the count is
chosen, in this order:

1. `--threads N`, as given;
2. OPENBLAS_NUM_THREADS or OMP_NUM_THREADS, when the user set one: OpenBLAS already sized its
   pool from it, and that size is kept;
3. otherwise measured: the run's own first batch through its own step, at one thread and at each
   power of two up to the cores this process may use, in turns; the fastest count is kept.

The count applies to both pools through threadpoolctl (which resizes a loaded OpenBLAS, MKL or
BLIS): cli/training.py holds the BLAS's pool to it for the run. The timed steps train nothing:
their gradients are dropped, and the batch they read is the run's first step's all the same.
"""

import dataclasses
import itertools
import os
import time

from threadpoolctl import threadpool_limits

from ..errors import _, whole_number
from ..fasttrain import blas_threads, cores
from ..tasks import Plan

SET_BY_USER = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")  # as OpenBLAS reads them, in order
ROUNDS = 2  # timed steps per count, in turns (after one untimed step: first allocations)


def candidates(n_cores: int) -> list[int]:
    """The counts worth timing on n_cores: 1, 2, 4 ... and n_cores itself."""
    counts = [2**i for i in range(n_cores.bit_length()) if 2**i < n_cores]
    return [*counts, n_cores] if n_cores > 1 else [1]


def fastest(step, batch, params: dict, counts: list[int], rounds: int = ROUNDS,
            clock=time.perf_counter) -> tuple[int, dict[int, float]]:
    """The count whose steps took least, and each count's seconds a step (the median of its
    rounds, so that one step slowed by other work does not decide)."""
    spent: dict[int, list[float]] = {count: [] for count in counts}
    with threadpool_limits(counts[0], user_api="blas"):  # one thread: cheapest when busy
        step(batch, params)  # untimed: the first step's allocations are not the count's
    for _round, count in itertools.product(range(rounds), counts):
        with threadpool_limits(count, user_api="blas"):
            start = clock()
            step(batch, params)
            spent[count].append(clock() - start)
    seconds = {count: sorted(times)[(len(times) - 1) // 2] for count, times in spent.items()}
    return min(counts, key=lambda count: seconds[count]), seconds


def choose(threads: int | None, plan: Plan, first_batch) -> tuple[int, str]:
    """The count for this run, and the line that says it and why."""
    if threads is not None:
        whole_number("threads", threads, 1, hint=_("1 is steadiest on a busy machine"))
        return threads, _("training with --threads {n}, as given.").format(n=threads)
    set_by_user = [name for name in SET_BY_USER if os.environ.get(name, "").strip()]
    if set_by_user:
        name = set_by_user[0]
        value = os.environ[name].strip()
        # OpenBLAS sized its pool from it when NumPy was imported; a value it could not read
        # leaves whatever pool it made
        count = int(value) if value.isdigit() and int(value) > 0 else blas_threads() or 1
        return count, _("training with --threads {n}, as {name}={value} sets; --threads N "
                        "chooses another count.").format(n=count, name=name, value=value)
    counts = candidates(cores())
    if len(counts) == 1:
        return 1, _("training with --threads 1: this process may use one core.")
    count, seconds = fastest(plan.loss_and_grads, first_batch, plan.params, counts)
    timed = _(", ").join(_("{seconds:.2f} s with {n}").format(n=n, seconds=s)
                         for n, s in seconds.items())
    return count, _("training with --threads {n}, the fastest when a step was timed at start "
                    "(a step took {timed}); --threads N chooses another count.").format(
                        n=count, timed=timed)


def chosen_threads(threads: int | None, plan: Plan) -> tuple[Plan, int, str]:
    """The count to train on, with the plan to train (its batches unchanged: the first, read
    for the timing, is put back in front) and the line that says the count."""
    first = next(plan.batches)
    count, line = choose(threads, plan, first)
    return dataclasses.replace(plan, batches=itertools.chain([first], plan.batches)), count, line
