"""The inside view: what each layer computes, which tokens it weighed, what it nearly said.

Owns `trace` (the forward pass with its intermediate values kept, under TransformerLens's names),
`logit_lens`, and how a token's text is shown (`visible`: escapes, and bytes for part of a
character). It composes model.py's functions in the order `gpt2` calls them and never computes
the math another way: the traced logits equal `gpt2`'s bit for bit, and a test checks it. No I/O;
page.py turns these into the offline page.
"""

import base64
from collections.abc import Collection

import numpy as np

from .generate import most_likely
from .model import (
    attention_weights,
    ffn,
    future_mask,
    layer_norm,
    linear,
    mha,
    softmax,
    split_heads,
)


def trace(ids, params: dict, n_head: int,
          names: Collection[str] | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The plain forward pass's [n_seq, n_vocab] logits, and its named intermediate values.

    Names: embed, pos_embed, blocks.{i}.resid_pre, blocks.{i}.attn.pattern ([n_head, n_seq,
    n_seq], rows sum to 1), blocks.{i}.attn_out, blocks.{i}.resid_mid, blocks.{i}.mlp_out,
    blocks.{i}.resid_post, ln_final. `names` keeps only those (the patterns are the big ones).
    """
    values = {}

    def keep(name: str, value: np.ndarray) -> np.ndarray:
        if names is None or name in names:
            values[name] = value
        return value

    ids = np.asarray(ids)
    n_seq = len(ids)
    x = keep("embed", params["wte"][ids]) + keep("pos_embed", params["wpe"][:n_seq])
    for i, block in enumerate(params["blocks"]):  # transformer_block, with its parts named
        keep(f"blocks.{i}.resid_pre", x)
        h = layer_norm(x, **block["ln_1"])
        if names is None or f"blocks.{i}.attn.pattern" in names:  # recomputed from mha's q, k
            q, k, _ = np.split(linear(h, **block["attn"]["c_attn"]), 3, axis=-1)
            keep(f"blocks.{i}.attn.pattern", attention_weights(
                split_heads(q, n_head), split_heads(k, n_head), future_mask(n_seq, n_seq, x.dtype)))
        attn_out, _ = mha(h, **block["attn"], n_head=n_head)
        x = keep(f"blocks.{i}.resid_mid", x + keep(f"blocks.{i}.attn_out", attn_out))
        mlp_out = keep(f"blocks.{i}.mlp_out", ffn(layer_norm(x, **block["ln_2"]), **block["mlp"]))
        x = keep(f"blocks.{i}.resid_post", x + mlp_out)
    ln_final = keep("ln_final", layer_norm(x, **params["ln_f"]))
    return ln_final @ params["wte"].T, values  # [n_seq, n_vocab]


def residual_names(n_layer: int) -> list[str]:
    """The residual stream before block 0 and after each block: the logit lens's rows."""
    return ["blocks.0.resid_pre", *(f"blocks.{i}.resid_post" for i in range(n_layer))]


def logit_lens(values: dict[str, np.ndarray], params: dict,
               top: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """What each layer would predict if it were the last: ln_final and the unembedding applied
    to its residual stream. Returns ids and probabilities of the top tokens,
    [n_layer + 1, n_seq, top] each; row 0 is the embeddings, the last row is the model's output.

    Early rows are a rough guide only: ln_f and wte were trained on the last layer's residual
    stream, and earlier layers use the stream in their own way.
    """
    ids, probs = [], []
    for name in residual_names(len(params["blocks"])):
        layer_probs = softmax(layer_norm(values[name], **params["ln_f"]) @ params["wte"].T)
        best = most_likely(layer_probs, top)  # [n_seq, top]
        ids.append(best)
        probs.append(np.take_along_axis(layer_probs, best, axis=-1))
    return np.stack(ids), np.stack(probs)


def visible(piece: bytes) -> str:
    """A token's text for a terminal: invisible characters escaped, part of a UTF-8 character
    shown as its bytes (<e6><88>), never as U+FFFD."""
    text = piece.decode("utf-8", errors="surrogateescape")  # a stray byte b -> U+DC00 + b
    return "".join(f"<{ord(c) - 0xDC00:02x}>" if "\udc80" <= c <= "\udcff" else
                   c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def cosine_similarity(x: np.ndarray) -> np.ndarray:  # [n, d] -> [n, n]
    """Cosine of the angle between every two rows."""
    unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return unit @ unit.T


def float32_base64(array: np.ndarray) -> str:
    """An array's float32 bytes as base64: exact values in a third of JSON's size."""
    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")
