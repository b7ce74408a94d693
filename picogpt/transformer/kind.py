"""The 2017 encoder-decoder as the table of model kinds (kinds.py) calls it: the shape of every
weight, its forward pass and one decoding step with the params and hparams whole, and the
settings a couplet model's hparams leave unsaid."""

import numpy as np

from .model import decode, encode, logits, padding_mask

NO_PAD = -1  # no id is -1: the couplet task's sources and targets are never padded
NORM_FIRST = True  # as the couplet task trains, when hparams do not say
# the longest context of a 2017 transformer: a GPT-2's n_ctx is its wpe's rows, but this
# model's positions are sines of any length, so hparams.json alone would bound the work (a
# 上句 of n_ctx - 1 characters); a 联's 句 are 5 or 7 characters, the couplet task's n_ctx 16
MAX_SEQ2SEQ_CTX = 1024


def seq2seq_shapes(hparams: dict) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every tensor of the 2017 encoder-decoder with these hparams,
    as transformer.init_params makes it (one table, "embed"; d_ff = 4 * n_embd)."""
    d = hparams["n_embd"]
    linear = {"w": (d, d), "b": (d,)}
    attn = {f"{part}.{key}": shape for part in ("q", "k", "v", "c_proj")
            for key, shape in linear.items()}
    norm = {"g": (d,), "b": (d,)}
    mlp = {"mlp.c_fc.w": (d, 4 * d), "mlp.c_fc.b": (4 * d,), "mlp.c_proj.w": (4 * d, d),
           "mlp.c_proj.b": (d,)}

    def block(kinds: tuple[str, ...], norms: int) -> dict:
        return {**{f"{kind}.{k}": v for kind in kinds for k, v in attn.items()},
                **{f"ln_{i}.{k}": v for i in range(1, norms + 1) for k, v in norm.items()}, **mlp}

    shapes = {"embed": (hparams["n_vocab"], d)}
    for stack, n, kinds in (("encoder", hparams["n_layer"], ("attn",)),
                            ("decoder", hparams["n_dec_layer"], ("attn", "cross_attn"))):
        shapes |= {f"{stack}.h{i}.{name}": shape for i in range(n)
                   for name, shape in block(kinds, len(kinds) + 1).items()}
        shapes |= {f"{stack}.ln_f.{k}": v for k, v in norm.items()}
    return shapes


def seq2seq_forward(inputs: tuple, params: dict, hparams: dict) -> np.ndarray:
    """The decoder's logits [..., n_tgt, n_vocab] for (source ids, target ids so far)."""
    src, tgt = (np.asarray(ids) for ids in inputs)
    n_head, norm_first = hparams["n_head"], hparams.get("norm_first", NORM_FIRST)
    memory = encode(src, params, n_head, NO_PAD, norm_first)
    return logits(decode(tgt, memory, params, n_head, NO_PAD, padding_mask(src, NO_PAD),
                         norm_first), params)


def seq2seq_step(tgt_ids, params: dict, hparams: dict, memory: np.ndarray) -> np.ndarray:
    """The next token's logits [..., n_vocab] after the target so far, given the encoder's memory
    (the decoder keeps no cache: it reads the whole target again)."""
    n_head, norm_first = hparams["n_head"], hparams.get("norm_first", NORM_FIRST)
    no_mask = np.zeros((1, memory.shape[-2]), np.float32)  # [1, n_src]: nothing is padding
    out = decode(np.asarray(tgt_ids), memory, params, n_head, NO_PAD, no_mask, norm_first)
    return logits(out[..., -1, :], params)
