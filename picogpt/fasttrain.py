"""The training step's fast path: backward.py's `loss_and_grads`, in fewer passes over memory.

backward.py is written to be read: inside.trace runs model.py's forward with every value kept,
then each layer's backward is a function of its own and each operator makes a new array. That
is the right book and a slow step. This module computes the same loss and gradients for
train.py's loop (and so induction.py's) the way fast.py serves generation:

- the forward keeps exactly what the backward reads: each layer norm its normalised input and
  1 / std, GELU its tanh, so the backward recomputes nothing;
- the logits, [n_rows, n_vocab] and at GPT-2's vocabulary the step's largest array by far, are
  turned into the loss and their own gradient in place: the softmax, the loss and
  `(p - one_hot) / n_rows` are one pass over each slice of rows, while the slice is in the
  cache, and the slices are shared out to threads (NumPy's element-wise work runs on one core
  and releases the GIL), as many as the matrix products run on (OpenBLAS's pool, one thread per
  core unless the train command chose fewer: cli/threads.py);
- the embedding's gradient is added straight into the unembedding's.

Attention's forward and backward here (`attention`, `attention_backward`) are the one pair every
kind's fast step runs: GPT-2's below, the encoder-decoder's (with padding masks, and no causal
one in the encoder and cross-attention) and the LLaMA block's (key and value heads shared by
groups of query heads).

Same arguments, same result (tests hold the loss and every gradient to backward.py's and to
torch's autograd); float32 in, float32 out, float64 in, float64 out. No I/O, no argument is
changed. Why each choice: docs/performance.md, "Training".
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_info

from .fast import softmax_
from .model import future_mask, merge_heads, split_heads

# Logit rows per slice of the fused softmax: 16 x 50,257 float32 is 3 MiB, which stays in the
# cache through the slice's five passes (max, shift, exp, sum, scale) on this host's CPUs.
ROWS = 16


def cores() -> int:
    """The cores this process may run on (as OpenBLAS counts them; `taskset` limits both)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def blas_threads() -> int | None:
    """The threads the loaded BLAS (OpenBLAS for NumPy's wheels) runs products on, or None."""
    pools = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    return pools[0] if pools else None


def workers() -> int:
    """The threads that share the logits' element-wise work: as many as the matrix products run
    on (the BLAS's pool, which the train command sizes: cli/threads.py), at most cores()."""
    return max(1, min(blas_threads() or cores(), cores()))


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray,
               eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """model.layer_norm, and what its backward reads: the normalised x and 1 / std."""
    # [..., n_embd] -> out and normed [..., n_embd], rstd [..., 1]
    normed = x - np.mean(x, axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(np.mean(normed * normed, axis=-1, keepdims=True) + eps)
    normed *= rstd
    out = normed * g
    out += b
    return out, normed, rstd


def layer_norm_backward(dout: np.ndarray, normed: np.ndarray, rstd: np.ndarray,
                        g: np.ndarray) -> tuple[np.ndarray, dict]:
    """backward.layer_norm_backward from the forward's normed and rstd: dx, {"g", "b"}."""
    # dout, normed [..., n_embd], rstd [..., 1] -> dx [..., n_embd]
    flat = (-1, dout.shape[-1])
    dg = np.sum((dout * normed).reshape(flat), axis=0)
    dx = dout * g  # d normed
    shift = np.mean(dx, axis=-1, keepdims=True)
    slope = np.mean(dx * normed, axis=-1, keepdims=True)
    dx -= shift
    dx -= normed * slope
    dx *= rstd
    return dx, {"g": dg, "b": np.sum(dout.reshape(flat), axis=0)}


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """model.linear, adding the bias into the product."""
    out = x.reshape(-1, x.shape[-1]) @ w  # [..., n_in] -> [..., n_out]
    out += b
    return out.reshape(*x.shape[:-1], w.shape[-1])


def linear_backward(dout: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, dict]:
    """backward.linear_backward: dx [..., n_in] and {"w": [n_in, n_out], "b": [n_out]}."""
    dout_2d, x_2d = dout.reshape(-1, dout.shape[-1]), x.reshape(-1, x.shape[-1])
    dx = (dout_2d @ w.T).reshape(x.shape)
    return dx, {"w": x_2d.T @ dout_2d, "b": np.sum(dout_2d, axis=0)}


def gelu(pre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [...] -> post, tanh [...]
    """model.gelu, and the tanh its backward reads."""
    t = pre * pre
    t *= pre
    t *= 0.044715
    t += pre
    t *= 0.7978845608028654
    np.tanh(t, out=t)
    post = t + 1
    post *= pre
    post *= 0.5
    return post, t


def gelu_backward_(dpost: np.ndarray, pre: np.ndarray, t: np.ndarray) -> np.ndarray:
    """backward.gelu_backward from the forward's tanh, written into dpost."""
    slope = pre * pre  # d tanh's input / d pre = c (1 + 3 * 0.044715 pre^2), c = sqrt(2 / pi)
    slope *= 0.7978845608028654 * 3 * 0.044715
    slope += 0.7978845608028654
    slope *= pre
    slope *= 0.5
    slope *= 1 - t * t
    slope += 0.5 * t
    slope += 0.5  # 0.5 (1 + t) + 0.5 pre (1 - t^2) d_inner
    dpost *= slope
    return dpost


def grouped(x: np.ndarray, n_kv_head: int) -> np.ndarray:
    """Heads in groups that share one key and value head, each group's rows stacked."""
    # [..., n_head, n_rows, d] -> [..., n_kv_head, n_head // n_kv_head * n_rows, d]; a view
    # when every head has its own (n_kv_head == n_head)
    return x.reshape(*x.shape[:-3], n_kv_head, -1, x.shape[-1])


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
              mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """model.attention for every head at once, and the pattern its backward reads. k and v
    may have fewer heads than q (grouped-query attention): each serves n_head // n_kv_head
    query heads in a row. mask: added to every head's scores, or None to see every key."""
    # q [..., n_head, n_q, d_head], k and v [..., n_kv_head, n_k, d_head], mask [..., n_q, n_k]
    # -> z [..., n_head, n_q, d_head], pattern [..., n_head, n_q, n_k]
    n_kv_head = k.shape[-3]
    pattern = grouped(q, n_kv_head) @ k.swapaxes(-1, -2)  # a group's queries meet its keys
    pattern = pattern.reshape(*q.shape[:-1], k.shape[-2])  # [..., n_head, n_q, n_k]
    pattern *= 1 / q.shape[-1] ** 0.5
    if mask is not None:
        pattern += np.expand_dims(mask, -3)  # one mask for every head
    softmax_(pattern)
    return (grouped(pattern, n_kv_head) @ v).reshape(q.shape), pattern


def attention_backward(dz: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                       pattern: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """backward.attention_backward from attention's pattern: dq, dk, dv. A key or value head
    shared by a group gets the sum of the group's gradients; a mask passes nothing back (the
    pattern is 0 where it hid a key, and so is that score's gradient)."""
    # dz, q [..., n_head, n_q, d_head]; k, v [..., n_kv_head, n_k, d_head] -> dq, dk, dv alike
    n_kv_head = k.shape[-3]
    dz_grouped = grouped(dz, n_kv_head)  # [..., n_kv_head, group * n_q, d_head]
    dv = grouped(pattern, n_kv_head).swapaxes(-1, -2) @ dz_grouped  # sums over the group's rows
    dscores = (dz_grouped @ v.swapaxes(-1, -2)).reshape(pattern.shape)  # d pattern, then
    dscores -= np.sum(dscores * pattern, axis=-1, keepdims=True)  # through the softmax, in place
    dscores *= pattern
    dscores *= 1 / q.shape[-1] ** 0.5
    dscores_grouped = grouped(dscores, n_kv_head)  # [..., n_kv_head, group * n_q, n_k]
    dq = (dscores_grouped @ k).reshape(q.shape)
    return dq, dscores_grouped.swapaxes(-1, -2) @ grouped(q, n_kv_head), dv


def block_forward(x: np.ndarray, block: dict, n_head: int,
                  mask: np.ndarray) -> tuple[np.ndarray, dict]:
    """model.transformer_block, and the values block_backward reads."""
    # x [n_batch, n_seq, n_embd] -> [n_batch, n_seq, n_embd]
    ln_1, normed_1, rstd_1 = layer_norm(x, **block["ln_1"])
    qkv = linear(ln_1, **block["attn"]["c_attn"])  # [n_batch, n_seq, 3 * n_embd]
    q, k, v = (split_heads(a, n_head) for a in np.split(qkv, 3, axis=-1))
    z, pattern = attention(q, k, v, mask)  # [n_batch, n_head, n_seq, d_head], [..., n_seq]
    merged = merge_heads(z)  # [n_batch, n_seq, n_embd]
    x1 = linear(merged, **block["attn"]["c_proj"])
    x1 += x
    ln_2, normed_2, rstd_2 = layer_norm(x1, **block["ln_2"])
    pre = linear(ln_2, **block["mlp"]["c_fc"])  # [n_batch, n_seq, 4 * n_embd]
    post, t = gelu(pre)
    out = linear(post, **block["mlp"]["c_proj"])
    out += x1
    return out, {"ln_1": ln_1, "normed_1": normed_1, "rstd_1": rstd_1, "q": q, "k": k, "v": v,
                 "pattern": pattern, "merged": merged, "ln_2": ln_2, "normed_2": normed_2,
                 "rstd_2": rstd_2, "pre": pre, "t": t, "post": post}


def block_backward(dout: np.ndarray, block: dict, n_head: int,
                   kept: dict) -> tuple[np.ndarray, dict]:
    """backward.transformer_block_backward from block_forward's values: dx and dblock."""
    # dout [n_batch, n_seq, n_embd] -> dx [n_batch, n_seq, n_embd]; dblock shaped as block
    dpost, dmlp_proj = linear_backward(dout, kept["post"], block["mlp"]["c_proj"]["w"])
    dpre = gelu_backward_(dpost, kept["pre"], kept["t"])
    dh, dc_fc = linear_backward(dpre, kept["ln_2"], block["mlp"]["c_fc"]["w"])
    dx1, dln_2 = layer_norm_backward(dh, kept["normed_2"], kept["rstd_2"], block["ln_2"]["g"])
    dx1 += dout
    dmerged, dattn_proj = linear_backward(dx1, kept["merged"], block["attn"]["c_proj"]["w"])
    dz = split_heads(dmerged, n_head)  # [n_batch, n_head, n_seq, d_head]
    dq, dk, dv = attention_backward(dz, kept["q"], kept["k"], kept["v"], kept["pattern"])
    dqkv = np.concatenate([merge_heads(d) for d in (dq, dk, dv)], axis=-1)  # [..., 3 * n_embd]
    dh, dc_attn = linear_backward(dqkv, kept["ln_1"], block["attn"]["c_attn"]["w"])
    dx, dln_1 = layer_norm_backward(dh, kept["normed_1"], kept["rstd_1"], block["ln_1"]["g"])
    dx += dx1
    return dx, {"mlp": {"c_fc": dc_fc, "c_proj": dmlp_proj},
                "attn": {"c_attn": dc_attn, "c_proj": dattn_proj}, "ln_1": dln_1, "ln_2": dln_2}


def softmax_cross_entropy_(logits: np.ndarray, targets: np.ndarray,
                           threads: int | None = None) -> float:
    """backward.cross_entropy, its gradient written over the logits: returns the loss."""
    # logits [n_rows, n_vocab] -> (p - one_hot) / n_rows, in place; targets [n_rows]
    n_rows = len(logits)
    rows = np.arange(n_rows)
    picked = logits[rows, targets]  # [n_rows] the targets' logits, before the shift
    log_total = np.empty(n_rows, logits.dtype)  # log of each row's sum of exp(logit - max)

    def one_slice(start: int) -> None:  # the five passes over a slice still in the cache
        part = logits[start : start + ROWS]
        top = np.max(part, axis=-1, keepdims=True)
        part -= top
        np.exp(part, out=part)
        total = np.sum(part, axis=-1, keepdims=True)
        part /= total * n_rows  # p / n_rows: the loss is the mean over the rows
        log_total[start : start + ROWS] = (np.log(total) + top)[:, 0]

    with ThreadPoolExecutor(threads or workers()) as pool:
        list(pool.map(one_slice, range(0, n_rows, ROWS)))
    logits[rows, targets] -= 1 / n_rows
    return float(np.mean(log_total - picked))  # -log p = log(sum exp) - logit


def loss_and_grads(inputs: np.ndarray, targets: np.ndarray, params: dict, n_head: int,
                   threads: int | None = None) -> tuple[float, dict]:
    """backward.loss_and_grads: the mean cross-entropy (nats) and every gradient, in params'
    structure. inputs, targets: [n_batch, n_seq] ids; threads share the logits' element-wise
    work (default: workers(), as many as the matrix products run on)."""
    inputs, targets = np.atleast_2d(inputs), np.atleast_2d(targets)
    wte, wpe = params["wte"], params["wpe"]
    n_seq = inputs.shape[-1]
    x = wte[inputs] + wpe[:n_seq]  # [n_batch, n_seq, n_embd]
    mask = future_mask(n_seq, n_seq, x.dtype)
    kept = []
    for block in params["blocks"]:
        x, values = block_forward(x, block, n_head, mask)
        kept.append(values)
    ln_f, normed, rstd = layer_norm(x, **params["ln_f"])
    rows = ln_f.reshape(-1, ln_f.shape[-1])  # [n_rows, n_embd]
    dlogits = rows @ wte.T  # [n_rows, n_vocab]: the logits, then their gradient
    loss = softmax_cross_entropy_(dlogits, targets.reshape(-1), threads)
    dwte = dlogits.T @ rows  # [n_vocab, n_embd]: the unembedding's part of wte's gradient
    dx = (dlogits @ wte).reshape(x.shape)
    del dlogits
    dx, dln_f = layer_norm_backward(dx, normed, rstd, params["ln_f"]["g"])
    dblocks = [None] * len(kept)
    for i in reversed(range(len(kept))):
        dx, dblocks[i] = block_backward(dx, params["blocks"][i], n_head, kept[i])
        kept[i] = None  # the block's values are not needed again
    np.add.at(dwte, inputs.reshape(-1), dx.reshape(-1, dx.shape[-1]))  # the embedding's part
    dwpe = np.zeros_like(wpe)
    dwpe[:n_seq] = np.sum(dx, axis=0)
    return loss, {"wte": dwte, "wpe": dwpe, "blocks": dblocks, "ln_f": dln_f}
