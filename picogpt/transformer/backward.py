"""The 2017 encoder-decoder's backward pass (model.py's, beside it), its loss and first weights.

Read it beside model.py here, as the root's backward.py beside its model.py. Each layer there has
here a `_forward` that computes the same output and keeps what its backward reads (each layer norm's
normalised input and 1 / std, attention's pattern, ReLU's output), and a `_backward` that takes
`dout`, the loss's gradient with respect to that output, and returns the gradients of the inputs
and weights. `loss_and_grads` chains them. What GPT-2's backward pass (backward.py) lacks:
- cross-attention: every decoder layer reads the encoder's output ("memory"), so memory's
  gradient is the sum of theirs, and runs back through the encoder from there;
- the masks are added constants: a hidden key has weight 0, so its score gets gradient 0;
- post-norm (2017's, `norm_first=False`) normalises after the sum, so the residual no longer
  passes the gradient on unchanged; pre-norm (GPT-2's) does;
- the embedding is scaled by sqrt(d_model); one table may be source, target and output.

The element-wise work and attention's forward and backward are fasttrain.py's (in place on the
step's own arrays, the same attention GPT-2's step runs), so this is also the step a couplet
model trains with. No state, no I/O, no argument changed; float32 in, float32 out, float64 in,
float64 out. Tests hold every gradient to torch's autograd on torch.nn.Transformer and to
finite differences of transformer/model.py's forward.
"""

import numpy as np

from ..fasttrain import (
    attention,
    attention_backward,
    layer_norm,
    layer_norm_backward,
    linear,
    linear_backward,
    softmax_cross_entropy_,
)
from ..model import merge_heads, split_heads
from .model import causal_mask, embed, padding_mask, tables


def multi_head_attention_forward(x: np.ndarray, memory: np.ndarray, q: dict, k: dict, v: dict,
                                 c_proj: dict, n_head: int,
                                 mask: np.ndarray) -> tuple[np.ndarray, dict]:
    """transformer.multi_head_attention, and the values its backward reads."""
    # [..., n_q, d_model], [..., n_k, d_model], mask [..., n_q, n_k] -> [..., n_q, d_model]
    qh = split_heads(linear(x, **q), n_head)  # [..., n_head, n_q, d_head]
    kh = split_heads(linear(memory, **k), n_head)  # [..., n_head, n_k, d_head]
    vh = split_heads(linear(memory, **v), n_head)
    z, pattern = attention(qh, kh, vh, mask)  # [..., n_head, n_q, d_head], [..., n_k]
    merged = merge_heads(z)  # [..., n_q, d_model]
    return linear(merged, **c_proj), {"x": x, "memory": memory, "q": qh, "k": kh, "v": vh,
                                      "pattern": pattern, "merged": merged}


def multi_head_attention_backward(dout: np.ndarray, q: dict, k: dict, v: dict, c_proj: dict,
                                  n_head: int, kept: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Through multi_head_attention_forward: dx, dmemory and {"q", "k", "v", "c_proj"}."""
    # dout [..., n_q, d_model] -> dx [..., n_q, d_model], dmemory [..., n_k, d_model]
    dmerged, dc_proj = linear_backward(dout, kept["merged"], c_proj["w"])
    dqh, dkh, dvh = attention_backward(split_heads(dmerged, n_head), kept["q"], kept["k"],
                                       kept["v"], kept["pattern"])  # [..., n_head, n, d_head]
    dx, dq = linear_backward(merge_heads(dqh), kept["x"], q["w"])
    dmemory, dk = linear_backward(merge_heads(dkh), kept["memory"], k["w"])
    dmemory_v, dv = linear_backward(merge_heads(dvh), kept["memory"], v["w"])
    dmemory += dmemory_v  # memory feeds both the keys and the values
    return dx, dmemory, {"q": dq, "k": dk, "v": dv, "c_proj": dc_proj}


def self_attention_backward(dout: np.ndarray, attn: dict, n_head: int,
                            kept: dict) -> tuple[np.ndarray, dict]:
    """Self-attention's x is also its memory, so x's gradient is the sum of both."""
    # dout [..., n_seq, d_model] -> dx [..., n_seq, d_model]
    dx, dmemory, grads = multi_head_attention_backward(dout, **attn, n_head=n_head, kept=kept)
    dx += dmemory
    return dx, grads


def ffn_forward(x: np.ndarray, c_fc: dict, c_proj: dict) -> tuple[np.ndarray, dict]:
    """model.ffn with ReLU, and the values its backward reads."""
    # [..., n_seq, d_model] -> [..., n_seq, d_ff] -> [..., n_seq, d_model]
    hidden = linear(x, **c_fc)
    np.maximum(hidden, 0, out=hidden)  # relu, in place: the hidden array is this step's own
    return linear(hidden, **c_proj), {"x": x, "hidden": hidden}


def ffn_backward(dout: np.ndarray, c_fc: dict, c_proj: dict,
                 kept: dict) -> tuple[np.ndarray, dict]:
    """Through ffn_forward: dx and {"c_fc", "c_proj"}."""
    # dout [..., n_seq, d_model] -> dhidden [..., n_seq, d_ff] -> dx [..., n_seq, d_model]
    dhidden, dc_proj = linear_backward(dout, kept["hidden"], c_proj["w"])
    dhidden *= kept["hidden"] > 0  # ReLU passes the gradient where its output was positive
    dx, dc_fc = linear_backward(dhidden, kept["x"], c_fc["w"])
    return dx, {"c_fc": dc_fc, "c_proj": dc_proj}


def residual_forward(x: np.ndarray, sublayer, ln: dict,
                     norm_first: bool) -> tuple[np.ndarray, dict]:
    """transformer.residual; sublayer(h) returns its output and its kept values."""
    # [..., n_seq, d_model] -> [..., n_seq, d_model]
    if norm_first:  # x + sublayer(layer_norm(x))
        h, normed, rstd = layer_norm(x, **ln)
        out, kept = sublayer(h)
        out += x
    else:  # layer_norm(x + sublayer(x))
        total, kept = sublayer(x)
        total += x
        out, normed, rstd = layer_norm(total, **ln)
    return out, {"sublayer": kept, "normed": normed, "rstd": rstd}


def residual_backward(dout: np.ndarray, sublayer_backward, ln: dict, kept: dict,
                      norm_first: bool) -> tuple:
    """Through residual_forward: dx, {"g", "b"}, then what sublayer_backward(dh, kept) returns
    after its input's gradient (its weights' gradients)."""
    # dout [..., n_seq, d_model] -> dx [..., n_seq, d_model]
    if norm_first:  # the sum passes dout to x unchanged, and through the sublayer and its norm
        dh, *rest = sublayer_backward(dout, kept["sublayer"])
        dx, dln = layer_norm_backward(dh, kept["normed"], kept["rstd"], ln["g"])
        dx += dout
    else:  # the norm comes first on the way back; then the sum passes its gradient both ways
        dx, dln = layer_norm_backward(dout, kept["normed"], kept["rstd"], ln["g"])
        dh, *rest = sublayer_backward(dx, kept["sublayer"])
        dx += dh
    return dx, dln, *rest


def encoder_layer_forward(x: np.ndarray, block: dict, n_head: int, mask: np.ndarray,
                          norm_first: bool) -> tuple[np.ndarray, list]:
    """transformer.encoder_layer, and the values encoder_layer_backward reads."""
    # [..., n_src, d_model], mask [..., 1, n_src] -> [..., n_src, d_model]
    x, attn = residual_forward(x, lambda h: multi_head_attention_forward(
        h, h, **block["attn"], n_head=n_head, mask=mask), block["ln_1"], norm_first)
    x, mlp = residual_forward(x, lambda h: ffn_forward(h, **block["mlp"]), block["ln_2"],
                              norm_first)
    return x, [attn, mlp]


def encoder_layer_backward(dout: np.ndarray, block: dict, n_head: int, kept: list,
                           norm_first: bool) -> tuple[np.ndarray, dict]:
    """Through encoder_layer_forward: dx and dblock, shaped as block."""
    # dout [..., n_src, d_model] -> dx [..., n_src, d_model]
    attn, mlp = kept
    dx, dln_2, dmlp = residual_backward(dout, lambda d, kept: ffn_backward(
        d, **block["mlp"], kept=kept), block["ln_2"], mlp, norm_first)
    dx, dln_1, dattn = residual_backward(dx, lambda d, kept: self_attention_backward(
        d, block["attn"], n_head, kept), block["ln_1"], attn, norm_first)
    return dx, {"attn": dattn, "mlp": dmlp, "ln_1": dln_1, "ln_2": dln_2}


def decoder_layer_forward(x: np.ndarray, memory: np.ndarray, block: dict, n_head: int,
                          mask: np.ndarray, memory_mask: np.ndarray,
                          norm_first: bool) -> tuple[np.ndarray, list]:
    """transformer.decoder_layer, and the values decoder_layer_backward reads."""
    # [..., n_tgt, d_model], [..., n_src, d_model] -> [..., n_tgt, d_model]
    x, attn = residual_forward(x, lambda h: multi_head_attention_forward(
        h, h, **block["attn"], n_head=n_head, mask=mask), block["ln_1"], norm_first)
    x, cross = residual_forward(x, lambda h: multi_head_attention_forward(
        h, memory, **block["cross_attn"], n_head=n_head, mask=memory_mask), block["ln_2"],
        norm_first)
    x, mlp = residual_forward(x, lambda h: ffn_forward(h, **block["mlp"]), block["ln_3"],
                              norm_first)
    return x, [attn, cross, mlp]


def decoder_layer_backward(dout: np.ndarray, block: dict, n_head: int, kept: list,
                           norm_first: bool) -> tuple[np.ndarray, np.ndarray, dict]:
    """Through decoder_layer_forward: dx, dmemory (this layer's part) and dblock."""
    # dout [..., n_tgt, d_model] -> dx [..., n_tgt, d_model], dmemory [..., n_src, d_model]
    attn, cross, mlp = kept
    dx, dln_3, dmlp = residual_backward(dout, lambda d, kept: ffn_backward(
        d, **block["mlp"], kept=kept), block["ln_3"], mlp, norm_first)
    dx, dln_2, dmemory, dcross = residual_backward(dx, lambda d, kept: (
        multi_head_attention_backward(d, **block["cross_attn"], n_head=n_head, kept=kept)),
        block["ln_2"], cross, norm_first)
    dx, dln_1, dattn = residual_backward(dx, lambda d, kept: self_attention_backward(
        d, block["attn"], n_head, kept), block["ln_1"], attn, norm_first)
    return dx, dmemory, {"attn": dattn, "cross_attn": dcross, "mlp": dmlp, "ln_1": dln_1,
                         "ln_2": dln_2, "ln_3": dln_3}


def embed_backward_(dtable: np.ndarray, dx: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Through transformer.embed, added into dtable: each id's row gets dx * sqrt(d_model) at
    each place it was read; the sinusoidal positions are fixed and learn nothing."""
    # dtable [n_vocab, d_model], dx [..., n_seq, d_model], ids [..., n_seq] -> dtable
    d_model = dtable.shape[-1]
    scaled = dx.reshape(-1, d_model) * np.float32(d_model**0.5)  # the forward's own factor
    np.add.at(dtable, ids.reshape(-1), scaled)  # an id read twice adds twice
    return dtable


def loss_and_grads(src_ids: np.ndarray, tgt_in: np.ndarray, tgt_out: np.ndarray, params: dict,
                   n_head: int, pad_id: int, norm_first: bool = True,
                   src_pad_id: int | None = None) -> tuple[float, dict]:
    """Mean cross-entropy (nats) of tgt_out's ids that are not pad_id, each after the source and
    tgt_in up to its place, and its gradient for every array of params, in params' structure.
    src_ids [n_batch, n_src], padded with src_pad_id (pad_id if None); tgt_in, tgt_out
    [n_batch, n_tgt]: the target opened by the start id, and closed by the end id."""
    src_pad_id = pad_id if src_pad_id is None else src_pad_id
    src_ids, tgt_in, tgt_out = (np.atleast_2d(ids) for ids in (src_ids, tgt_in, tgt_out))
    encoder, decoder = params["encoder"], params["decoder"]
    src_table, tgt_table = tables(params)
    memory_mask = padding_mask(src_ids, src_pad_id)  # [n_batch, 1, n_src]
    x, enc_kept = embed(src_ids, src_table), []  # [n_batch, n_src, d_model]
    for block in encoder["blocks"]:
        x, kept = encoder_layer_forward(x, block, n_head, memory_mask, norm_first)
        enc_kept.append(kept)
    memory, enc_normed, enc_rstd = layer_norm(x, **encoder["ln_f"])
    mask = padding_mask(tgt_in, pad_id) + causal_mask(tgt_in.shape[-1])  # [n_batch, n_tgt, n_tgt]
    y, dec_kept = embed(tgt_in, tgt_table), []  # [n_batch, n_tgt, d_model]
    for block in decoder["blocks"]:
        y, kept = decoder_layer_forward(y, memory, block, n_head, mask, memory_mask, norm_first)
        dec_kept.append(kept)
    out, dec_normed, dec_rstd = layer_norm(y, **decoder["ln_f"])

    counted = tgt_out != pad_id  # [n_batch, n_tgt]: padding is neither scored nor averaged
    assert counted.any(), "no target id to score"
    rows = out[counted]  # [n_rows, d_model]
    logits = linear(rows, **params["out"]) if "out" in params else rows @ tgt_table.T
    loss = softmax_cross_entropy_(logits, tgt_out[counted])  # logits hold their gradient now
    grads, (src_name, tgt_name) = {}, (("embed",) * 2 if "embed" in params
                                      else ("src_embed", "tgt_embed"))
    if "out" in params:
        drows, grads["out"] = linear_backward(logits, rows, params["out"]["w"])
        grads[tgt_name] = np.zeros_like(tgt_table)
    else:  # tied: logits = rows @ table.T is the table's second use, and second gradient
        drows, grads[tgt_name] = logits @ tgt_table, logits.T @ rows  # [n_rows, d_model]
    del logits
    dy = np.zeros_like(out)
    dy[counted] = drows
    dy, ddec_ln_f = layer_norm_backward(dy, dec_normed, dec_rstd, decoder["ln_f"]["g"])
    dmemory, ddec = np.zeros_like(memory), [None] * len(dec_kept)
    for i in reversed(range(len(dec_kept))):
        dy, dmemory_i, ddec[i] = decoder_layer_backward(dy, decoder["blocks"][i], n_head,
                                                        dec_kept[i], norm_first)
        dmemory += dmemory_i  # every decoder layer read memory
    embed_backward_(grads[tgt_name], dy, tgt_in)
    dx, denc_ln_f = layer_norm_backward(dmemory, enc_normed, enc_rstd, encoder["ln_f"]["g"])
    denc = [None] * len(enc_kept)
    for i in reversed(range(len(enc_kept))):
        dx, denc[i] = encoder_layer_backward(dx, encoder["blocks"][i], n_head, enc_kept[i],
                                             norm_first)
    embed_backward_(grads.setdefault(src_name, np.zeros_like(src_table)), dx, src_ids)
    return loss, {**grads, "encoder": {"blocks": denc, "ln_f": denc_ln_f},
                  "decoder": {"blocks": ddec, "ln_f": ddec_ln_f}}
