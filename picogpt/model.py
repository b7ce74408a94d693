"""GPT-2's forward pass as pure NumPy functions, in reading order: from `gelu` up to `gpt2`.

Read this file first. It holds the math only: functions take arrays and return new ones, keep
no state, do no I/O, never pick a token, and import nothing but NumPy. Argument names are the
checkpoint's and hparams.json's, so a params dict splats in: `gpt2(ids, **params, n_head=12)`.
Leading batch dimensions pass through: `[n_seq, n_embd]` or `[n_batch, n_seq, n_embd]`.
Float32 throughout: constants are Python floats (since NumPy 2, NEP 50, a float64 scalar
upcasts every float32 array it touches). No KV cache: `mha` takes its attention step (`attend`).
"""

import numpy as np


def gelu(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    """GELU activation, in the tanh form GPT-2 was trained with."""
    # x * x * x, not x**3: NumPy's general power is 2-620x slower (docs/performance.md, x**3)
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


def softmax(x: np.ndarray) -> np.ndarray:  # [..., n] -> [..., n]
    """Turn scores into probabilities along the last axis."""
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))  # the shift keeps exp from overflowing
    exp_x /= np.sum(exp_x, axis=-1, keepdims=True)  # in place: exp_x is this function's own
    return exp_x


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Normalise each position to mean 0 and variance 1, then scale by g and shift by b."""
    centred = x - np.mean(x, axis=-1, keepdims=True)  # [..., n_seq, n_embd]
    variance = np.mean(centred * centred, axis=-1, keepdims=True)  # [..., n_seq, 1]
    return g * centred / np.sqrt(variance + eps) + b  # [..., n_seq, n_embd]


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Affine map; the checkpoint stores w as [n_in, n_out]."""
    # [..., n_in] -> [..., n_out] as one 2-D product (a 3-D x @ w reads w once per sample)
    return (x.reshape(-1, x.shape[-1]) @ w + b).reshape(*x.shape[:-1], w.shape[-1])


def ffn(x: np.ndarray, c_fc: dict, c_proj: dict, activation=gelu) -> np.ndarray:
    """Position-wise MLP: widen to 4 * n_embd, GELU (the 2017 Transformer: ReLU), project back."""
    # [..., n_seq, n_embd] -> [..., n_seq, 4 * n_embd] -> [..., n_seq, n_embd]
    return linear(activation(linear(x, **c_fc)), **c_proj)


def attention_scores(q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """How well each query matches each key, divided by sqrt(d_head), plus the mask."""
    # [..., n_q, d_head], [..., n_k, d_head], [n_q, n_k] -> [..., n_q, n_k]
    # q is scaled rather than the scores: it is the smaller array (dividing by 8 is exact)
    scores = (q / q.shape[-1] ** 0.5) @ k.swapaxes(-1, -2)
    scores += mask  # in place: the scores are a long prompt's largest arrays
    return scores


def attention_weights(q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """How much each query attends to each key: each row sums to 1."""
    return softmax(attention_scores(q, k, mask))  # [..., n_q, n_k]


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Scaled dot-product attention: each query's weighted mix of the values."""
    # [..., n_q, d_head], [..., n_k, d_head] x2, [n_q, n_k] -> [..., n_q, d_head]
    return attention_weights(q, k, mask) @ v


def future_mask(n_q: int, n_k: int, dtype) -> np.ndarray:  # -> [n_q, n_k]
    """-1e10 where a query would see a later position; query i sits at position n_k - n_q + i."""
    return (1 - np.tri(n_q, n_k, k=n_k - n_q, dtype=dtype)) * -1e10  # dtype: np.tri is float64


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """attention in which each position sees itself and the positions before it only."""
    # [..., n_q, d_head], [..., n_k, d_head] x2 -> [..., n_q, d_head]; n_k > n_q after a cache
    return attention(q, k, v, future_mask(q.shape[-2], k.shape[-2], q.dtype))


def split_heads(x: np.ndarray, n_head: int) -> np.ndarray:
    """View the embedding as n_head slices of d_head features each."""
    # [..., n_seq, n_embd] -> [..., n_head, n_seq, d_head]
    *batch, n_seq, n_embd = x.shape
    return x.reshape(*batch, n_seq, n_head, n_embd // n_head).swapaxes(-3, -2)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """Put the heads' slices side by side again: the inverse of split_heads."""
    # [..., n_head, n_seq, d_head] -> [..., n_seq, n_embd]
    *batch, n_head, n_seq, d_head = x.shape
    return x.swapaxes(-3, -2).reshape(*batch, n_seq, n_head * d_head)


def mha(x: np.ndarray, c_attn: dict, c_proj: dict, n_head: int,
        attend=causal_attention) -> np.ndarray:  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    """Causal multi-head self-attention: n_head attentions side by side, then mixed by c_proj."""
    q, k, v = np.split(linear(x, **c_attn), 3, axis=-1)  # [..., n_seq, n_embd] each
    heads = attend(*(split_heads(a, n_head) for a in (q, k, v)))  # [..., n_head, n_seq, d_head]
    return linear(merge_heads(heads), **c_proj)


def transformer_block(x: np.ndarray, mlp: dict, attn: dict, ln_1: dict, ln_2: dict,
                      n_head: int, attend=causal_attention) -> np.ndarray:
    """One pre-norm block: attention, then the MLP, each added back onto the residual stream."""
    # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head, attend=attend)
    x = x + ffn(layer_norm(x, **ln_2), **mlp)
    return x


def embed(inputs, wte: np.ndarray, wpe: np.ndarray, start: int = 0) -> np.ndarray:
    """Each token's row of wte plus its position's row of wpe; the first sits at start."""
    inputs = np.asarray(inputs)  # [..., n_seq] ids -> [..., n_seq, n_embd]
    return wte[inputs] + wpe[start : start + inputs.shape[-1]]


def gpt2(inputs, wte: np.ndarray, wpe: np.ndarray, blocks: list, ln_f: dict,
         n_head: int) -> np.ndarray:  # [..., n_seq] ids -> [..., n_seq, n_vocab]
    """Logits for the token after each input: token and position embeddings, blocks, unembed."""
    x = embed(inputs, wte, wpe)  # [..., n_seq, n_embd]
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    return layer_norm(x, **ln_f) @ wte.T  # [..., n_seq, n_vocab]: wte is also the unembedding
