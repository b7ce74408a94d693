"""The inside view of the LLaMA kind: its forward pass with each value shown to a hook as it is
made, under the names inside.py gives GPT-2's (TransformerLens's, without `hook_`), so the
pages, the head scores and the logit lens read a LLaMA as they read a GPT-2.

What differs is grouped-query attention: a block's n_head query heads read n_kv_head key/value
heads, query head h reading key/value head h // (n_head // n_kv_head), as transformers'
repeat_kv. attn.q is [n_head, n_seq, d_head] but attn.k and attn.v are
[n_kv_head, n_seq, d_head]; attn.attn_scores and attn.pattern have a row per query head,
[n_head, n_seq, n_seq]. The blocks run llama/model.py's own functions in llama_block's order, the
attention step caught at gqa's attend= seam. NumPy only; no I/O.
"""

from collections.abc import Callable

import numpy as np

from ..model import attention_scores, future_mask, softmax
from .model import gqa, linear, rms_norm, rope_angles, swiglu


def kv_head_of(h: int, n_head: int, n_kv_head: int) -> int:
    """The key/value head query head h reads: query heads share one in runs of n_head //
    n_kv_head, as transformers' repeat_kv repeats each key/value head in place."""
    return h // (n_head // n_kv_head)


def run_with_hooks(ids, params: dict, hparams: dict, hook: Callable[..., None],
                   rows: int | None = None) -> np.ndarray:  # [n_seq] ids -> [n_seq, n_embd]
    """llama's forward pass up to the final norm (ln_final, returned), calling hook(name, value)
    on each value as it is made: embed, and for each block i blocks.{i}.resid_pre, .attn.q,
    .attn.k, .attn.v, .attn.attn_scores, .attn.pattern, .attn.z, .attn_out, .resid_mid,
    .mlp_out, .resid_post. With rows, attention runs that many queries at a time and hook sees
    attn_scores and pattern in pieces, as hook(name, value, row), as inside.run_with_hooks."""
    ids = np.asarray(ids)
    n_seq = ids.shape[-1]
    step = rows or n_seq
    n_head, n_kv_head, eps = hparams["n_head"], hparams["n_kv_head"], hparams["norm_eps"]
    cos, sin = rope_angles(0, n_seq, hparams["d_head"], hparams["rope_theta"])
    x = params["embed_tokens"]["weight"][ids]  # [n_seq, n_embd]: no position table
    hook("embed", x)
    for i, block in enumerate(params["blocks"]):
        at = f"blocks.{i}."

        def attend(q, k, v, at=at):  # gqa's attention step, each query head's rows shown
            for name, value in (("q", q), ("k", k), ("v", v)):
                hook(f"{at}attn.{name}", value)
            group = n_head // n_kv_head
            k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)  # [n_head, ...]
            mask = future_mask(n_seq, n_seq, q.dtype)
            pieces = []
            for row in range(0, n_seq, step):
                scores = attention_scores(q[..., row : row + step, :], k, mask[row : row + step])
                hook(f"{at}attn.attn_scores", scores, row)  # [n_head, step, n_seq]
                pattern = softmax(scores)
                hook(f"{at}attn.pattern", pattern, row)
                pieces.append(pattern @ v)  # [n_head, step, d_head]
            z = np.concatenate(pieces, axis=-2)  # [n_head, n_seq, d_head]
            hook(f"{at}attn.z", z)
            return z

        hook(f"{at}resid_pre", x)  # llama_block, with its parts named
        attn_out = gqa(rms_norm(x, **block["input_layernorm"], eps=eps), **block["self_attn"],
                       cos=cos, sin=sin, n_head=n_head, n_kv_head=n_kv_head, norm_eps=eps,
                       attend=attend)
        hook(f"{at}attn_out", attn_out)
        x = x + attn_out
        hook(f"{at}resid_mid", x)
        mlp_out = swiglu(rms_norm(x, **block["post_attention_layernorm"], eps=eps), **block["mlp"])
        hook(f"{at}mlp_out", mlp_out)
        x = x + mlp_out
        hook(f"{at}resid_post", x)
    ln_final = rms_norm(x, **params["norm"], eps=eps)
    hook("ln_final", ln_final)
    return ln_final


def final_logits(x: np.ndarray, params: dict, hparams: dict) -> np.ndarray:
    """The final norm, then the output layer (the embedding when tied): the logit lens's last
    step on any residual stream, as llama() takes it on the last block's."""
    # [..., n_embd] -> [..., n_vocab]
    head = params.get("lm_head", params["embed_tokens"])
    return linear(rms_norm(x, **params["norm"], eps=hparams["norm_eps"]), **head)
