"""The LLaMA block's training step, fast: llama/backward.py's `loss_and_grads` in fewer passes.

llama/backward.py is written to be read; this module computes the same loss and gradients for
train.py's loop, as picogpt/fasttrain.py does for GPT-2's:

- the forward keeps what the backward reads (each RMSNorm's normed input and 1 / rms, SwiGLU's
  gate, up and sigmoid), so the backward recomputes nothing;
- q, k and v come from one product with their weights side by side, and so do gate and up;
- a key/value head is never copied for its group: the group's query rows meet its keys in one
  product, and the same products sum the group's gradients on the way back;
- the logits become the loss and their own gradient in place, in slices shared out to threads
  (picogpt/fasttrain.py's softmax_cross_entropy_).

Same arguments and result as llama/backward.py (tests hold them equal, and to torch's autograd);
float32 in, float32 out. No I/O, no argument is changed.
"""

import numpy as np

from ..fast import softmax_
from ..fasttrain import softmax_cross_entropy_
from ..model import future_mask, merge_heads, split_heads
from .model import rope, rope_angles


def rms_norm(x: np.ndarray, weight: np.ndarray,
             eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """model.rms_norm, and what its backward reads: the normed x and 1 / rms."""
    # [..., n] -> out and normed [..., n], rstd [..., 1]
    rstd = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    normed = x * rstd
    return normed * weight, normed, rstd


def rms_norm_backward(dout: np.ndarray, normed: np.ndarray, rstd: np.ndarray,
                      weight: np.ndarray) -> tuple[np.ndarray, dict]:
    """backward.rms_norm_backward from the forward's normed and rstd: dx, {"weight"}."""
    dweight = np.sum((dout * normed).reshape(-1, dout.shape[-1]), axis=0)
    dx = dout * weight  # d normed
    dx -= normed * np.mean(dx * normed, axis=-1, keepdims=True)
    dx *= rstd
    return dx, {"weight": dweight}


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """model.linear: x @ weight.T (+ bias) as one 2-D product."""
    out = x.reshape(-1, x.shape[-1]) @ weight.T  # [..., n_in] -> [..., n_out]
    if bias is not None:
        out += bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


def linear_backward(dout: np.ndarray, x: np.ndarray, weight: np.ndarray) -> tuple:
    """backward.linear_backward: dx [..., n_in] and the weight's gradient [n_out, n_in]."""
    dout_2d, x_2d = dout.reshape(-1, dout.shape[-1]), x.reshape(-1, x.shape[-1])
    return (dout_2d @ weight).reshape(x.shape), dout_2d.T @ x_2d


def grouped(x: np.ndarray, n_kv_head: int) -> np.ndarray:
    """The rows of each group of query heads as one: [..., n_head, n, m] ->
    [..., n_kv_head, group * n, m] (a view: heads of a group are neighbours)."""
    *batch, n_head, n, m = x.shape
    return x.reshape(*batch, n_kv_head, n_head // n_kv_head * n, m)


# picogpt/fasttrain.py's attention and attention_backward (the backward engineer's, issue 58)
# take the same arguments and do the same: once both are merged, this step can import them.
def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
              mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Causal attention over shared key/value heads, and its pattern."""
    # q [..., n_head, n_seq, d_head], k, v [..., n_kv_head, n_seq, d_head], mask [n_seq, n_seq]
    n_kv_head = k.shape[-3]
    pattern = grouped(q, n_kv_head) @ k.swapaxes(-1, -2)  # [..., n_kv_head, group * n_seq, n_k]
    pattern = pattern.reshape(*q.shape[:-1], k.shape[-2])  # [..., n_head, n_seq, n_k]
    pattern *= 1 / q.shape[-1] ** 0.5
    pattern += mask
    softmax_(pattern)
    return (grouped(pattern, n_kv_head) @ v).reshape(q.shape), pattern


def attention_backward(dz: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                       pattern: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Through attention, from its pattern: dq, dk, dv (a shared head sums its group's)."""
    n_kv_head = k.shape[-3]
    dz_grouped = grouped(dz, n_kv_head)  # [..., n_kv_head, group * n_seq, d_head]
    dv = grouped(pattern, n_kv_head).swapaxes(-1, -2) @ dz_grouped
    dscores = (dz_grouped @ v.swapaxes(-1, -2)).reshape(pattern.shape)
    dscores -= np.sum(dscores * pattern, axis=-1, keepdims=True)
    dscores *= pattern
    dscores *= 1 / q.shape[-1] ** 0.5
    dscores_grouped = grouped(dscores, n_kv_head)
    dq = (dscores_grouped @ k).reshape(q.shape)
    return dq, dscores_grouped.swapaxes(-1, -2) @ grouped(q, n_kv_head), dv


def side_by_side(*linears: dict) -> dict:
    """Several linears on the same input as one: weights stacked [sum n_out, n_in]."""
    joined = {"weight": np.concatenate([p["weight"] for p in linears])}
    if "bias" in linears[0]:
        joined["bias"] = np.concatenate([p["bias"] for p in linears])
    return joined


def block_forward(x: np.ndarray, block: dict, n_head: int, n_kv_head: int, cos: np.ndarray,
                  sin: np.ndarray, eps: float, mask: np.ndarray) -> tuple[np.ndarray, dict]:
    """model.llama_block, and the values block_backward reads."""
    # x [n_batch, n_seq, n_embd] -> [n_batch, n_seq, n_embd]
    attn, mlp = block["self_attn"], block["mlp"]
    h1, normed_1, rstd_1 = rms_norm(x, **block["input_layernorm"], eps=eps)
    qkv_proj = side_by_side(attn["q_proj"], attn["k_proj"], attn["v_proj"])
    qkv = linear(h1, **qkv_proj)  # [n_batch, n_seq, (n_head + 2 * n_kv_head) * d_head]
    n_q, n_kv = attn["q_proj"]["weight"].shape[0], attn["k_proj"]["weight"].shape[0]
    q = split_heads(qkv[..., :n_q], n_head)  # [n_batch, n_head, n_seq, d_head]
    k = split_heads(qkv[..., n_q : n_q + n_kv], n_kv_head)  # [n_batch, n_kv_head, n_seq, d_head]
    v = split_heads(qkv[..., n_q + n_kv :], n_kv_head)
    kept = {"h1": h1, "normed_1": normed_1, "rstd_1": rstd_1, "v": v,
            "qkv_proj": qkv_proj["weight"]}
    if "q_norm" in attn:
        q, kept["q_normed"], kept["q_rstd"] = rms_norm(q, **attn["q_norm"], eps=eps)
        k, kept["k_normed"], kept["k_rstd"] = rms_norm(k, **attn["k_norm"], eps=eps)
    q, k = rope(q, cos, sin), rope(k, cos, sin)
    z, pattern = attention(q, k, v, mask)
    merged = merge_heads(z)  # [n_batch, n_seq, n_head * d_head]
    x1 = linear(merged, **attn["o_proj"])
    x1 += x
    h2, normed_2, rstd_2 = rms_norm(x1, **block["post_attention_layernorm"], eps=eps)
    gate_up_proj = side_by_side(mlp["gate_proj"], mlp["up_proj"])["weight"]
    gate_up = linear(h2, gate_up_proj)  # [n_batch, n_seq, 2 * n_ffn]
    gate, up = np.split(gate_up, 2, axis=-1)
    sigmoid = np.tanh(0.5 * gate)
    sigmoid *= 0.5
    sigmoid += 0.5
    hidden = gate * sigmoid
    hidden *= up  # silu(gate) * up
    out = linear(hidden, **mlp["down_proj"])
    out += x1
    return out, kept | {"q": q, "k": k, "pattern": pattern, "merged": merged, "h2": h2,
                        "normed_2": normed_2, "rstd_2": rstd_2, "gate": gate, "up": up,
                        "sigmoid": sigmoid, "hidden": hidden, "gate_up_proj": gate_up_proj}


def block_backward(dout: np.ndarray, block: dict, cos: np.ndarray, sin: np.ndarray,
                   kept: dict) -> tuple[np.ndarray, dict]:
    """backward.block_backward from block_forward's values: dx and dblock."""
    # dout [n_batch, n_seq, n_embd] -> dx [n_batch, n_seq, n_embd]; dblock shaped as block
    attn, mlp = block["self_attn"], block["mlp"]
    dhidden, ddown = linear_backward(dout, kept["hidden"], mlp["down_proj"]["weight"])
    gate, up, sigmoid = kept["gate"], kept["up"], kept["sigmoid"]
    silu = gate * sigmoid
    dup = dhidden * silu
    dgate = dhidden * up  # then through silu: s (1 + gate (1 - s))
    dgate *= sigmoid * (1 + gate * (1 - sigmoid))
    dgate_up = np.concatenate([dgate, dup], axis=-1)
    dh2, dgate_up_w = linear_backward(dgate_up, kept["h2"], kept["gate_up_proj"])
    dx1, dpost = rms_norm_backward(dh2, kept["normed_2"], kept["rstd_2"],
                                   block["post_attention_layernorm"]["weight"])
    dx1 += dout
    dmerged, do_proj = linear_backward(dx1, kept["merged"], attn["o_proj"]["weight"])
    q, k, v = kept["q"], kept["k"], kept["v"]
    dq, dk, dv = attention_backward(split_heads(dmerged, q.shape[-3]), q, k, v, kept["pattern"])
    dq, dk = rope(dq, cos, -sin), rope(dk, cos, -sin)  # rope's backward: the turn back
    dattn = {"o_proj": {"weight": do_proj}}
    if "q_norm" in attn:
        dq, dattn["q_norm"] = rms_norm_backward(dq, kept["q_normed"], kept["q_rstd"],
                                                attn["q_norm"]["weight"])
        dk, dattn["k_norm"] = rms_norm_backward(dk, kept["k_normed"], kept["k_rstd"],
                                                attn["k_norm"]["weight"])
    dqkv = np.concatenate([merge_heads(d) for d in (dq, dk, dv)], axis=-1)
    projs = ("q_proj", "k_proj", "v_proj")
    dh1, dqkv_w = linear_backward(dqkv, kept["h1"], kept["qkv_proj"])
    dqkv_2d = dqkv.reshape(-1, dqkv.shape[-1])
    at = np.cumsum([0] + [attn[name]["weight"].shape[0] for name in projs])
    for i, name in enumerate(projs):
        dattn[name] = {"weight": dqkv_w[at[i] : at[i + 1]]}
        if "bias" in attn[name]:
            dattn[name]["bias"] = np.sum(dqkv_2d[:, at[i] : at[i + 1]], axis=0)
    dx, dinput = rms_norm_backward(dh1, kept["normed_1"], kept["rstd_1"],
                                   block["input_layernorm"]["weight"])
    dx += dx1
    n_ffn = gate.shape[-1]
    return dx, {"input_layernorm": dinput, "self_attn": dattn,
                "post_attention_layernorm": dpost,
                "mlp": {"gate_proj": {"weight": dgate_up_w[:n_ffn]},
                        "up_proj": {"weight": dgate_up_w[n_ffn:]},
                        "down_proj": {"weight": ddown}}}


def loss_and_grads(inputs: np.ndarray, targets: np.ndarray, params: dict, n_head: int,
                   n_kv_head: int, d_head: int, rope_theta: float, norm_eps: float,
                   threads: int | None = None) -> tuple[float, dict]:
    """backward.loss_and_grads: the mean cross-entropy (nats) and every gradient, in params'
    structure. inputs, targets: [n_batch, n_seq] ids; threads share the logits' element-wise
    work (default: one per core this process may use)."""
    inputs, targets = np.atleast_2d(inputs), np.atleast_2d(targets)
    embed = params["embed_tokens"]["weight"]
    n_seq = inputs.shape[-1]
    cos, sin = (a.astype(embed.dtype) for a in rope_angles(0, n_seq, d_head, rope_theta))
    mask = future_mask(n_seq, n_seq, embed.dtype)
    x, kept = embed[inputs], []  # [n_batch, n_seq, n_embd]
    for block in params["blocks"]:
        x, values = block_forward(x, block, n_head, n_kv_head, cos, sin, norm_eps, mask)
        kept.append(values)
    normed_x, normed, rstd = rms_norm(x, **params["norm"], eps=norm_eps)
    rows = normed_x.reshape(-1, normed_x.shape[-1])  # [n_rows, n_embd]
    head = params.get("lm_head", params["embed_tokens"])["weight"]  # [n_vocab, n_embd]
    dlogits = rows @ head.T  # [n_rows, n_vocab]: the logits, then their gradient
    loss = softmax_cross_entropy_(dlogits, targets.reshape(-1), threads)
    dhead = dlogits.T @ rows  # [n_vocab, n_embd]
    dx = (dlogits @ head).reshape(x.shape)
    del dlogits
    dx, dnorm = rms_norm_backward(dx, normed, rstd, params["norm"]["weight"])
    dblocks = [None] * len(kept)
    for i in reversed(range(len(kept))):
        dx, dblocks[i] = block_backward(dx, params["blocks"][i], cos, sin, kept[i])
        kept[i] = None  # the block's values are not needed again
    grads = {"norm": dnorm, "blocks": dblocks}
    if "lm_head" in params:
        grads["lm_head"], dembed = {"weight": dhead}, np.zeros_like(embed)
    else:
        dembed = dhead  # tied: the embedding's part is added into the head's
    np.add.at(dembed, inputs.reshape(-1), dx.reshape(-1, dx.shape[-1]))
    return loss, {"embed_tokens": {"weight": dembed}} | grads
