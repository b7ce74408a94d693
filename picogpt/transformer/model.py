"""The original encoder-decoder Transformer (Vaswani et al., 2017) in the style of model.py.

It holds what GPT-2 does not have: sinusoidal positions, padding and causal masks, cross-attention,
the encoder and the post-norm option; decoding.py beside it writes with it, a step at a time. The
math GPT-2 shares comes from picogpt/model.py. Params are nested dicts; parts that GPT-2 has too
keep GPT-2's names:

    {"embed": [n_vocab, d_model],            # shared by source, target and output, as in the paper
     "encoder": {"blocks": [{"attn", "mlp", "ln_1", "ln_2"}, ...], "ln_f": {g, b}},
     "decoder": {"blocks": [{"attn", "cross_attn", "mlp", "ln_1", "ln_2", "ln_3"}, ...],
                 "ln_f": {g, b}}}
    attn, cross_attn: {"q", "k", "v", "c_proj"}, each {"w": [d_model, d_model], "b": [d_model]}
    mlp: {"c_fc": {"w": [d_model, d_ff], ...}, "c_proj": {"w": [d_ff, d_model], ...}}

The paper could share one table because its source and target languages had one joint BPE
vocabulary. With two vocabularies (seed 004's Transformer: enc_voc_size, dec_voc_size and a pad
id for each), params hold "src_embed" [n_src_vocab, d_model] and "tgt_embed" [n_tgt_vocab,
d_model] instead of "embed", and may hold "out" {"w": [d_model, n_tgt_vocab], "b"}, an output
layer of its own (seed 004's fc) in place of the tied embedding; encode takes the source's pad
id and decode the target's.

`init_params` gives first weights in this layout, for backward.py beside it to train.
`norm_first` is True unless given: pre-norm, as GPT-2 and every couplet model picogpt trains
(their hparams.json say so); the paper's post-norm is norm_first=False.
Dropout is not here: it is the identity at inference. In training it would sit after the
embeddings plus positions, and on each sublayer's output before it is added to the residual.

Masks are additive float32 arrays shaped [..., n_q, n_k]: 0 where a query may look at a key,
NEG where it may not. They combine by adding (`padding_mask(tgt) + causal_mask(n)` is
[..., n, n]) and broadcast over the batch by NumPy's rules; attention adds a head axis.
"""

import numpy as np

from ..model import attention, ffn, future_mask, layer_norm, linear, merge_heads, split_heads

NEG = -1e10  # model.future_mask's: exp(NEG - max) is 0 in float32; NEG + NEG is finite


def sinusoidal_positions(n_pos: int, d_model: int,
                         base: float = 10000.0) -> np.ndarray:  # -> [n_pos, d_model]
    """PE(pos, 2i) = sin(pos / base^(2i/d_model)), PE(pos, 2i+1) = cos(the same angle).

    The paper's base is 10000; a tutorial's small table may use another (seed 000: 100).
    """
    assert d_model % 2 == 0, "sines and cosines come in pairs"
    pos = np.arange(n_pos)[:, None]  # [n_pos, 1]
    angle = pos / base ** (np.arange(0, d_model, 2) / d_model)  # [n_pos, d_model / 2], float64
    pe = np.empty((n_pos, d_model), np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def padding_mask(ids: np.ndarray, pad_id: int) -> np.ndarray:  # [..., n_seq] -> [..., 1, n_seq]
    """No query may look at a padding token: NEG in the columns of pad_id."""
    return np.where(ids == pad_id, np.float32(NEG), np.float32(0))[..., None, :]


def causal_mask(n: int) -> np.ndarray:  # -> [n, n]
    """Query i may look at keys 0..i only: NEG above the diagonal, as in GPT-2's mha."""
    return future_mask(n, n, np.float32)


def relu(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    """The 2017 feed-forward activation; GPT-2 uses gelu."""
    return np.maximum(x, np.float32(0))


def multi_head_attention(x: np.ndarray, memory: np.ndarray, q: dict, k: dict, v: dict,
                         c_proj: dict, n_head: int, mask: np.ndarray) -> np.ndarray:
    """Attention of x's positions over memory's: self-attention when memory is x."""
    # [..., n_q, d_model], [..., n_k, d_model], mask [..., n_q, n_k] -> [..., n_q, d_model]
    heads = attention(split_heads(linear(x, **q), n_head),  # [..., n_head, n_q, d_head]
                      split_heads(linear(memory, **k), n_head),  # [..., n_head, n_k, d_head]
                      split_heads(linear(memory, **v), n_head),
                      np.expand_dims(mask, -3))  # [..., 1, n_q, n_k]: one mask for every head
    return linear(merge_heads(heads), **c_proj)


def residual(x: np.ndarray, sublayer, ln: dict, norm_first: bool) -> np.ndarray:
    """Add a sublayer's output to x: normalise after the sum (2017) or its input (GPT-2)."""
    # [..., n_seq, d_model] -> [..., n_seq, d_model]
    if norm_first:
        return x + sublayer(layer_norm(x, **ln))
    return layer_norm(x + sublayer(x), **ln)


def encoder_layer(x: np.ndarray, attn: dict, mlp: dict, ln_1: dict, ln_2: dict, n_head: int,
                  mask: np.ndarray, norm_first: bool = True) -> np.ndarray:
    """Self-attention over the whole source, then the feed-forward net."""
    # [..., n_src, d_model], mask [..., n_src, n_src] or [..., 1, n_src] -> [..., n_src, d_model]
    x = residual(x, lambda h: multi_head_attention(h, h, **attn, n_head=n_head, mask=mask),
                 ln_1, norm_first)
    return residual(x, lambda h: ffn(h, **mlp, activation=relu), ln_2, norm_first)


def decoder_layer(x: np.ndarray, memory: np.ndarray, attn: dict, cross_attn: dict, mlp: dict,
                  ln_1: dict, ln_2: dict, ln_3: dict, n_head: int, mask: np.ndarray,
                  memory_mask: np.ndarray, norm_first: bool = True) -> np.ndarray:
    """Masked self-attention, then attention over the encoder's output, then feed-forward."""
    # [..., n_tgt, d_model], [..., n_src, d_model] -> [..., n_tgt, d_model]
    x = residual(x, lambda h: multi_head_attention(h, h, **attn, n_head=n_head, mask=mask),
                 ln_1, norm_first)
    x = residual(x, lambda h: multi_head_attention(h, memory, **cross_attn, n_head=n_head,
                                                   mask=memory_mask), ln_2, norm_first)
    return residual(x, lambda h: ffn(h, **mlp, activation=relu), ln_3, norm_first)


def embed(ids: np.ndarray, table: np.ndarray) -> np.ndarray:  # [..., n_seq] -> [..., n_seq, d]
    """Token embeddings scaled by sqrt(d_model), plus sinusoidal positions."""
    n_seq, d_model = ids.shape[-1], table.shape[-1]
    return table[ids] * np.float32(d_model**0.5) + sinusoidal_positions(n_seq, d_model)


def tables(params: dict) -> tuple[np.ndarray, np.ndarray]:
    """The source's and the target's embedding tables: one shared table, or one each."""
    if "embed" in params:
        return params["embed"], params["embed"]
    return params["src_embed"], params["tgt_embed"]


def logits(x: np.ndarray, params: dict) -> np.ndarray:
    """Scores over the target vocabulary: the output layer if params has one, else the target
    embedding, transposed (tied, as in the paper and GPT-2)."""
    # [..., n_tgt, d_model] -> [..., n_tgt, n_tgt_vocab]
    if "out" in params:
        return linear(x, **params["out"])
    return x @ tables(params)[1].T


def encode(src_ids: np.ndarray, params: dict, n_head: int, pad_id: int,
           norm_first: bool = True) -> np.ndarray:  # [..., n_src] -> [..., n_src, d_model]
    """The encoder's output ("memory") for a batch of sources padded with pad_id."""
    x, mask = embed(src_ids, tables(params)[0]), padding_mask(src_ids, pad_id)
    for block in params["encoder"]["blocks"]:
        x = encoder_layer(x, **block, n_head=n_head, mask=mask, norm_first=norm_first)
    return layer_norm(x, **params["encoder"]["ln_f"])  # torch.nn.Transformer ends with a norm


def decode(tgt_ids: np.ndarray, memory: np.ndarray, params: dict, n_head: int, pad_id: int,
           memory_mask: np.ndarray, norm_first: bool = True) -> np.ndarray:
    """The decoder's output for targets so far, padded with pad_id; `logits` scores it."""
    # [..., n_tgt], [..., n_src, d_model], memory_mask [..., 1, n_src] -> [..., n_tgt, d_model]
    x = embed(tgt_ids, tables(params)[1])
    mask = padding_mask(tgt_ids, pad_id) + causal_mask(tgt_ids.shape[-1])  # [..., n_tgt, n_tgt]
    for block in params["decoder"]["blocks"]:
        x = decoder_layer(x, memory, **block, n_head=n_head, mask=mask,
                          memory_mask=memory_mask, norm_first=norm_first)
    return layer_norm(x, **params["decoder"]["ln_f"])


def init_params(hparams: dict, rng: np.random.Generator) -> dict:  # -> params, as above
    """First weights with one table ("embed") for source, target and output: each matrix
    Xavier-uniform (torch.nn.Transformer's), the table normal(0, 1 / sqrt(d_model)), biases 0,
    layer-norm gains 1. hparams: n_vocab, n_embd (d_model), n_layer (each stack's, or the
    encoder's when n_dec_layer is given), d_ff (4 * n_embd if not given)."""
    d_model, n_layer = hparams["n_embd"], hparams["n_layer"]
    n_dec_layer, d_ff = hparams.get("n_dec_layer", n_layer), hparams.get("d_ff", 4 * d_model)

    # Xavier keeps the variance of x @ w near x's, forward and back, and starts attention away
    # from uniform; GPT-2's normal(0, 0.02) starts it near uniform, on a plateau. Learning a
    # mapping through cross-attention (2 + 2 layers, d_model 128, 300 steps at lr 3e-3), that
    # ended at 4.6 nats where Xavier reached 1.0 (the two were equal at lr 1e-3).
    def weights(n_in, n_out):  # {"w": [n_in, n_out], "b": [n_out]}
        limit = (6 / (n_in + n_out)) ** 0.5
        return {"w": rng.uniform(-limit, limit, (n_in, n_out)).astype(np.float32),
                "b": np.zeros(n_out, np.float32)}

    def norm():
        return {"g": np.ones(d_model, np.float32), "b": np.zeros(d_model, np.float32)}

    def block(n_attn):  # n_attn: 1 in the encoder, 2 (self and cross) in the decoder
        attns = {name: {part: weights(d_model, d_model) for part in ("q", "k", "v", "c_proj")}
                 for name in ("attn", "cross_attn")[:n_attn]}
        return {**attns, **{f"ln_{i}": norm() for i in range(1, n_attn + 2)},
                "mlp": {"c_fc": weights(d_model, d_ff), "c_proj": weights(d_ff, d_model)}}

    # embed multiplies by sqrt(d_model): rows of variance 1 beside the positions' 1/2, and the
    # tied output's logits start with a variance near 1
    table = rng.normal(0.0, d_model**-0.5, (hparams["n_vocab"], d_model)).astype(np.float32)
    return {"embed": table,
            "encoder": {"blocks": [block(1) for _ in range(n_layer)], "ln_f": norm()},
            "decoder": {"blocks": [block(2) for _ in range(n_dec_layer)], "ln_f": norm()}}

