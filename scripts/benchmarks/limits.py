"""This machine's limits, and what each headline figure could at most reach under them.

    python -m scripts.benchmarks.limits

Two limits, measured with NumPy (OpenBLAS) on every thread this process may use:
- read bandwidth: bytes a second read from memory, summing 1 GiB (speed.py's read_bandwidth);
- GEMM FLOP/s: float32 matrix products, a large square one (the best OpenBLAS does here) and
  the products the headline figures are made of.

From them, the most each figure could reach, with the arithmetic printed beside it:
- decoding one sample reads every weight once a token: at most bandwidth / bytes of weights;
- eight samples read the weights once a step for all eight, so at most eight times that, unless
  the step's products take longer: a whole step's products at the 124M shape are timed for 1
  and 8 rows in each layout NumPy can hand OpenBLAS (x @ w, w.T @ x.T, row by row, columns
  split over two threads);
- prefill and a training step are products: FLOPs a token over the GEMM FLOP/s (a training step
  is three products per forward one: the forward, the gradient of the input, of the weights).
docs/performance.md divides each measured figure by its limit.
"""

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from scripts.benchmarks.common import threads
from scripts.benchmarks.speed import read_bandwidth, weight_bytes

GPT2_124M = {"n_vocab": 50257, "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12}
TRAINING = {"default": ({"n_vocab": 50257, "n_ctx": 128, "n_embd": 128, "n_layer": 2}, 16),
            "poems": ({"n_vocab": 6000, "n_ctx": 64, "n_embd": 128, "n_layer": 4}, 32)}


def gemm_flops(m: int, k: int, n: int, seconds: float = 2.0) -> float:
    """FLOP/s of float32 [m, k] @ [k, n] products, the best of repeats over about seconds."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), np.float32)
    np.matmul(a, b, out=out)  # warm up: threads, pages
    best, spent = float("inf"), 0.0
    while spent < seconds:
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
    return 2 * m * k * n / best


def decode_products(n_rows: int, seconds: float = 3.0) -> dict[str, float]:
    """Seconds of one decode step's products at the 124M shape (12 blocks' four matrices and
    the unembedding, 495 MB of weights, far beyond the cache) for n_rows rows, in each layout
    NumPy can give OpenBLAS: x @ w; w.T @ x.T against a transposed copy of the weights kept
    (the rows as the small N dimension); w.T @ x.T with w untouched, a transposed view
    (fast.product's route for 8 to 64 rows; on these fresh random arrays it ran slower than
    x @ w, on a loaded checkpoint's arrays faster: docs/performance.md, issue 54); one
    matrix-vector product per row; each product's columns in two halves on two threads (run
    with OPENBLAS_NUM_THREADS=1 to give that one OpenBLAS's threads' cores). Best of repeats."""
    rng = np.random.default_rng(0)
    e, v = GPT2_124M["n_embd"], GPT2_124M["n_vocab"]
    shapes = [(e, 3 * e), (e, e), (e, 4 * e), (4 * e, e)] * GPT2_124M["n_layer"] + [(e, v)]
    weights = [rng.standard_normal(shape, dtype=np.float32) for shape in shapes]
    transposed = [np.ascontiguousarray(w.T) for w in weights]
    rows = [rng.standard_normal((n_rows, w.shape[0]), dtype=np.float32) for w in weights]
    pool = ThreadPoolExecutor(2)

    def in_halves(x, w):  # the columns' second half on another thread, the first on this one
        out, half = np.empty((len(x), w.shape[1]), x.dtype), w.shape[1] // 2
        other = pool.submit(np.matmul, x, w[:, half:], out=out[:, half:])
        np.matmul(x, w[:, :half], out=out[:, :half])
        other.result()

    layouts = {"x @ w": lambda: [x @ w for x, w in zip(rows, weights)],
               "w.T @ x.T": lambda: [t @ x.T for x, t in zip(rows, transposed)],
               "w.T @ x.T, w untouched (a view)": lambda: [w.T @ x.T for x, w in
                                                           zip(rows, weights)],
               "row by row": lambda: [[r @ w for r in x] for x, w in zip(rows, weights)],
               "columns in halves on two threads": lambda: [in_halves(x, w) for x, w in
                                                            zip(rows, weights)]}
    best = {}
    for name, run in layouts.items():
        run()
        times, spent = [], 0.0
        while spent < seconds:
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
            spent += times[-1]
        best[name] = min(times)
    return best


def forward_flops(hparams: dict, n_seq: int, n_rows: int) -> float:
    """FLOPs of one forward pass over n_rows positions of windows n_seq long: the products."""
    n_embd, n_layer = hparams["n_embd"], hparams["n_layer"]
    blocks = n_layer * (2 * 12 * n_embd * n_embd + 2 * 2 * n_seq * n_embd)  # weights; attention
    return n_rows * (blocks + 2 * hparams["n_vocab"] * n_embd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per GEMM shape")
    args = parser.parse_args()
    bandwidth = read_bandwidth()
    square = gemm_flops(2048, 2048, 2048, args.seconds)
    e = GPT2_124M["n_embd"]
    shapes = {"square 2048^3": square,
              "prefill, 512 x 768 x 3072 (c_fc)": gemm_flops(512, e, 4 * e, args.seconds),
              "8 samples, 8 x 768 x 3072 (c_fc)": gemm_flops(8, e, 4 * e, args.seconds),
              "training, 2048 x 128 x 50257 (logits)": gemm_flops(2048, 128, 50257,
                                                                   args.seconds),
              "training, 2048 x 128 x 512 (c_fc)": gemm_flops(2048, 128, 512, args.seconds)}
    print(f"threads: {threads()}")
    print(f"read bandwidth: {bandwidth / 1e9:.1f} GB/s")
    for name, flops in shapes.items():
        print(f"GEMM {name}: {flops / 1e9:.1f} GFLOP/s")
    _, per_token = weight_bytes(GPT2_124M)
    decode = bandwidth / per_token
    print(f"decode, 124M: {per_token / 1e6:.0f} MB of weights a token -> at most "
          f"{decode:.0f} tok/s (KV cache not counted)")
    print(f"8 samples: reading the weights once a step, at most {8 * decode:.0f} tok/s "
          f"({8 * decode / decode:.0f}x one sample's limit), unless their products are slower:")
    for n_rows in (1, 8):
        for name, seconds in decode_products(n_rows, args.seconds).items():
            print(f"  {n_rows} row(s), a step's products as {name}: {seconds * 1e3:.1f} ms -> "
                  f"at most {n_rows / seconds:.0f} tok/s")
    prefill = forward_flops(GPT2_124M, 512, 512) / 512
    print(f"prefill 512, 124M: {prefill / 1e6:.0f} MFLOP a token (every position's logits; "
          f"generation keeps the last only: {(prefill - 2 * 50257 * e) / 1e6:.0f}) -> at most "
          f"{square / (prefill - 2 * 50257 * e):.0f} tok/s at the square GEMM's speed")
    for name, (hparams, n_batch) in TRAINING.items():
        n_seq = hparams["n_ctx"]
        step = 3 * forward_flops(hparams, n_seq, n_batch * n_seq)
        print(f"training step, {name}: {step / 1e9:.1f} GFLOP for {n_batch * n_seq} tokens -> "
              f"at most {square / step * n_batch * n_seq:,.0f} tok/s at the square GEMM's speed")


if __name__ == "__main__":
    main()
