"""The inside view of the 2017 encoder-decoder (transformer/model.py), as inside.py is GPT-2's.

It holds `trace_seq2seq`, the forward pass of a source and a target with every intermediate value
of the encoder and the decoder kept under TransformerLens's names (without `hook_`), and the 对位
("same position") score of the cross-attention's heads. It must not change or re-implement the
model: it runs transformer/model.py's own functions in `encode`'s and `decode`'s order (`embed`,
`residual`, the masks, `logits`) and model.py's `ffn` with transformer/model.py's ReLU. Only
`multi_head_attention` is opened into the steps `model.attention` takes (the scores, the softmax,
the weighted sum of the values), so that each has a name, as inside.py opens GPT-2's `mha`
through its attention step. Its output equals transformer/model.py's bit for bit (a test checks it).

Names, each block i of each stack (the encoder's, then the decoder's, "encoder." or "decoder."
in front): embed (the token rows times sqrt(d_model)), pos_embed (the sinusoids), then
blocks.{i}.resid_pre; attn.q, .k, .v ([n_head, n_q, d_head]), attn.attn_scores (scaled and
masked, [n_head, n_q, n_k]), attn.pattern (after the softmax: rows sum to 1), attn.z (the heads'
outputs before c_proj); attn_out; resid_mid; the decoder's cross_attn.* (the same, its keys and
values from the encoder's output), cross_attn_out, resid_mid_cross; mlp.pre and mlp.post (before
and after ReLU), mlp_out, resid_post; and each stack's ln_final (the encoder's is the memory the
decoder reads). With post-norm (norm_first False) each resid_* is the sum after its layer norm,
as transformer.residual makes it.
"""

from collections.abc import Callable, Collection

import numpy as np

from ..inside import job_weights
from ..model import attention_scores, ffn, layer_norm, linear, merge_heads, softmax, split_heads
from .model import (
    causal_mask,
    embed,
    logits,
    padding_mask,
    relu,
    residual,
    sinusoidal_positions,
    tables,
)

NO_PAD = -1  # no id is -1: a padding mask of zeros (the couplet task's sources are never padded)


def trace_seq2seq(src_ids, tgt_ids, params: dict, hparams: dict, pad_id: int = NO_PAD,
                  names: Collection[str] | None = None) -> tuple[np.ndarray, dict]:
    """The decoder's [n_tgt, n_vocab] logits for a source and a target read at once (teacher
    forcing: tgt_ids starts with the start token, and row t predicts tgt_ids' token t + 1), and
    the named intermediate values (the module's docstring lists them). hparams: n_head, and
    norm_first (True if not given, as the couplet task trains). `names` keeps only those."""
    n_head, norm_first = hparams["n_head"], hparams.get("norm_first", True)
    src_ids, tgt_ids = np.asarray(src_ids), np.asarray(tgt_ids)
    values = {}

    def keep(name: str, value: np.ndarray) -> None:
        if names is None or name in names:
            values[name] = value

    src_table, tgt_table = tables(params)
    memory_mask = padding_mask(src_ids, pad_id)  # [..., 1, n_src]: every query alike
    memory = stack("encoder", src_ids, src_table, params["encoder"], memory_mask, None, None,
                   n_head, norm_first, keep)
    mask = padding_mask(tgt_ids, pad_id) + causal_mask(tgt_ids.shape[-1])  # [..., n_tgt, n_tgt]
    out = stack("decoder", tgt_ids, tgt_table, params["decoder"], mask, memory, memory_mask,
                n_head, norm_first, keep)
    return logits(out, params), values  # [..., n_tgt, n_vocab]


def stack(side: str, ids: np.ndarray, table: np.ndarray, weights: dict, mask: np.ndarray,
          memory: np.ndarray | None, memory_mask: np.ndarray | None, n_head: int,
          norm_first: bool, keep: Callable[[str, np.ndarray], None]) -> np.ndarray:
    """transformer.encode (memory None) or transformer.decode, each value shown to keep under
    side's names: [..., n_seq] ids -> [..., n_seq, d_model], the stack's ln_final."""
    n_seq, d_model = ids.shape[-1], table.shape[-1]
    x = embed(ids, table)  # [..., n_seq, d_model]
    keep(f"{side}.embed", table[ids] * np.float32(d_model**0.5))  # embed's two parts
    keep(f"{side}.pos_embed", sinusoidal_positions(n_seq, d_model))
    for i, weights_i in enumerate(weights["blocks"]):
        x = block(x, weights_i, f"{side}.blocks.{i}.", mask, memory, memory_mask, n_head,
                  norm_first, keep)
    x = layer_norm(x, **weights["ln_f"])
    keep(f"{side}.ln_final", x)
    return x


def block(x: np.ndarray, weights: dict, at: str, mask: np.ndarray, memory: np.ndarray | None,
          memory_mask: np.ndarray | None, n_head: int, norm_first: bool,
          keep: Callable[[str, np.ndarray], None]) -> np.ndarray:
    """transformer.encoder_layer (memory None) or decoder_layer, each value shown to keep."""
    # [..., n_seq, d_model] -> [..., n_seq, d_model]

    def named(name: str, sublayer: Callable[[np.ndarray], np.ndarray]):  # its output: name_out
        return lambda h: kept(f"{at}{name}_out", sublayer(h), keep)

    keep(f"{at}resid_pre", x)
    x = residual(x, named("attn", lambda h: attend(h, h, **weights["attn"], n_head=n_head,
                                                   mask=mask, at=f"{at}attn.", keep=keep)),
                 weights["ln_1"], norm_first)
    keep(f"{at}resid_mid", x)
    if memory is not None:  # the decoder's cross-attention: its keys and values from memory
        x = residual(x, named("cross_attn", lambda h: attend(
            h, memory, **weights["cross_attn"], n_head=n_head, mask=memory_mask,
            at=f"{at}cross_attn.", keep=keep)), weights["ln_2"], norm_first)
        keep(f"{at}resid_mid_cross", x)
    x = residual(x, named("mlp", lambda h: ffn(h, **weights["mlp"], activation=lambda pre: (
        shown_relu(pre, at, keep)))), weights["ln_2" if memory is None else "ln_3"], norm_first)
    keep(f"{at}resid_post", x)
    return x


def attend(x: np.ndarray, memory: np.ndarray, q: dict, k: dict, v: dict, c_proj: dict,
           n_head: int, mask: np.ndarray, at: str,
           keep: Callable[[str, np.ndarray], None]) -> np.ndarray:
    """transformer.multi_head_attention, its steps named at `at` (attn. or cross_attn.)."""
    # [..., n_q, d_model], [..., n_k, d_model], mask [..., n_q, n_k] -> [..., n_q, d_model]
    qh = split_heads(linear(x, **q), n_head)  # [..., n_head, n_q, d_head]
    kh = split_heads(linear(memory, **k), n_head)  # [..., n_head, n_k, d_head]
    vh = split_heads(linear(memory, **v), n_head)
    scores = attention_scores(qh, kh, np.expand_dims(mask, -3))  # [..., n_head, n_q, n_k]
    pattern = softmax(scores)  # a new array: the scores stay as they were
    z = pattern @ vh  # [..., n_head, n_q, d_head]
    for name, value in (("q", qh), ("k", kh), ("v", vh), ("attn_scores", scores),
                        ("pattern", pattern), ("z", z)):
        keep(at + name, value)
    return linear(merge_heads(z), **c_proj)


def shown_relu(pre: np.ndarray, at: str, keep: Callable[[str, np.ndarray], None]) -> np.ndarray:
    """transformer.relu, its input and output named mlp.pre and mlp.post."""
    keep(f"{at}mlp.pre", pre)
    return kept(f"{at}mlp.post", relu(pre), keep)


def kept(name: str, value: np.ndarray, keep: Callable[[str, np.ndarray], None]) -> np.ndarray:
    keep(name, value)
    return value


# ---- 对位: the head that looks at the same position -------------------------------------------
# In the 颔联 and 颈联 of regulated verse, character i of the 下句 answers character i of the 上句
# (对仗). The decoder's row i writes the 下句's character i (it reads the start token at i = 0,
# the 下句's character i - 1 after), so a head that serves 对仗 puts row i's weight on the 上句's
# character i. Its last row (i = n_src, after a 下句 as long as its 上句) writes the end, which
# no 上句 character answers: that row is not counted. A job, as inside.py's head scores: keys,
# [n_tgt, n_src] bool, and queries, [n_tgt] bool.


def same_position_job(n_src: int, n_tgt: int) -> tuple[np.ndarray, np.ndarray]:
    """Decoder row i < n_src looks at the source's position i."""
    if n_src < 1 or n_tgt < 1:
        raise ValueError("a 对位 score needs a source and a target of one position at least")
    return np.eye(n_tgt, n_src, dtype=bool), np.arange(n_tgt) < n_src


def same_position_score(values: dict[str, np.ndarray]) -> np.ndarray:
    """对位: for each decoder row i that has a source position i (every row but the end's, when
    the target is the start token and a 下句 as long as the 上句), the cross-attention's weight
    on source position i, averaged over those rows; per decoder block and head:
    [n_dec_layer, n_head], or [n_dec_layer, n_batch, n_head] for a trace of a batch."""
    n_layer = sum(1 for name in values if name.endswith(".cross_attn.pattern"))
    patterns = [values[f"decoder.blocks.{i}.cross_attn.pattern"] for i in range(n_layer)]
    keys, queries = same_position_job(patterns[0].shape[-1], patterns[0].shape[-2])
    return np.stack([job_weights(pattern, keys)[..., queries].mean(axis=-1)
                     for pattern in patterns])
