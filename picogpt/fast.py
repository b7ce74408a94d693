"""The engine's copies of model.py's hot functions: the same numbers with fewer new arrays.

model.py is written to be read: `0.5 * x * (1 + np.tanh(...))` makes a new array at every
operator, and each new array of a long prompt is megabytes that must be allocated, written and
read again. The functions here do the same float32 operations in the same order, so they give
model.py's numbers (tests hold them equal on odd shapes and batches), but they write into arrays
they own (`out=`, `*=`): GELU of a 512-token prompt's [512, 3072] activations takes about half
of model.gelu's time (docs/performance.md, "In-place copies"). For a few rows, products go row by
row, which saves OpenBLAS's copy of the weights ("Several samples, their products"); for
several (eight samples), the weights go to OpenBLAS as its first matrix, untouched.

`transformer_block` takes model.transformer_block's arguments, `attend` included, so kvcache.py
and score.py call it in its place and the seam into the cache stays that one argument. The
learner's views (inside.py, web/page.py) keep calling model.py. No I/O; no argument is changed
except the array that a function whose name ends in `_` overwrites, and `product`'s `out`.
"""

import numpy as np

from .model import future_mask, merge_heads, split_heads


def gelu_(x: np.ndarray) -> np.ndarray:  # [...] -> x
    """model.gelu, written into x, with one temporary."""
    t = x * x  # the operations of model.gelu, in its order
    t *= x
    t *= 0.044715
    t += x
    t *= 0.7978845608028654
    np.tanh(t, out=t)
    t += 1
    x *= 0.5
    x *= t
    return x


def softmax_(x: np.ndarray) -> np.ndarray:  # [..., n] -> x
    """model.softmax, written into x."""
    x -= np.max(x, axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= np.sum(x, axis=-1, keepdims=True)
    return x


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """model.layer_norm, finished in the array that holds x minus its mean."""
    centred = x - np.mean(x, axis=-1, keepdims=True)  # [..., n_seq, n_embd]
    variance = np.mean(centred * centred, axis=-1, keepdims=True)  # [..., n_seq, 1]
    centred *= g
    centred /= np.sqrt(variance + eps)
    centred += b
    return centred


# Rows for which a product is one matrix-vector product per row instead of one matrix product:
# OpenBLAS copies (packs) the weights before a matrix product, a cost that two to seven rows do
# not earn back, while a matrix-vector product reads them as they are (a block's matrices then
# stay in the L3 cache from one row to the next). Measured: docs/performance.md, "Several
# samples, their products".
FEW_ROWS = range(2, 8)
# Rows for which a product hands OpenBLAS the weights as its first matrix, untouched: w.T @ x.T,
# [n_out, n_in] (a transposed view) times [n_in, n_rows], then the result turned back. For eight
# to 64 rows OpenBLAS runs that layout faster than x @ w (a 124M step's block products for 8 rows:
# 31 against 39 ms) and sums each output in the same order; from ~128 rows x @ w is as fast, and
# at 512 much faster. Measured: docs/performance.md, "2026-11-29: eight samples past 1.5x".
SEVERAL_ROWS = range(8, 65)
# Queries per block of causal attention: a long prompt's later keys are masked for its earlier
# queries, so a block's scores stop at its last query's position; with 128, a 512-token prompt
# computes 10/16 of the full [512, 512] scores. Measured: docs/performance.md, "Prefill".
QUERIES = 128
VOCAB_CHUNK = 4096  # wte rows per pass of the unembedding: 12 MiB, read by every row while cached


def product(x: np.ndarray, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x @ w for x of [n_rows, n_in], written into out: row by row when there are few rows,
    as (w.T @ x.T).T when there are several."""
    if len(x) in SEVERAL_ROWS:  # [n_out, n_in] @ [n_in, n_rows] -> [n_out, n_rows], turned
        turned = np.matmul(w.T, x.T).T  # a view [n_rows, n_out] of the product's columns
        if out is None:
            return np.ascontiguousarray(turned)  # row-major again, as x @ w returns it
        out[...] = turned
        return out
    if len(x) not in FEW_ROWS:
        return np.matmul(x, w, out=out)
    out = np.empty((len(x), w.shape[-1]), x.dtype) if out is None else out
    for row, out_row in zip(x, out):
        np.matmul(row, w, out=out_row)
    return out


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """model.linear, adding the bias into the product instead of into a copy of it."""
    out = product(x.reshape(-1, x.shape[-1]), w)  # [..., n_in] -> [..., n_out]
    out += b
    return out.reshape(*x.shape[:-1], w.shape[-1])


def unembed(x: np.ndarray, wte: np.ndarray) -> np.ndarray:
    """x @ wte.T, the logits, a slice of the vocabulary at a time when there are several rows."""
    # [..., n_embd] -> [..., n_vocab]
    rows = x.reshape(-1, x.shape[-1])
    if len(rows) == 1:
        return x @ wte.T
    out = np.empty((len(rows), len(wte)), x.dtype)
    for start in range(0, len(wte), VOCAB_CHUNK):
        chunk = slice(start, start + VOCAB_CHUNK)
        product(rows, wte[chunk].T, out=out[:, chunk])
    return out.reshape(*x.shape[:-1], len(wte))


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """model.causal_attention with its scores masked and softmaxed in place, QUERIES queries at
    a time, each block of them against only the keys they may see."""
    # [..., n_q, d_head], [..., n_k, d_head] x2 -> [..., n_q, d_head]
    n_q, n_k = q.shape[-2], k.shape[-2]
    if n_q <= QUERIES:
        return attend_block(q, k, v)
    out = np.empty(q.shape, q.dtype)
    for start in range(0, n_q, QUERIES):
        stop = min(start + QUERIES, n_q)
        seen = n_k - n_q + stop  # the keys of the positions up to the block's last query
        out[..., start:stop, :] = attend_block(q[..., start:stop, :], k[..., :seen, :],
                                               v[..., :seen, :])
    return out


def attend_block(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Causal attention of queries at the last q.shape[-2] of k's positions."""
    scores = (q / q.shape[-1] ** 0.5) @ k.swapaxes(-1, -2)  # [..., n_q, n_k]
    if q.shape[-2] > 1:  # a decode step's one query is the last position: nothing to mask
        scores += future_mask(q.shape[-2], k.shape[-2], q.dtype)
    return softmax_(scores) @ v


def transformer_block(x: np.ndarray, mlp: dict, attn: dict, ln_1: dict, ln_2: dict,
                      n_head: int, attend=causal_attention, last_only: bool = False) -> np.ndarray:
    """model.transformer_block from this module's parts; x itself is left as it was.

    last_only: the output of the last position alone, for a pass whose other outputs nobody
    reads (the last block, when only the last logits are wanted). Every position's keys and
    values still reach `attend` (a cache stores them); only the last query attends."""
    # [..., n_seq, n_embd] -> [..., n_seq, n_embd] ([..., 1, n_embd] with last_only)
    q, k, v = np.split(linear(layer_norm(x, **ln_1), **attn["c_attn"]), 3, axis=-1)
    if last_only:
        q, x = q[..., -1:, :], x[..., -1:, :]
    heads = attend(*(split_heads(a, n_head) for a in (q, k, v)))  # [..., n_head, n_seq, d_head]
    attended = linear(merge_heads(heads), **attn["c_proj"])  # [..., n_seq, n_embd]
    attended += x  # model adds x + attended: the same sum
    out = linear(gelu_(linear(layer_norm(attended, **ln_2), **mlp["c_fc"])), **mlp["c_proj"])
    out += attended
    return out
