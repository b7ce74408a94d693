"""The training variant's step (llama/variant.py): its forward over whole windows, keeping
what the backward reads, and the backward, for every setting of its switches.

As llama/fasttrain.py is for the LLaMA block: the forward keeps each norm's normed input and
1 / rms, the MLP's widened values and its activation's slope, so the backward recomputes
nothing; q, k and v are one product, and shared key/value heads are never copied (fasttrain's
attention). `stream` also runs the engine's steps, through a KV cache's `attend`. NumPy, float32
(float64 in the tests); no argument is changed.
"""

import numpy as np

from ..fasttrain import softmax_cross_entropy_
from ..model import future_mask, merge_heads, split_heads
from .fasttrain import attention, attention_backward, linear, linear_backward, side_by_side
from .model import rope, rope_angles

LINE_ROOM = 16  # the line-end table's rows: distances 0-15 (a longer one is 15), then "not known"


def line_distances(ids, line_ends) -> np.ndarray:
    """Each position's characters still to come in its line, SongNet's signal: the last whole
    line's length less the characters its own line has had through it (0 on a line's last
    character, and after it, as its punctuation closes a line of the same length). A line is
    whole between two of line_ends' ids; before one has been seen, LINE_ROOM ("not known").
    [..., n_seq] ids -> [..., n_seq] rows of the table "wle"."""
    ids = np.asarray(ids)
    at = np.arange(ids.shape[-1])
    ends = np.isin(ids, line_ends)
    last_end = np.maximum.accumulate(np.where(ends, at, -1), axis=-1)  # -1: none yet
    had = at - last_end  # the line's characters through each position (an end: 0)
    before = np.concatenate([np.full(ids.shape[:-1] + (1,), -1), last_end[..., :-1]], axis=-1)
    whole = ends & (before >= 0) & (at - before > 1)  # ends a line that began in view
    last_whole = np.maximum.accumulate(np.where(whole, at, -1), axis=-1)
    length = np.take_along_axis(at - before - 1, np.maximum(last_whole, 0), axis=-1)
    return np.where(last_whole >= 0, np.clip(length - had, 0, LINE_ROOM - 1), LINE_ROOM)


def norm(x: np.ndarray, p: dict, eps: float) -> tuple:
    """RMSNorm, or LayerNorm when p has a bias: out, and the normed x and 1 / rms it keeps."""
    if "bias" in p:
        x = x - np.mean(x, axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    normed = x * rstd
    out = normed * p["weight"]
    return (out + p["bias"] if "bias" in p else out), normed, rstd


def norm_backward(dout: np.ndarray, normed: np.ndarray, rstd: np.ndarray, p: dict) -> tuple:
    """Through norm: dx and {"weight"(, "bias")}. LayerNorm also takes out the mean's part."""
    rows = dout.reshape(-1, dout.shape[-1])
    grads = {"weight": np.sum(rows * normed.reshape(rows.shape), axis=0)}
    dx = dout * p["weight"]  # d normed
    dx = dx - normed * np.mean(dx * normed, axis=-1, keepdims=True)
    if "bias" in p:
        grads["bias"] = np.sum(rows, axis=0)
        dx -= np.mean(dx, axis=-1, keepdims=True)
    return dx * rstd, grads


def activation(h: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """GELU (tanh form) or ReLU squared of the widened h, and its slope, for the backward."""
    if kind == "relu2":
        relu = np.maximum(h, 0)
        return relu * relu, 2 * relu
    inner = 0.7978845608028654 * (h + 0.044715 * (h * h * h))
    t = np.tanh(inner)
    slope = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * 0.7978845608028654 * (1 + 0.134145 * h * h)
    return 0.5 * h * (1 + t), slope


def block_forward(x, block: dict, hp: dict, cos, sin, mask, attend=None) -> tuple:
    """One pre-norm block, and what block_backward reads (attend: a KV cache's step instead)."""
    # x [n_batch, n_seq, n_embd] -> [n_batch, n_seq, n_embd]
    attn, mlp, eps = block["self_attn"], block["mlp"], hp["norm_eps"]
    h1, normed_1, rstd_1 = norm(x, block["input_layernorm"], eps)
    qkv_proj = side_by_side(attn["q_proj"], attn["k_proj"], attn["v_proj"])
    qkv = linear(h1, **qkv_proj)  # [n_batch, n_seq, (n_head + 2 n_kv_head) d_head]
    n_q, n_kv = hp["n_head"] * hp["d_head"], hp["n_kv_head"] * hp["d_head"]
    q = split_heads(qkv[..., :n_q], hp["n_head"])  # [n_batch, n_head, n_seq, d_head]
    k = split_heads(qkv[..., n_q : n_q + n_kv], hp["n_kv_head"])  # [.., n_kv_head, ..]
    v = split_heads(qkv[..., n_q + n_kv :], hp["n_kv_head"])
    kept = {"h1": h1, "normed_1": normed_1, "rstd_1": rstd_1, "v": v, "qkv_proj": qkv_proj}
    if hp["qk_norm"]:
        q, kept["q_normed"], kept["q_rstd"] = norm(q, attn["q_norm"], eps)
        k, kept["k_normed"], kept["k_rstd"] = norm(k, attn["k_norm"], eps)
    if hp["positions"] == "rope":
        q, k = rope(q, cos, sin), rope(k, cos, sin)
    if attend is None:
        z, kept["pattern"] = attention(q, k, v, mask)
    else:
        z = attend(q, k, v)
    merged = merge_heads(z)  # [n_batch, n_seq, n_head d_head]
    x1 = x + linear(merged, **attn["o_proj"])
    h2, normed_2, rstd_2 = norm(x1, block["post_attention_layernorm"], eps)
    up = linear(h2, **mlp["up_proj"])  # [n_batch, n_seq, n_ffn]
    if hp["mlp"] == "swiglu":
        gate = linear(h2, **mlp["gate_proj"])
        sigmoid = 0.5 + 0.5 * np.tanh(0.5 * gate)
        act, slope = gate * sigmoid, sigmoid * (1 + gate * (1 - sigmoid))  # silu and its slope
        hidden = act * up
        kept |= {"act": act, "up": up}
    else:
        hidden, slope = activation(up, hp["mlp"])
    out = x1 + linear(hidden, **mlp["down_proj"])
    return out, kept | {"q": q, "k": k, "merged": merged, "h2": h2, "normed_2": normed_2,
                        "rstd_2": rstd_2, "slope": slope, "hidden": hidden}


def biased(dout: np.ndarray, grads: dict, layer: dict) -> dict:
    """A linear's gradients, with its bias's (dout summed over rows) when it has one."""
    return grads | ({"bias": dout.reshape(-1, dout.shape[-1]).sum(axis=0)}
                    if "bias" in layer else {})


def block_backward(dout: np.ndarray, block: dict, hp: dict, cos, sin, kept: dict) -> tuple:
    """Through block_forward, from its values: dx and dblock, shaped as block."""
    attn, mlp = block["self_attn"], block["mlp"]
    dhidden, ddown = linear_backward(dout, kept["hidden"], mlp["down_proj"]["weight"])
    dmlp = {"down_proj": biased(dout, {"weight": ddown}, mlp["down_proj"])}
    if hp["mlp"] == "swiglu":
        dgate, dup = dhidden * kept["up"] * kept["slope"], dhidden * kept["act"]
        dh2, dgate_w = linear_backward(dgate, kept["h2"], mlp["gate_proj"]["weight"])
        dmlp["gate_proj"] = biased(dgate, {"weight": dgate_w}, mlp["gate_proj"])
    else:
        dup, dh2 = dhidden * kept["slope"], 0
    dh2_up, dup_w = linear_backward(dup, kept["h2"], mlp["up_proj"]["weight"])
    dmlp["up_proj"] = biased(dup, {"weight": dup_w}, mlp["up_proj"])
    dx1, dpost = norm_backward(dh2 + dh2_up, kept["normed_2"], kept["rstd_2"],
                               block["post_attention_layernorm"])
    dx1 += dout
    dmerged, do_w = linear_backward(dx1, kept["merged"], attn["o_proj"]["weight"])
    dattn = {"o_proj": biased(dx1, {"weight": do_w}, attn["o_proj"])}
    q, k, v = kept["q"], kept["k"], kept["v"]
    dq, dk, dv = attention_backward(split_heads(dmerged, hp["n_head"]), q, k, v, kept["pattern"])
    if hp["positions"] == "rope":
        dq, dk = rope(dq, cos, -sin), rope(dk, cos, -sin)  # rope's backward: the turn back
    if hp["qk_norm"]:
        dq, dattn["q_norm"] = norm_backward(dq, kept["q_normed"], kept["q_rstd"], attn["q_norm"])
        dk, dattn["k_norm"] = norm_backward(dk, kept["k_normed"], kept["k_rstd"], attn["k_norm"])
    dqkv = np.concatenate([merge_heads(d) for d in (dq, dk, dv)], axis=-1)
    dh1, dqkv_w = linear_backward(dqkv, kept["h1"], kept["qkv_proj"]["weight"])
    at = np.cumsum([0, hp["n_head"] * hp["d_head"], *[hp["n_kv_head"] * hp["d_head"]] * 2])
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        dattn[name] = biased(dqkv[..., at[i] : at[i + 1]], {"weight": dqkv_w[at[i] : at[i + 1]]},
                             attn[name])
    dx, dinput = norm_backward(dh1, kept["normed_1"], kept["rstd_1"], block["input_layernorm"])
    return dx + dx1, {"input_layernorm": dinput, "self_attn": dattn,
                      "post_attention_layernorm": dpost, "mlp": dmlp}


def stream(ids, params: dict, hp: dict, n_past: int = 0, attends=None, lines=None) -> tuple:
    """The residual stream after every block, positions from n_past, with each block's values
    (attends: each block's KV cache step, or None: causal attention over ids alone; lines: the
    line-end table's rows of ids, when earlier ids decide them, else line_distances(ids))."""
    ids = np.asarray(ids)
    n_seq = ids.shape[-1]
    cos, sin = rope_angles(n_past, n_seq, hp["d_head"], hp["rope_theta"])
    mask = future_mask(n_seq, n_seq, np.float32)
    x = params["embed_tokens"]["weight"][ids]  # [..., n_seq, n_embd]
    if hp["positions"] == "learned":
        x = x + params["wpe"]["weight"][n_past : n_past + n_seq]
    if hp.get("line_end"):
        x = x + params["wle"]["weight"][line_distances(ids, hp["line_ends"]) if lines is None
                                        else lines]
    kept = []
    for i, block in enumerate(params["blocks"]):
        x, values = block_forward(x, block, hp, cos, sin, mask, attends and attends[i])
        kept.append(values)
    return x, kept, (cos, sin)


def final_logits(x: np.ndarray, params: dict, hp: dict) -> np.ndarray:
    """The logits of residual rows: the final norm, then the output layer."""
    return linear(norm(x, params["norm"], hp["norm_eps"])[0],
                  params.get("lm_head", params["embed_tokens"])["weight"])


def loss_and_grads(batch, params: dict, hp: dict) -> tuple[float, dict]:
    """The mean cross-entropy (nats per token) of (inputs, targets) windows, and every
    gradient in params' structure."""
    inputs, targets = (np.atleast_2d(a) for a in batch)
    lines = line_distances(inputs, hp["line_ends"]) if hp.get("line_end") else None
    x, kept, (cos, sin) = stream(inputs, params, hp, lines=lines)
    out, normed, rstd = norm(x, params["norm"], hp["norm_eps"])
    rows = out.reshape(-1, out.shape[-1])  # [n_rows, n_embd]
    head = params.get("lm_head", params["embed_tokens"])["weight"]  # [n_vocab, n_embd]
    dlogits = rows @ head.T  # the logits, then their gradient
    loss = softmax_cross_entropy_(dlogits, targets.reshape(-1))
    dhead = dlogits.T @ rows  # [n_vocab, n_embd]
    dx = (dlogits @ head).reshape(x.shape)
    del dlogits
    dx, dnorm = norm_backward(dx, normed, rstd, params["norm"])
    dblocks = [None] * len(kept)
    for i in reversed(range(len(kept))):
        dx, dblocks[i] = block_backward(dx, params["blocks"][i], hp, cos, sin, kept[i])
        kept[i] = None
    grads = {"norm": dnorm, "blocks": dblocks}
    embed = params["embed_tokens"]["weight"]
    if "lm_head" in params:
        grads["lm_head"], dembed = {"weight": dhead}, np.zeros_like(embed)
    else:
        dembed = dhead  # tied: the embedding's part is added into the head's
    np.add.at(dembed, inputs.reshape(-1), dx.reshape(-1, dx.shape[-1]))
    grads["embed_tokens"] = {"weight": dembed}
    if "wpe" in params:
        dwpe = np.zeros_like(params["wpe"]["weight"])
        dwpe[: inputs.shape[-1]] = dx.sum(axis=0)
        grads["wpe"] = {"weight": dwpe}
    if "wle" in params:
        dwle = np.zeros_like(params["wle"]["weight"])
        np.add.at(dwle, lines.reshape(-1), dx.reshape(-1, dx.shape[-1]))
        grads["wle"] = {"weight": dwle}
    return loss, grads
