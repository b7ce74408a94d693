"""The engine's copies of llama/model.py's block: the same operations, products shaped for the
few rows a decode step has, and fewer new arrays.

A decode step multiplies one row by every weight matrix: 2 GB of float32 at Qwen2.5-0.5B's
shape, read once a token, so the step is as fast as the weights can be read. Hugging Face stores
a weight as [n_out, n_in]; `weight @ row` hands OpenBLAS that matrix as stored, a matrix-vector
product reading each row once, where `x @ weight.T` with x of one row is a matrix product that
may first copy (pack) the weights (docs/performance.md, "Several samples, their products", has
GPT-2's measurements of the same choice). Several rows take it row by row up to FEW_ROWS, then
one matrix product. Tests hold these functions equal to model.py's. No I/O, no state.
"""

import numpy as np

from ..model import merge_heads, split_heads
from .model import grouped_attention, rms_norm, rope

FEW_ROWS = 8  # below this many rows, one matrix-vector product per row (fast.py's FEW_ROWS)


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """model.linear, its products as matrix-vector ones for few rows."""
    rows = x.reshape(-1, x.shape[-1])  # [..., n_in] -> [n_rows, n_in] -> [..., n_out]
    if len(rows) < FEW_ROWS:
        out = np.empty((len(rows), weight.shape[0]), x.dtype)
        for row, out_row in zip(rows, out):
            np.matmul(weight, row, out=out_row)
    else:
        out = rows @ weight.T
    if bias is not None:
        out += bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


def swiglu(x: np.ndarray, gate_proj: dict, up_proj: dict, down_proj: dict) -> np.ndarray:
    """model.swiglu, silu and the gating written into the gate's own array."""
    gate = linear(x, **gate_proj)  # [..., n_seq, n_ffn]
    t = np.multiply(gate, 0.5)  # silu(g) = g * (0.5 + 0.5 * tanh(0.5 * g)), model.silu's form
    np.tanh(t, out=t)
    t *= 0.5
    t += 0.5
    gate *= t
    gate *= linear(x, **up_proj)
    return linear(gate, **down_proj)


def gqa(x: np.ndarray, q_proj: dict, k_proj: dict, v_proj: dict, o_proj: dict,
        cos: np.ndarray, sin: np.ndarray, n_head: int, n_kv_head: int, norm_eps: float,
        q_norm: dict | None = None, k_norm: dict | None = None,
        attend=grouped_attention) -> np.ndarray:  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    """model.gqa with this module's products."""
    q = split_heads(linear(x, **q_proj), n_head)  # [..., n_head, n_seq, d_head]
    k = split_heads(linear(x, **k_proj), n_kv_head)  # [..., n_kv_head, n_seq, d_head]
    v = split_heads(linear(x, **v_proj), n_kv_head)
    if q_norm is not None:
        q, k = rms_norm(q, **q_norm, eps=norm_eps), rms_norm(k, **k_norm, eps=norm_eps)
    heads = attend(rope(q, cos, sin), rope(k, cos, sin), v)  # [..., n_head, n_seq, d_head]
    return linear(merge_heads(heads), **o_proj)


def llama_block(x: np.ndarray, input_layernorm: dict, self_attn: dict,
                post_attention_layernorm: dict, mlp: dict, cos: np.ndarray, sin: np.ndarray,
                n_head: int, n_kv_head: int, norm_eps: float,
                attend=grouped_attention) -> np.ndarray:  # [..., n_seq, n_embd] -> same
    """model.llama_block from this module's parts; x itself is left as it was."""
    h = rms_norm(x, **input_layernorm, eps=norm_eps)
    attended = gqa(h, **self_attn, cos=cos, sin=sin, n_head=n_head, n_kv_head=n_kv_head,
                   norm_eps=norm_eps, attend=attend)
    attended += x
    out = swiglu(rms_norm(attended, **post_attention_layernorm, eps=norm_eps), **mlp)
    out += attended
    return out
