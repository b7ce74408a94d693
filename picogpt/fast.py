"""The engine's copies of model.py's hot functions: the same numbers with fewer new arrays.

model.py is written to be read: `0.5 * x * (1 + np.tanh(...))` makes a new array at every
operator, and each new array of a long prompt is megabytes that must be allocated, written and
read again. The functions here do the same float32 operations in the same order, so they give
model.py's numbers (tests hold them equal on odd shapes and batches), but they write into arrays
they own (`out=`, `*=`): GELU of a 512-token prompt's [512, 3072] activations takes a third of
model.gelu's time, softmax of its attention scores two thirds (docs/performance.md, "Prefill").

`transformer_block` takes model.transformer_block's arguments, `attend` included, so kvcache.py
and score.py call it in its place and the seam into the cache stays that one argument. The
learner's views (inside.py, page.py) keep calling model.py. No I/O; no argument is changed except
the array that a function whose name ends in `_` is named to overwrite.
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


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """model.linear, adding the bias into the product instead of into a copy of it."""
    out = x.reshape(-1, x.shape[-1]) @ w  # [..., n_in] -> [..., n_out]
    out += b
    return out.reshape(*x.shape[:-1], w.shape[-1])


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """model.causal_attention with its scores masked and softmaxed in place."""
    # [..., n_q, d_head], [..., n_k, d_head] x2 -> [..., n_q, d_head]
    scores = (q / q.shape[-1] ** 0.5) @ k.swapaxes(-1, -2)  # [..., n_q, n_k]
    scores += future_mask(q.shape[-2], k.shape[-2], q.dtype)
    return softmax_(scores) @ v


def transformer_block(x: np.ndarray, mlp: dict, attn: dict, ln_1: dict, ln_2: dict,
                      n_head: int, attend=causal_attention) -> np.ndarray:
    """model.transformer_block from this module's parts; x itself is left as it was."""
    # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    q, k, v = np.split(linear(layer_norm(x, **ln_1), **attn["c_attn"]), 3, axis=-1)
    heads = attend(*(split_heads(a, n_head) for a in (q, k, v)))  # [..., n_head, n_seq, d_head]
    attended = linear(merge_heads(heads), **attn["c_proj"])  # [..., n_seq, n_embd]
    attended += x  # model adds x + attended: the same sum
    out = linear(gelu_(linear(layer_norm(attended, **ln_2), **mlp["c_fc"])), **mlp["c_proj"])
    out += attended
    return out
