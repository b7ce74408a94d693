"""The LLaMA block's forward pass as pure NumPy functions, in reading order: rms_norm to llama.

Read picogpt/model.py first: this file keeps GPT-2's shape and changes four things. RMSNorm for
LayerNorm; rotary positions (RoPE) turning q and k instead of a learned position table; SwiGLU
for GELU; and grouped-query attention, where n_kv_head key/value heads serve n_head query heads.
Qwen adds its options: q/k/v biases (Qwen2), an RMSNorm on each head's q and k (Qwen3), a d_head
that is not n_embd // n_head, and an output head (lm_head) that is not the embedding.
Argument names are Hugging Face's checkpoint names with "model." dropped, so a params dict splats
in: `llama(ids, **params, **{name: hparams[name] for name in HPARAMS})`. Float32, no state, no
I/O. No KV cache: `gqa` takes its attention step (`attend`), as model.py's `mha` does.
"""

import numpy as np

from ..model import causal_attention, merge_heads, split_heads

# the hparams the forward reads (the others describe the checkpoint: n_vocab, n_layer, ...)
HPARAMS = ("n_head", "n_kv_head", "d_head", "rope_theta", "norm_eps")


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:  # [..., n] -> [..., n]
    """Scale each position to root-mean-square 1, then by weight: LayerNorm without the mean."""
    return weight * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """Affine map; Hugging Face stores weight as [n_out, n_in], so x @ weight.T."""
    # [..., n_in] -> [..., n_out] as one 2-D product (a 3-D x @ w reads w once per sample)
    y = (x.reshape(-1, x.shape[-1]) @ weight.T).reshape(*x.shape[:-1], weight.shape[0])
    return y if bias is None else y + bias


def rope_angles(n_past: int, n_seq: int, d_head: int, rope_theta: float) -> tuple:
    """cos and sin of each position's angles, for positions n_past ... n_past + n_seq - 1."""
    # pair i turns at rope_theta ** (-2i / d_head) radians per position: fast pairs see
    # neighbours, slow ones whole documents. -> cos, sin [n_seq, d_head], halves alike
    inv_freq = rope_theta ** -(np.arange(0, d_head, 2) / d_head)  # [d_head // 2], float64
    angles = np.arange(n_past, n_past + n_seq)[:, None] * inv_freq  # [n_seq, d_head // 2]
    angles = np.concatenate([angles, angles], axis=-1)  # [n_seq, d_head]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Turn each pair (x[i], x[i + d_head // 2]) by its position's angle, as transformers does.

    happy-llm's Tiny-K and Meta's first LLaMA code turn adjacent pairs (x[2i], x[2i + 1]) instead.
    It is the same turn on permuted features: put the even features first, then the odd ones.
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((5, 8)).astype(np.float32)  # [n_seq, d_head]: one head's q
    >>> cos, sin = rope_angles(0, 5, 8, 10000.0)
    >>> def tiny_k_rope(x):  # Tiny-K's apply_rotary_emb: real part x[2i], imaginary x[2i + 1]
    ...     re, im, c, s = x[:, 0::2], x[:, 1::2], cos[:, :4], sin[:, :4]
    ...     out = np.empty_like(x)
    ...     out[:, 0::2], out[:, 1::2] = re * c - im * s, re * s + im * c
    ...     return out
    >>> evens_first = np.r_[0:8:2, 1:8:2]  # [0 2 4 6 1 3 5 7]
    >>> bool(np.allclose(rope(x[:, evens_first], cos, sin), tiny_k_rope(x)[:, evens_first]))
    True
    >>> bool(np.allclose(rope(x, cos, sin), tiny_k_rope(x)))  # the same weights, unpermuted
    False

    So a Tiny-K checkpoint runs here once each head's rows of q_proj and k_proj are permuted so.
    """
    # [..., n_seq, d_head], [n_seq, d_head] x2 -> [..., n_seq, d_head]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # (x, y) -> (-y, x)
    return x * cos + rotated * sin


def silu(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    """x * sigmoid(x), with sigmoid written through tanh so no exp can overflow."""
    return x * (0.5 + 0.5 * np.tanh(0.5 * x))


def swiglu(x: np.ndarray, gate_proj: dict, up_proj: dict, down_proj: dict) -> np.ndarray:
    """The MLP: one widening gates another (silu(gate) * up), then down_proj brings it back."""
    # [..., n_seq, n_embd] -> [..., n_seq, n_ffn] -> [..., n_seq, n_embd]
    return linear(silu(linear(x, **gate_proj)) * linear(x, **up_proj), **down_proj)


def grouped_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Causal attention, each key/value head serving n_head // n_kv_head query heads in a row."""
    # [..., n_head, n_q, d_head], [..., n_kv_head, n_k, d_head] x2 -> [..., n_head, n_q, d_head]
    # Query head h reads key/value head h // group, as transformers' repeat_kv; broadcasting the
    # key/value heads over their group reads them in place instead of copying them group times.
    *batch, n_head, n_q, d_head = q.shape
    n_kv_head = k.shape[-3]
    groups = q.reshape(*batch, n_kv_head, n_head // n_kv_head, n_q, d_head)
    out = causal_attention(groups, k[..., None, :, :], v[..., None, :, :])  # grouped like q
    return out.reshape(q.shape)


def gqa(x: np.ndarray, q_proj: dict, k_proj: dict, v_proj: dict, o_proj: dict,
        cos: np.ndarray, sin: np.ndarray, n_head: int, n_kv_head: int, norm_eps: float,
        q_norm: dict | None = None, k_norm: dict | None = None,
        attend=grouped_attention) -> np.ndarray:  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    """Grouped-query self-attention: n_head query heads over n_kv_head key/value heads."""
    q = split_heads(linear(x, **q_proj), n_head)  # [..., n_head, n_seq, d_head]
    k = split_heads(linear(x, **k_proj), n_kv_head)  # [..., n_kv_head, n_seq, d_head]
    v = split_heads(linear(x, **v_proj), n_kv_head)  # [..., n_kv_head, n_seq, d_head]
    if q_norm is not None:  # Qwen3: each head's q and k to a steady size before they turn
        q, k = rms_norm(q, **q_norm, eps=norm_eps), rms_norm(k, **k_norm, eps=norm_eps)
    heads = attend(rope(q, cos, sin), rope(k, cos, sin), v)  # [..., n_head, n_seq, d_head]
    return linear(merge_heads(heads), **o_proj)


def llama_block(x: np.ndarray, input_layernorm: dict, self_attn: dict,
                post_attention_layernorm: dict, mlp: dict, cos: np.ndarray, sin: np.ndarray,
                n_head: int, n_kv_head: int, norm_eps: float,
                attend=grouped_attention) -> np.ndarray:  # [..., n_seq, n_embd] -> same
    """One pre-norm block: attention, then the MLP, each added back onto the residual stream."""
    h = rms_norm(x, **input_layernorm, eps=norm_eps)
    x = x + gqa(h, **self_attn, cos=cos, sin=sin, n_head=n_head, n_kv_head=n_kv_head,
                norm_eps=norm_eps, attend=attend)
    return x + swiglu(rms_norm(x, **post_attention_layernorm, eps=norm_eps), **mlp)


def llama(ids, embed_tokens: dict, blocks: list, norm: dict, n_head: int, n_kv_head: int,
          d_head: int, rope_theta: float, norm_eps: float,
          lm_head: dict | None = None) -> np.ndarray:  # [..., n_seq] ids -> [..., n_seq, n_vocab]
    """Logits for the token after each input: embed, blocks (positions turn q and k), unembed."""
    ids = np.asarray(ids)
    x = embed_tokens["weight"][ids]  # [..., n_seq, n_embd]: no position table
    cos, sin = rope_angles(0, ids.shape[-1], d_head, rope_theta)  # [n_seq, d_head] each
    for block in blocks:
        x = llama_block(x, **block, cos=cos, sin=sin, n_head=n_head, n_kv_head=n_kv_head,
                        norm_eps=norm_eps)
    head = embed_tokens if lm_head is None else lm_head  # tied: the embedding unembeds too
    return linear(rms_norm(x, **norm, eps=norm_eps), **head)  # [..., n_seq, n_vocab]
