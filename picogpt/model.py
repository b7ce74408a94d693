"""GPT-2's forward pass as pure NumPy functions, from `gelu` up to `gpt2`.

Owns the math only: it takes arrays and returns new ones. It must not do I/O, keep state, pick
tokens or import anything but NumPy. Argument names are the checkpoint's and hparams.json's, so
a params dict splats straight in: `gpt2(ids, **params, n_head=hparams["n_head"])`.

Everything stays float32. Constants are Python floats on purpose: under NumPy 2's promotion rules
a NumPy float64 scalar such as `np.sqrt(2 / np.pi)` would turn every float32 array it touches into
float64 and halve the speed.
"""

import numpy as np


def gelu(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    """GELU activation in the tanh form GPT-2 was trained with."""
    # x * x * x, not x**3: NumPy's float32 power is ~300x slower than two multiplies
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


def softmax(x: np.ndarray) -> np.ndarray:  # [..., n] -> [..., n]
    """Turn scores into probabilities along the last axis."""
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))  # the shift keeps exp from overflowing
    # divided in place: exp_x is this function's own array, and attention's scores are the
    # largest arrays of a long prompt, where each copy costs time
    exp_x /= np.sum(exp_x, axis=-1, keepdims=True)
    return exp_x


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Normalise each position to mean 0 and variance 1, then scale by g and shift by b."""
    centred = x - np.mean(x, axis=-1, keepdims=True)  # [..., n_seq, n_embd]
    variance = np.mean(centred * centred, axis=-1, keepdims=True)  # [..., n_seq, 1]
    return g * centred / np.sqrt(variance + eps) + b  # [..., n_seq, n_embd]


# [..., n_seq, n_in] -> [..., n_seq, n_out]
def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Affine map; the checkpoint stores w as [n_in, n_out]."""
    # one 2-D product for all rows: NumPy runs [n_batch, n_seq, n_in] @ w as one product per
    # sample, reading w n_batch times, and reading w is most of a decode step's time
    return (x.reshape(-1, x.shape[-1]) @ w + b).reshape(*x.shape[:-1], w.shape[-1])


# [..., n_seq, n_embd] -> [..., n_seq, n_embd]
def ffn(x: np.ndarray, c_fc: dict, c_proj: dict, activation=gelu) -> np.ndarray:
    """Position-wise MLP: widen to 4 * n_embd, GELU (the 2017 Transformer: ReLU), project back."""
    return linear(activation(linear(x, **c_fc)), **c_proj)  # via [..., n_seq, 4 * n_embd]


def attention_weights(q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """How much each query attends to each key: softmax of the scaled dot products."""
    # [..., n_new, d_head], [..., n_all, d_head], [n_new, n_all] -> [..., n_new, n_all]
    # q is scaled, not the scores: it is the smaller array (and dividing by 8, GPT-2's
    # sqrt(d_head), is exact either way)
    scores = (q / q.shape[-1] ** 0.5) @ k.swapaxes(-1, -2)
    scores += mask  # in place, as in softmax
    return softmax(scores)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Scaled dot-product attention, for one head or a stack of heads."""
    # [..., n_new, d_head], [..., n_all, d_head] x2, [n_new, n_all] -> [..., n_new, d_head]
    return attention_weights(q, k, mask) @ v


def attention_after_prompt(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray,
                           k_prompt: np.ndarray, v_prompt: np.ndarray) -> np.ndarray:
    """attention with a prompt's keys and values put before every row's own k and v: the
    batch's rows all continue that prompt, which is held once instead of copied for each."""
    # [n_batch, n_head, n_new, d_head], [n_batch, n_head, n_own, d_head] x2,
    # [n_new, n_prompt + n_own], [n_head, n_prompt, d_head] x2 -> [n_batch, n_head, n_new, d_head]
    q = q / q.shape[-1] ** 0.5
    scores = np.concatenate([q @ k_prompt.swapaxes(-1, -2), q @ k.swapaxes(-1, -2)], axis=-1)
    scores += mask  # in place, as in attention_weights
    weights = softmax(scores)  # [n_batch, n_head, n_new, n_prompt + n_own]
    n_prompt = k_prompt.shape[-2]
    return weights[..., :n_prompt] @ v_prompt + weights[..., n_prompt:] @ v


def future_mask(n_new: int, n_all: int, dtype) -> np.ndarray:  # -> [n_new, n_all]
    """-1e10 where a query would see a later position: query i sits at n_all - n_new + i."""
    return (1 - np.tri(n_new, n_all, k=n_all - n_new, dtype=dtype)) * -1e10


# [..., n_seq, n_embd] -> [..., n_head, n_seq, d_head]
def split_heads(x: np.ndarray, n_head: int) -> np.ndarray:
    """View the embedding as n_head slices of d_head features each."""
    *batch, n_seq, n_embd = x.shape
    return x.reshape(*batch, n_seq, n_head, n_embd // n_head).swapaxes(-3, -2)


# [..., n_head, n_seq, d_head] -> [..., n_seq, n_embd]
def merge_heads(x: np.ndarray) -> np.ndarray:
    """Put the heads' slices side by side again: the inverse of split_heads."""
    *batch, n_head, n_seq, d_head = x.shape
    return x.swapaxes(-3, -2).reshape(*batch, n_seq, n_head * d_head)


def with_room(past: np.ndarray, n_room: int, batch: tuple = ()) -> np.ndarray:
    """past in a buffer with room for n_room more rows (copied for each of batch's rows)."""
    # [..., n_past, n_embd] -> [*batch or ..., n_past, n_embd], a view extend can fill in place:
    # a caller that knows how long the sequence gets avoids extend's doubling
    *lead, n_past, n_embd = past.shape
    buffer = np.empty((*(batch or lead), n_past + n_room + 1, n_embd), past.dtype)
    buffer[..., :n_past, :] = past
    buffer[..., n_past, 0] = np.nan  # extend's mark: the rows from here on are free
    return buffer[..., :n_past, :]


def extend(past: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The rows of past followed by those of new, copying past only when it has no spare room."""
    # [..., n_past, n_embd], [..., n_new, n_embd] -> [..., n_past + n_new, n_embd]
    # Re-copying the whole cache every step cost more than attention itself at long contexts,
    # so cache arrays are views of a buffer with room to grow. A NaN just past a view marks
    # that room as free; once a call fills it, extending the same view again copies instead,
    # so every cache a caller holds keeps its values.
    n_past, n_all = past.shape[-2], past.shape[-2] + new.shape[-2]
    buffer = past.base
    if not (isinstance(buffer, np.ndarray) and buffer.shape[:-2] == new.shape[:-2]
            and buffer.shape[-1] == new.shape[-1] and buffer.shape[-2] > n_all
            and buffer.ctypes.data == past.ctypes.data
            and np.isnan(buffer[..., n_past, 0]).all()):
        buffer = with_room(past, 2 * n_all - n_past, new.shape[:-2]).base  # doubling: rare copies
    buffer[..., n_past:n_all, :] = new
    buffer[..., n_all, 0] = np.nan
    return buffer[..., :n_all, :]


def mha(x: np.ndarray, c_attn: dict, c_proj: dict, n_head: int, kv: tuple | None = None,
        prompt_kv: tuple | None = None) -> tuple:
    """Causal multi-head self-attention; returns the output and this layer's keys and values.

    kv holds the keys and values of earlier positions; prompt_kv, those of a prompt that comes
    before them in every row of a batch (gpt2's prompt_cache).
    """
    # [..., n_new, n_embd], kv: ([..., n_past, n_embd],) * 2, prompt_kv: ([n_prompt, n_embd],) * 2
    # -> [..., n_new, n_embd], (k, v) of n_past + n_new positions
    q, k, v = np.split(linear(x, **c_attn), 3, axis=-1)  # [..., n_new, n_embd] each
    if kv is not None:  # prepend what earlier calls computed
        k, v = extend(kv[0], k), extend(kv[1], v)  # [..., n_past + n_new, n_embd]
    n_prompt = 0 if prompt_kv is None else prompt_kv[0].shape[-2]
    mask = future_mask(q.shape[-2], n_prompt + k.shape[-2], x.dtype)  # [n_new, n_all]
    q_h, k_h, v_h = (split_heads(a, n_head) for a in (q, k, v))
    if prompt_kv is None:
        heads = attention(q_h, k_h, v_h, mask)
    else:
        heads = attention_after_prompt(q_h, k_h, v_h, mask,
                                       *(split_heads(a, n_head) for a in prompt_kv))
    return linear(merge_heads(heads), **c_proj), (k, v)  # [..., n_new, n_embd]


def transformer_block(x: np.ndarray, mlp: dict, attn: dict, ln_1: dict, ln_2: dict, n_head: int,
                      kv: tuple | None = None, prompt_kv: tuple | None = None) -> tuple:
    """One pre-norm block: attention then MLP, each added back onto the residual stream."""
    # [..., n_new, n_embd], kv and prompt_kv as in mha -> [..., n_new, n_embd], (k, v)
    a, kv = mha(layer_norm(x, **ln_1), **attn, n_head=n_head, kv=kv, prompt_kv=prompt_kv)
    x = x + a
    return x + ffn(layer_norm(x, **ln_2), **mlp), kv


def residual_stream(inputs, wte: np.ndarray, wpe: np.ndarray, blocks: list, n_head: int,
                    cache: list | None = None, prompt_cache: list | None = None) -> tuple:
    """Embed the inputs and run them through every block: the last residual stream and cache."""
    # [..., n_new] ids, cache of (k, v) [..., n_past, n_embd], prompt_cache of (k, v)
    # [n_prompt, n_embd] -> [..., n_new, n_embd], cache
    inputs = np.asarray(inputs)
    n_past = cache[0][0].shape[-2] if cache else 0
    if prompt_cache:
        n_past += prompt_cache[0][0].shape[-2]
    x = wte[inputs] + wpe[n_past : n_past + inputs.shape[-1]]  # [..., n_new, n_embd]
    new_cache = []
    for block, kv, prompt_kv in zip(blocks, cache or [None] * len(blocks),
                                    prompt_cache or [None] * len(blocks)):
        x, kv = transformer_block(x, **block, n_head=n_head, kv=kv, prompt_kv=prompt_kv)
        new_cache.append(kv)
    return x, new_cache


def gpt2(inputs, wte: np.ndarray, wpe: np.ndarray, blocks: list, ln_f: dict, n_head: int,
         cache: list | None = None, prompt_cache: list | None = None):
    """Logits for the token after each input; with a cache, only the last one, plus the new cache.

    `cache=None` is the plain forward pass: `[n_seq]` ids -> `[n_seq, n_vocab]` logits, and a
    batch of rows, `[n_batch, n_seq]` ids, gives `[n_batch, n_seq, n_vocab]`.
    Otherwise `cache` holds one `(k, v)` per block, each `[..., n_past, n_embd]`, from an earlier
    call (`[]` to start one); the call returns `([..., n_vocab] logits, cache for n_past + n_new)`.
    `prompt_cache`, the cache of one prompt that every row continues, comes before `cache` in
    each row without being copied into it: several samples of one prompt share it.
    """
    x, new_cache = residual_stream(inputs, wte, wpe, blocks, n_head, cache, prompt_cache)
    if cache is None:
        return layer_norm(x, **ln_f) @ wte.T  # [..., n_seq, n_embd] -> [..., n_seq, n_vocab]
    # generating: only the last position's logits pick the next token, so skip the others
    return layer_norm(x[..., -1, :], **ln_f) @ wte.T, new_cache  # [..., n_vocab]
