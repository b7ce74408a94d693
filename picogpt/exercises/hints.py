"""The slips learners make in the ten functions, each as a hint and as code that makes it.

Owns `HINTS` (what to look at, never the answer line; English, translated when printed) and
`SLIPS`: for each function, versions of it with one known slip, written here from picogpt's
own pieces. A function that fails is compared with each of its slips on the same inputs; the
hint of the one that matches names the likely bug. Must not print or read files.
"""

import math

import numpy as np

from picogpt import model
from picogpt.errors import N_

HINTS = {
    "unbiased": N_(
        "your output matches the unbiased variance (a division by n_embd - 1, as torch's "
        "x.std() and seed 003's LayerNorm make). GPT-2 divides by n_embd: look at how you "
        "measure each row's spread."),
    "eps_outside": N_(
        "on nearly constant rows your output matches eps added outside the square root. Look "
        "at where eps sits relative to the root."),
    "softmax_max": N_(
        "large logits give inf or nan: np.exp overflows float32 above about 88. Look at what "
        "you do to x before np.exp; softmax is unchanged when every entry of a row has the same "
        "number subtracted."),
    "softmax_shift": N_(
        "your output matches softmax with a maximum subtracted that is not each row's own (the "
        "whole array's, or each column's). softmax is unchanged only when every entry of a row "
        "has the same number subtracted, and a row far below the whole array's maximum becomes "
        "0 / 0 = nan. Look at which maximum you take."),
    "softmax_axis": N_(
        "each row of your output should sum to 1, and does not: your output matches exp_x "
        "divided by sums taken along another axis (or over the whole array). Each row holds one "
        "position's scores; look at which axis np.sum adds along."),
    "erf": N_(
        "your output matches GELU's exact form with erf, up to 5e-4 away from the tanh form "
        "GPT-2 was trained with. Look at which formula you wrote."),
    "relu": N_(
        "your output matches ReLU: every negative input became 0. GPT-2's feed-forward network "
        "uses GELU; look at the activation."),
    "float64": N_(
        "since NumPy 2 (NEP 50) a NumPy float64 scalar, "
        "such as what np.sqrt returns for a Python number, turns a float32 array into float64, "
        "and np.tri makes float64 unless told otherwise. Look at each constant and array you "
        "make inside the function."),
    "scale": N_(
        "your output matches attention whose scores are not divided by sqrt(d_head), or are "
        "divided by d_head. Look at how q @ k.T is scaled; d_head is the length of q's last "
        "axis."),
    "mask": N_(
        "a position sees later positions, or cannot see earlier ones. Look at whether a causal "
        "mask is added to the scores at all, and at which side of the diagonal it puts -1e10: "
        "row i is query i, which may look at keys 0 to i only."),
    "heads": N_(
        "the heads mix positions. Look at how q, k and v are cut into n_head heads and put back "
        "together: each head takes a slice of the features (the last axis) at every position, "
        "while a reshape straight to [n_head, n_seq, d_head] takes runs of positions instead."),
    "postnorm": N_(
        "your output matches a post-norm block (normalised after the addition, as the 2017 "
        "Transformer), or one that normalises the residual stream itself (seed 003). GPT-2 is "
        "pre-norm: look "
        "at what goes into mha and ffn, and what is added back onto x."),
    "wpe_inputs": N_(
        "the position embeddings follow the token ids (wpe[inputs], a slip of seed 001's "
        "text). Look at how you index wpe: its rows are positions 0, 1, 2, ..."),
    "no_ln_f": N_(
        "the last block's output reaches wte.T without the final layer norm. Look at what "
        "happens between the last block and the unembedding."),
    "linear_t": N_(
        "your output matches x @ w.T + b. The checkpoint stores w as [n_in, n_out]; look at "
        "whether w needs turning round at all."),
    "cross_self": N_(
        "your output matches self-attention over x: the keys and values come from x. In "
        "cross-attention only the queries come from x (the decoder's positions); the keys and "
        "values come from memory, the encoder's output."),
    "cross_swapped": N_(
        "your output matches queries made from memory and keys and values from x: one row per "
        "position of memory. Each of x's positions asks (its query), and memory's positions "
        "answer (their keys and values)."),
    "cross_causal": N_(
        "your output matches cross-attention with a causal mask. The mask that hides later "
        "positions belongs to the decoder's self-attention; in cross-attention every position of "
        "x may look at every position of memory, since the encoder read the whole source."),
    "no_c_proj": N_(
        "your output matches the heads joined but not passed through c_proj. After the heads are "
        "put back together, one more linear layer mixes them: look at what you return."),
    "rms_mean": N_(
        "your output matches rows with their mean taken away first, as layer_norm does. RMSNorm "
        "only divides by the root mean square of each row: no mean is subtracted, no bias "
        "added."),
    "rms_eps_outside": N_(
        "on small rows your output matches eps added outside the square root. Look at where eps "
        "sits relative to the root: it belongs with the mean of the squares."),
    "rms_no_root": N_(
        "your output matches rows divided by their mean square, not its square root. Look at "
        "what the mean of x * x is, and what a root mean square needs after it."),
    "rope_pairs": N_(
        "your output matches a turn of neighbouring pairs (x[2i], x[2i + 1]), as happy-llm's "
        "Tiny-K and Meta's first LLaMA code do. transformers, and so every Hugging Face "
        "checkpoint, pairs x[i] with x[i + d_head / 2]: look at how you cut the last axis."),
    "rope_direction": N_(
        "your output matches a turn by the opposite angle. A pair (a, b) turned by an angle "
        "becomes (a cos - b sin, a sin + b cos); look at the sign of each sin term."),
    "position": N_(
        "the next token is taken from the wrong place. Row i of the logits predicts the token "
        "after position i; look at which row you give np.argmax."),
}


def gelu_erf(x):
    """GELU's exact form, 0.5 x (1 + erf(x / sqrt 2)), kept in x's dtype."""
    return (0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))).astype(x.dtype)


def relu(x):
    """ReLU, for GELU."""
    return np.maximum(x, 0)


def softmax_slip(x, shift="row", axis=-1):
    """softmax subtracting the maximum of each row, of each column, of the whole array ("all")
    or nothing (None) first, and dividing by sums along axis (-1, 0, or None: the whole array)."""
    maximum = {"row": lambda: np.max(x, axis=-1, keepdims=True),
               "column": lambda: np.max(x, axis=0, keepdims=True),
               "all": lambda: np.max(x), None: lambda: 0}[shift]()
    exp_x = np.exp(x - maximum)
    return exp_x / np.sum(exp_x, axis=axis, keepdims=True)


def softmax_slips() -> list:
    """Each wrong pairing of softmax's maximum and its sum, with its hints: the sum's axis
    (softmax_axis), nothing subtracted (softmax_max: overflow), another maximum (softmax_shift)."""
    shift_hint = {"row": (), None: ("softmax_max",), "column": ("softmax_shift",),
                  "all": ("softmax_shift",)}
    return [(("softmax_axis",) * (axis != -1) + shift_hint[shift],
             lambda x, shift=shift, axis=axis: softmax_slip(x, shift, axis))
            for shift in (None, "row", "column", "all") for axis in (-1, 0, None)
            if (shift, axis) != ("row", -1)]


def layer_norm_slip(x, g, b, eps=1e-5, ddof=0, std_plus_eps=False):
    """layer_norm dividing by n - ddof, with eps inside the root or (std_plus_eps) outside."""
    centred = x - np.mean(x, axis=-1, keepdims=True)
    variance = np.sum(centred * centred, axis=-1, keepdims=True) / (x.shape[-1] - ddof)
    return g * centred / (np.sqrt(variance) + eps if std_plus_eps else np.sqrt(variance + eps)) + b


def attention_slip(q, k, v, mask, scale=0.5, use_mask=True):
    """attention dividing the scores by d_head ** scale, with or without the mask."""
    scores = q @ k.T / q.shape[-1] ** scale + (mask if use_mask else 0)
    return model.softmax(scores) @ v


def split_by_features(x, n_head):  # [n_seq, n_embd] -> [n_head, n_seq, d_head]
    """The right split: each head a slice of the features at every position."""
    return x.reshape(x.shape[0], n_head, -1).transpose(1, 0, 2)


def split_by_positions(x, n_head):  # [n_seq, n_embd] -> [n_head, n_seq, d_head]
    """The slip: a reshape straight to [n_head, n_seq, d_head]."""
    return x.reshape(n_head, x.shape[0], -1)


def merge_features(h):  # [n_head, n_seq, d_head] -> [n_seq, n_embd]
    """The right merge: the heads' slices side by side at each position."""
    return h.transpose(1, 0, 2).reshape(h.shape[1], -1)


def merge_positions(h):  # [n_head, n_seq, d_head] -> [n_seq, n_embd]
    """The slip: a reshape straight back to [n_seq, n_embd]."""
    return h.reshape(h.shape[1], -1)


def causal(n, dtype):  # -> [n, n]
    """The right mask: -1e10 above the diagonal."""
    return (1 - np.tri(n, dtype=dtype)) * -1e10


def mha_slip(x, c_attn, c_proj, n_head, mask=causal, split=split_by_features,
             merge=merge_features, projected=True):
    """mha, one head at a time as seed 001, with the mask, split and merge given, and the heads
    joined through c_proj or not (projected)."""
    q, k, v = (split(a, n_head) for a in np.split(model.linear(x, **c_attn), 3, axis=-1))
    m = mask(x.shape[0], x.dtype)
    heads = np.stack([model.attention(q[h], k[h], v[h], m) for h in range(n_head)])
    return model.linear(merge(heads), **c_proj) if projected else merge(heads)


def block_slip(x, mlp, attn, ln_1, ln_2, n_head, post=(True, True), seed_003=False):
    """A block normalised after each addition (post[0] for attention, post[1] for the MLP),
    or seed 003's, which normalises the residual stream itself."""
    if seed_003:  # x = norm(x); h = x + attn(x); out = h + ffn(norm(h))
        x = model.layer_norm(x, **ln_1)
        x = x + model.mha(x, **attn, n_head=n_head)
        return x + model.ffn(model.layer_norm(x, **ln_2), **mlp)
    for post_norm, ln, sublayer in ((post[0], ln_1, lambda h: model.mha(h, **attn,
                                                                       n_head=n_head)),
                                    (post[1], ln_2, lambda h: model.ffn(h, **mlp))):
        x = (model.layer_norm(x + sublayer(x), **ln) if post_norm
             else x + sublayer(model.layer_norm(x, **ln)))
    return x


def gpt2_slip(inputs, wte, wpe, blocks, ln_f, n_head, by_ids=False, final_norm=True):
    """gpt2 with wpe indexed by the ids (by_ids), or without ln_f."""
    x = wte[inputs] + (wpe[inputs] if by_ids else wpe[: len(inputs)])
    for block in blocks:
        x = model.transformer_block(x, **block, n_head=n_head)
    return (model.layer_norm(x, **ln_f) if final_norm else x) @ wte.T


def generate_first_row(inputs, params, n_head, n_tokens_to_generate):
    """generate taking each next token from the logits' first row."""
    ids = list(inputs)
    for _ in range(n_tokens_to_generate):
        ids = [*ids, int(np.argmax(model.gpt2(ids, **params, n_head=n_head)[0]))]
    return ids[len(inputs):]


def upper(n, dtype):  # -> [n, n]
    """The mask the wrong way round: each position sees itself and the later ones."""
    return causal(n, dtype).T


def cross_slip(x, memory, q, k, v, c_proj, n_head, asks="x", answers="memory", masked=False,
               split=split_by_features, merge=merge_features, projected=True):
    """cross-attention with queries from asks and keys and values from answers, optionally
    (masked) under a causal mask, the split and merge given, and the heads joined through c_proj
    or not (projected); one head at a time."""
    source = {"x": x, "memory": memory}
    heads = [split(model.linear(source[asks], **q), n_head),
             split(model.linear(source[answers], **k), n_head),
             split(model.linear(source[answers], **v), n_head)]
    n_q, n_k = heads[0].shape[1], heads[1].shape[1]
    mask = (1 - np.tri(n_q, n_k, dtype=x.dtype)) * -1e10 if masked else np.zeros((n_q, n_k),
                                                                                  x.dtype)
    out = np.stack([model.attention(*(h[i] for h in heads), mask) for i in range(n_head)])
    return model.linear(merge(out), **c_proj) if projected else merge(out)


def rms_norm_slip(x, weight, eps, mean=False, eps_outside=False, root=True):
    """RMSNorm with the mean taken away first (mean), eps outside the root, or no root."""
    if mean:
        x = x - x.mean(axis=-1, keepdims=True)
    square = np.mean(x * x, axis=-1, keepdims=True)
    if not root:
        return weight * (x / (square + np.float32(eps)))
    if eps_outside:
        return weight * (x / (np.sqrt(square) + np.float32(eps)))
    return weight * (x / np.sqrt(square + np.float32(eps)))


def rope_slip(x, cos, sin, neighbours=False, sign=1):
    """rope turning neighbouring pairs (neighbours), or by the opposite angle (sign -1)."""
    half = x.shape[-1] // 2
    if neighbours:  # pair (x[2i], x[2i + 1]), each at pair i's angle
        a, b, c, s = x[..., 0::2], x[..., 1::2], cos[..., :half], sign * sin[..., :half]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * (sign * sin)


SLIPS = {  # function -> [(hint keys, the function with that slip)], tried in this order
    "gelu": [(("erf",), gelu_erf), (("relu",), relu)],
    "softmax": softmax_slips(),
    "layer_norm": [
        (("unbiased",), lambda x, g, b: layer_norm_slip(x, g, b, ddof=1)),
        (("unbiased", "eps_outside"), lambda x, g, b: layer_norm_slip(x, g, b, ddof=1,
                                                                       std_plus_eps=True)),
        (("eps_outside",), lambda x, g, b: layer_norm_slip(x, g, b, std_plus_eps=True))],
    "linear": [(("linear_t",), lambda x, w, b: x @ w.T + b)],
    "ffn": [(("relu",), lambda x, c_fc, c_proj: model.ffn(x, c_fc, c_proj, activation=relu))],
    "attention": [(("scale",), lambda *a: attention_slip(*a, scale=0)),
                  (("scale",), lambda *a: attention_slip(*a, scale=1)),
                  (("mask",), lambda *a: attention_slip(*a, use_mask=False))],
    "mha": [(("mask",), lambda x, **a: mha_slip(x, **a, mask=upper)),
            (("mask",), lambda x, **a: mha_slip(x, **a, mask=lambda n, t: np.zeros((n, n), t))),
            (("mask",), lambda x, **a: mha_slip(x, **a, mask=lambda n, t: np.tri(n, dtype=t)
                                                * -1e10)),
            (("heads",), lambda x, **a: mha_slip(x, **a, split=split_by_positions,
                                                 merge=merge_positions)),
            (("heads",), lambda x, **a: mha_slip(x, **a, split=split_by_positions)),
            (("heads",), lambda x, **a: mha_slip(x, **a, merge=merge_positions)),
            (("no_c_proj",), lambda x, **a: mha_slip(x, **a, projected=False))],
    "transformer_block": [(("postnorm",), lambda x, p=post, **a: block_slip(x, **a, post=p))
                          for post in ((True, True), (True, False), (False, True))] + [
                          (("postnorm",), lambda x, **a: block_slip(x, **a, seed_003=True))],
    "gpt2": [(("wpe_inputs",), lambda ids, **a: gpt2_slip(ids, **a, by_ids=True)),
             (("no_ln_f",), lambda ids, **a: gpt2_slip(ids, **a, final_norm=False)),
             (("wpe_inputs", "no_ln_f"), lambda ids, **a: gpt2_slip(ids, **a, by_ids=True,
                                                                    final_norm=False))],
    "generate": [(("position",), generate_first_row)],
    "cross_attention": [
        (("cross_self",), lambda x, memory, **a: cross_slip(x, memory, **a, answers="x")),
        (("cross_swapped",), lambda x, memory, **a: cross_slip(x, memory, **a, asks="memory",
                                                              answers="x")),
        (("cross_causal",), lambda x, memory, **a: cross_slip(x, memory, **a, masked=True)),
        (("heads",), lambda x, memory, **a: cross_slip(x, memory, **a, split=split_by_positions,
                                                      merge=merge_positions)),
        (("no_c_proj",), lambda x, memory, **a: cross_slip(x, memory, **a, projected=False))],
    "rms_norm": [(("rms_mean",), lambda x, **a: rms_norm_slip(x, **a, mean=True)),
                 (("rms_eps_outside",), lambda x, **a: rms_norm_slip(x, **a, eps_outside=True)),
                 (("rms_no_root",), lambda x, **a: rms_norm_slip(x, **a, root=False))],
    "rope": [(("rope_pairs",), lambda x, **a: rope_slip(x, **a, neighbours=True)),
             (("rope_direction",), lambda x, **a: rope_slip(x, **a, sign=-1)),
             (("rope_pairs", "rope_direction"), lambda x, **a: rope_slip(x, **a, neighbours=True,
                                                                         sign=-1))],
}
