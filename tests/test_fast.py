"""The engine's in-place copies of the hot functions against model.py's, and the threads.

model.py's functions are the reference here because they are proven against independent ones
(the formulas, torch and transformers, in test_model.py); fast.py claims only to compute the same
numbers. Shapes are odd on purpose (lengths that fill no SIMD register evenly, batches). The
tolerances: the fast functions do the same float32 operations in the same order, so they may
differ only where NumPy's vectorised exp and tanh treat an array's tail apart from its body
(a few float32 ulps).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from picogpt import fast, model

ROOT = Path(__file__).resolve().parents[1]

RTOL, ATOL = 2e-6, 1e-6  # a few float32 ulps at values near 1 (see the module's docstring)
SHAPES = [(7, 13), (3, 257, 129), (2, 3, 67, 301)]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(29)


def random(rng, shape, scale=3.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("shape", SHAPES)
def test_element_wise_functions_equal_model_on_odd_shapes_and_batches(rng, shape):
    x = random(rng, shape)
    g, b = random(rng, shape[-1:]), random(rng, shape[-1:])
    before = x.copy()
    np.testing.assert_allclose(fast.gelu_(x.copy()), model.gelu(x), RTOL, ATOL)
    np.testing.assert_allclose(fast.softmax_(x.copy()), model.softmax(x), RTOL, ATOL)
    np.testing.assert_allclose(fast.layer_norm(x, g, b), model.layer_norm(x, g, b), RTOL, 1e-5)
    w = random(rng, (shape[-1], 11), 0.3)
    np.testing.assert_allclose(fast.linear(x, w, b[:11]), model.linear(x, w, b[:11]), RTOL, 1e-5)
    np.testing.assert_array_equal(x, before)  # only the *_ functions write into their argument
    for function in (fast.gelu_, fast.softmax_):
        y = x.copy()
        assert function(y) is y and y.dtype == np.float32


@pytest.mark.parametrize("batch", [(), (3,)])
def test_attention_and_a_block_equal_model_after_a_past_and_in_a_batch(rng, batch):
    n_head, n_embd, n_q, n_k = 4, 64, 37, 90  # queries sit at the last 37 of 90 positions
    q, k, v = (random(rng, (*batch, n_head, n, n_embd // n_head), 1.0) for n in (n_q, n_k, n_k))
    np.testing.assert_allclose(fast.causal_attention(q, k, v), model.causal_attention(q, k, v),
                               RTOL, ATOL)
    block = {"ln_1": {"g": random(rng, (n_embd,), 1), "b": random(rng, (n_embd,), 1)},
             "ln_2": {"g": random(rng, (n_embd,), 1), "b": random(rng, (n_embd,), 1)},
             "attn": {"c_attn": {"w": random(rng, (n_embd, 3 * n_embd), 0.2),
                                 "b": random(rng, (3 * n_embd,), 0.2)},
                      "c_proj": {"w": random(rng, (n_embd, n_embd), 0.2),
                                 "b": random(rng, (n_embd,), 0.2)}},
             "mlp": {"c_fc": {"w": random(rng, (n_embd, 4 * n_embd), 0.2),
                              "b": random(rng, (4 * n_embd,), 0.2)},
                     "c_proj": {"w": random(rng, (4 * n_embd, n_embd), 0.2),
                                "b": random(rng, (n_embd,), 0.2)}}}
    x = random(rng, (*batch, 300, n_embd), 1.0)
    before = x.copy()
    got = fast.transformer_block(x, **block, n_head=n_head)
    np.testing.assert_array_equal(x, before)  # the block leaves its input as it was
    np.testing.assert_allclose(got, model.transformer_block(x, **block, n_head=n_head), 1e-5, 1e-5)
    assert got.shape == x.shape and got.dtype == np.float32
    last = fast.transformer_block(x, **block, n_head=n_head, last_only=True)
    assert last.shape == (*batch, 1, n_embd)  # the last position's output alone, as in the full
    np.testing.assert_allclose(last, got[..., -1:, :], 1e-5, 1e-5)


@pytest.mark.parametrize("n_q, n_k", [(300, 300), (300, 333), (fast.QUERIES + 1, 700)])
def test_attention_in_blocks_of_queries_equals_model(rng, n_q, n_k):
    """More queries than a block: each block of fast.QUERIES queries sees only the keys up to
    its last query's position, and must give model's numbers, after a past too."""
    q, k, v = (random(rng, (2, 3, n, 16), 1.0) for n in (n_q, n_k, n_k))
    np.testing.assert_allclose(fast.causal_attention(q, k, v), model.causal_attention(q, k, v),
                               RTOL, ATOL)


@pytest.mark.parametrize("n_rows", [*range(1, 10), 64, 65])
def test_products_row_by_row_and_the_sliced_unembedding_equal_one_product(rng, n_rows,
                                                                         monkeypatch):
    """A few rows go through one matrix-vector product each, several (8 to 64) through
    (w.T @ x.T).T, the unembedding a slice of the vocabulary at a time: every row and every
    token's logit lands where x @ w puts it."""
    monkeypatch.setattr(fast, "VOCAB_CHUNK", 96)  # 1,001 tokens: ten slices and a short one
    x, w, b = random(rng, (n_rows, 48), 1), random(rng, (48, 70), 0.3), random(rng, (70,), 1)
    wte = random(rng, (1001, 48), 0.3)
    exact = x.astype(np.float64) @ w.astype(np.float64) + b  # the tolerance: float32 sums of 48
    np.testing.assert_allclose(fast.linear(x, w, b), exact, rtol=0, atol=1e-5)
    np.testing.assert_allclose(fast.unembed(x, wte), x.astype(np.float64) @ wte.T, rtol=0,
                               atol=1e-5)
    batched = fast.unembed(x[:, None, None], wte)  # leading dimensions pass through
    assert batched.shape == (n_rows, 1, 1, 1001)
    np.testing.assert_array_equal(batched[:, 0, 0], fast.unembed(x, wte))


# Run in a child: BLAS reads its thread count once, when NumPy loads.
CHILD = """
import os, sys
if sys.argv[2] == "one CPU":
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
import numpy as np
from picogpt.generate import generate
from picogpt.kvcache import KVCache, decode_step, prefill
from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.train import tree_map
from picogpt.score import score

_, hparams, params = load_encoder_hparams_and_params("124M", sys.argv[1])
n_head = hparams["n_head"]
ids = [int(i) for i in np.random.default_rng(5).integers(0, 50257, 300)]
cache = KVCache(params, n_head, 302, batch=(2,))
first = prefill([ids, ids[::-1]], params, n_head, cache)
step = decode_step(np.array([7, 8]), params, n_head, cache)
scores = score(ids, params, n_head, stride=100)
greedy = list(generate(ids, params, n_head, 20, stop_at_end=False))
threads = len(os.listdir("/proc/self/task"))
noise = 0.0
if sys.argv[4] == "truth":  # float64, to measure float32's noise
    params64 = tree_map(lambda a: a.astype(np.float64), params)
    exact = prefill([ids, ids[::-1]], params64, n_head, KVCache(params64, n_head, 300, batch=(2,)))
    noise = np.abs(first - exact).max()
np.savez(sys.argv[3], prefill=first, step=step, score=scores, greedy=greedy, threads=threads,
         noise=noise)
"""


def engine_numbers(models_dir, tmp_path, limit: str, env: dict) -> dict:
    """Prefill, decode-step and scoring numbers of the 124M shape in a child process whose
    threads are limited as `limit` and env say, how many threads the process then had, and
    (unlimited only) how far its prefill is from float64's."""
    out = tmp_path / f"{limit}-{sorted(env.items())}.npz".replace(" ", "_")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    subprocess.run([sys.executable, "-c", CHILD, str(models_dir), limit, str(out),
                    "truth" if limit == "every CPU" and not env else "-"], check=True,
                   env={**environment, **env}, cwd=ROOT)
    return dict(np.load(out))


def test_one_thread_gives_the_same_numbers_as_two_and_no_more_threads_than_allowed(
        gpt2_124m, tmp_path):
    assert len(os.sched_getaffinity(0)) >= 2, "comparing one thread with two needs two CPUs"
    two = engine_numbers(gpt2_124m.models_dir, tmp_path, "every CPU", {})
    assert two["threads"] == 2  # this thread and one BLAS worker
    for limit, env in [("every CPU", {"OMP_NUM_THREADS": "1"}),
                       ("every CPU", {"OPENBLAS_NUM_THREADS": "1"}), ("one CPU", {})]:
        one = engine_numbers(gpt2_124m.models_dir, tmp_path, limit, env)
        assert one["threads"] == 1, (limit, env)  # picogpt starts no thread of its own
        # BLAS splits a product differently on one thread and on two, so the sums round in
        # another order: the bound is twice the float32 noise measured against float64
        atol = 2 * two["noise"]
        for name in ("prefill", "step", "score"):
            np.testing.assert_allclose(one[name], two[name], rtol=0, atol=atol,
                                       err_msg=f"{name}, {limit}, {env}")
        np.testing.assert_array_equal(one["greedy"], two["greedy"])
