"""The backward pass of the LLaMA block in NumPy: each new piece's gradient, and the whole chain.

Read it beside llama/model.py, as picogpt/backward.py is read beside model.py. The LLaMA block
changes four things in GPT-2's and each has a backward here, with the forward's name and
`_backward`: it takes the gradient of the loss with respect to the forward's output (`dout`) and
the forward's inputs, and returns the gradients with respect to those inputs and weights.

- `rms_norm_backward`: RMSNorm divides by the root mean square alone (no mean taken away, no
  bias), so one average is taken away where layer_norm_backward takes two.
- `rope_backward`: RoPE turns each pair of features by an angle; the gradient turns back by the
  same angle, which is `rope` with sin negated. Nothing to learn in it.
- `swiglu_backward`: the gate's SiLU and the product of gate and up, each by the product rule.
- `attention_backward` with shared key/value heads: attention is GPT-2's once each key/value
  head is repeated for its group of query heads; the repeated copies' gradients are summed back
  into the one head they came from.
- the q/k norms of Qwen3 are rms_norm_backward over each head's d_head features.

`forward` runs llama/model.py's functions once, keeping what the backward reads (as inside.trace
does for GPT-2); `loss_and_grads` is the whole chain, from ids to a gradient for every array of
params, in params' structure. No state, no I/O. Tests hold every gradient to torch's autograd on
transformers' LlamaForCausalLM and Qwen3ForCausalLM. llama/fasttrain.py computes the same in
fewer passes over memory, for training.
"""

import numpy as np

from ..backward import attention_backward as heads_attention_backward
from ..backward import cross_entropy
from ..model import attention_weights, future_mask, merge_heads, split_heads
from .model import linear, rms_norm, rope, rope_angles, silu, swiglu


def linear_backward(dout: np.ndarray, x: np.ndarray, weight: np.ndarray,
                    bias: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Through x @ weight.T (+ bias), weight stored [n_out, n_in] as Hugging Face stores it:
    dx [..., n_in] and {"weight": [n_out, n_in]} (and "bias" [n_out] when there is one)."""
    dout_2d, x_2d = dout.reshape(-1, dout.shape[-1]), x.reshape(-1, x.shape[-1])
    dx = (dout_2d @ weight).reshape(x.shape)  # [..., n_out] -> [..., n_in]
    grads = {"weight": dout_2d.T @ x_2d}  # each weight's gradient sums every position
    return dx, grads | ({} if bias is None else {"bias": np.sum(dout_2d, axis=0)})


def rms_norm_backward(dout: np.ndarray, x: np.ndarray, weight: np.ndarray,
                      eps: float) -> tuple[np.ndarray, dict]:
    """Through rms_norm: dx [..., n] and {"weight": [n]}."""
    rstd = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)  # [..., 1]
    normed = x * rstd
    dnormed = dout * weight
    # the root mean square depends on every feature: hence the one average taken away
    dx = rstd * (dnormed - normed * np.mean(dnormed * normed, axis=-1, keepdims=True))
    return dx, {"weight": np.sum((dout * normed).reshape(-1, x.shape[-1]), axis=0)}


def rope_backward(dout: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Through rope: a rotation's gradient is rotated back by the same angle."""
    return rope(dout, cos, -sin)  # [..., n_seq, d_head] -> [..., n_seq, d_head]


def silu_backward(dout: np.ndarray, x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    """d silu(x) / dx times dout: silu = x s with s = sigmoid(x), s' = s (1 - s)."""
    s = 0.5 + 0.5 * np.tanh(0.5 * x)  # sigmoid, as model.silu writes it (no exp to overflow)
    return dout * s * (1 + x * (1 - s))


def swiglu_backward(dout: np.ndarray, x: np.ndarray, gate_proj: dict, up_proj: dict,
                    down_proj: dict) -> tuple[np.ndarray, dict]:
    """Through swiglu: dx and {"gate_proj", "up_proj", "down_proj"}."""
    # dout, x [..., n_seq, n_embd]; gate, up, hidden [..., n_seq, n_ffn]
    gate, up = linear(x, **gate_proj), linear(x, **up_proj)  # recomputed: two products
    dhidden, ddown = linear_backward(dout, silu(gate) * up, **down_proj)
    dx_gate, dgate = linear_backward(silu_backward(dhidden * up, gate), x, **gate_proj)
    dx_up, dup = linear_backward(dhidden * silu(gate), x, **up_proj)
    return dx_gate + dx_up, {"gate_proj": dgate, "up_proj": dup, "down_proj": ddown}


def repeat_kv(x: np.ndarray, n_rep: int) -> np.ndarray:
    """Each key/value head n_rep times in a row, one for each query head of its group."""
    return np.repeat(x, n_rep, axis=-3)  # [..., n_kv_head, n_seq, d] -> [..., n_head, n_seq, d]


def repeat_kv_backward(dx: np.ndarray, n_kv_head: int) -> np.ndarray:
    """Through repeat_kv: a head used by n_rep query heads sums their n_rep gradients."""
    *batch, n_head, n_seq, d_head = dx.shape  # -> [..., n_kv_head, n_seq, d_head]
    return dx.reshape(*batch, n_kv_head, n_head // n_kv_head, n_seq, d_head).sum(axis=-3)


def attention_backward(dout: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                       pattern: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Through causal attention with n_kv_head <= n_head key/value heads: dq, dk, dv."""
    # dout, q [..., n_head, n_seq, d_head]; k, v [..., n_kv_head, n_seq, d_head]
    n_kv_head = k.shape[-3]
    n_rep = q.shape[-3] // n_kv_head
    dq, dk, dv = heads_attention_backward(dout, q, repeat_kv(k, n_rep), repeat_kv(v, n_rep),
                                          pattern)  # GPT-2's, head by head
    return dq, repeat_kv_backward(dk, n_kv_head), repeat_kv_backward(dv, n_kv_head)


def self_attn_forward(x: np.ndarray, attn: dict, n_head: int, n_kv_head: int, cos: np.ndarray,
                      sin: np.ndarray, eps: float) -> tuple[np.ndarray, dict]:
    """model.py's attention (projections, q/k norms, rope, shared heads), and what
    self_attn_backward reads: q and k before and after rope, v, pattern, z."""
    q = split_heads(linear(x, **attn["q_proj"]), n_head)  # [..., n_head, n_seq, d_head]
    k = split_heads(linear(x, **attn["k_proj"]), n_kv_head)  # [..., n_kv_head, n_seq, d_head]
    v = split_heads(linear(x, **attn["v_proj"]), n_kv_head)
    q_normed, k_normed = q, k
    if "q_norm" in attn:  # Qwen3: each head's q and k normed before rope
        q_normed, k_normed = rms_norm(q, **attn["q_norm"], eps=eps), rms_norm(
            k, **attn["k_norm"], eps=eps)
    q_rot, k_rot = rope(q_normed, cos, sin), rope(k_normed, cos, sin)
    mask = future_mask(x.shape[-2], x.shape[-2], x.dtype)
    pattern = attention_weights(q_rot, repeat_kv(k_rot, n_head // n_kv_head), mask)
    z = pattern @ repeat_kv(v, n_head // n_kv_head)  # [..., n_head, n_seq, d_head]
    out = linear(merge_heads(z), **attn["o_proj"])  # [..., n_seq, n_embd]
    return out, {"q": q, "k": k, "v": v, "q_rot": q_rot, "k_rot": k_rot, "pattern": pattern,
                 "z": z}


def self_attn_backward(dout: np.ndarray, x: np.ndarray, attn: dict, cos: np.ndarray,
                       sin: np.ndarray, eps: float, kept: dict) -> tuple[np.ndarray, dict]:
    """Through the attention, given self_attn_forward's values: dx and the grads of attn."""
    # dout, x [..., n_seq, n_embd] -> dx [..., n_seq, n_embd]
    q_rot, k_rot, v = kept["q_rot"], kept["k_rot"], kept["v"]
    dmerged, do_proj = linear_backward(dout, merge_heads(kept["z"]), **attn["o_proj"])
    dq, dk, dv = attention_backward(split_heads(dmerged, q_rot.shape[-3]), q_rot, k_rot, v,
                                    kept["pattern"])
    dq, dk = rope_backward(dq, cos, sin), rope_backward(dk, cos, sin)
    grads = {"o_proj": do_proj}
    if "q_norm" in attn:  # each head's d_head features normed, one weight for every head
        dq, grads["q_norm"] = rms_norm_backward(dq, kept["q"], **attn["q_norm"], eps=eps)
        dk, grads["k_norm"] = rms_norm_backward(dk, kept["k"], **attn["k_norm"], eps=eps)
    dx = np.zeros_like(x)
    for name, d in (("q", dq), ("k", dk), ("v", dv)):
        dx_part, grads[f"{name}_proj"] = linear_backward(merge_heads(d), x, **attn[f"{name}_proj"])
        dx += dx_part
    return dx, grads


def block_forward(x: np.ndarray, block: dict, n_head: int, n_kv_head: int, cos: np.ndarray,
                  sin: np.ndarray, eps: float) -> tuple[np.ndarray, dict]:
    """model.py's block, and what block_backward reads."""
    # x [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    attn_out, attn = self_attn_forward(rms_norm(x, **block["input_layernorm"], eps=eps),
                                       block["self_attn"], n_head, n_kv_head, cos, sin, eps)
    x1 = x + attn_out
    out = x1 + swiglu(rms_norm(x1, **block["post_attention_layernorm"], eps=eps), **block["mlp"])
    return out, {"resid_pre": x, "resid_mid": x1, "attn": attn}


def block_backward(dout: np.ndarray, block: dict, cos: np.ndarray, sin: np.ndarray, eps: float,
                   kept: dict) -> tuple[np.ndarray, dict]:
    """Through one block, given block_forward's values: dx and dblock."""
    # forward: x1 = x + attn(norm_1(x)); out = x1 + mlp(norm_2(x1)). A residual passes dout on.
    x, x1 = kept["resid_pre"], kept["resid_mid"]
    post_norm, input_norm = block["post_attention_layernorm"], block["input_layernorm"]
    dh, dmlp = swiglu_backward(dout, rms_norm(x1, **post_norm, eps=eps), **block["mlp"])
    dx1_norm, dpost_norm = rms_norm_backward(dh, x1, **post_norm, eps=eps)
    dx1 = dout + dx1_norm
    dh, dattn = self_attn_backward(dx1, rms_norm(x, **input_norm, eps=eps), block["self_attn"],
                                   cos, sin, eps, kept["attn"])
    dx_norm, dinput_norm = rms_norm_backward(dh, x, **input_norm, eps=eps)
    return dx1 + dx_norm, {"input_layernorm": dinput_norm, "self_attn": dattn,
                           "post_attention_layernorm": dpost_norm, "mlp": dmlp}


def unembedding(params: dict) -> np.ndarray:
    """The head's [n_vocab, n_embd] weights: lm_head's, or the embedding's when tied."""
    return params.get("lm_head", params["embed_tokens"])["weight"]


def loss_and_grads(inputs: np.ndarray, targets: np.ndarray, params: dict, n_head: int,
                   n_kv_head: int, d_head: int, rope_theta: float,
                   norm_eps: float) -> tuple[float, dict]:
    """Mean cross-entropy of the targets after each input (nats), and its gradient for each
    array of params, in the same nested structure. inputs, targets: [n_batch, n_seq] ids."""
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    embed = params["embed_tokens"]["weight"]
    cos, sin = rope_angles(0, inputs.shape[-1], d_head, rope_theta)  # [n_seq, d_head] each
    x, kept = embed[inputs], []  # [..., n_seq, n_embd]
    for block in params["blocks"]:
        x, values = block_forward(x, block, n_head, n_kv_head, cos, sin, norm_eps)
        kept.append(values)
    normed = rms_norm(x, **params["norm"], eps=norm_eps)
    loss, dlogits = cross_entropy(linear(normed, unembedding(params)), targets)
    dnormed, dhead = linear_backward(dlogits, normed, unembedding(params))
    dx, dnorm = rms_norm_backward(dnormed, x, **params["norm"], eps=norm_eps)
    dblocks = [None] * len(kept)
    for i in reversed(range(len(kept))):
        dx, dblocks[i] = block_backward(dx, params["blocks"][i], cos, sin, norm_eps, kept[i])
    dembed = np.zeros_like(embed)
    np.add.at(dembed, inputs.reshape(-1), dx.reshape(-1, dx.shape[-1]))  # seen twice: adds twice
    grads = {"embed_tokens": {"weight": dembed}, "blocks": dblocks, "norm": dnorm}
    if "lm_head" in params:
        return loss, grads | {"lm_head": dhead}
    grads["embed_tokens"]["weight"] += dhead["weight"]  # tied: the head is the embedding again
    return loss, grads
