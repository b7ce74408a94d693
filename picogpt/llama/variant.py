"""A training-only block with a switch for each change between GPT-2's block and LLaMA's, for
measuring each change alone (scripts/benchmarks/why_llama.py; docs/why-llama.md).

llama/model.py is the LLaMA block as a learner reads it and as Hugging Face's checkpoints hold
it; this module is the same block with switches that take each change back, so one change at a
time can be trained on GPT-2's block (`python -m picogpt.train --task poems --variant rope`):

    norm       "rms" (LLaMA) or "layer" (GPT-2's LayerNorm, with its bias)
    positions  "rope" (LLaMA) or "learned" (GPT-2's table, wpe)
    mlp        "swiglu" (LLaMA), "gelu" (GPT-2's, tanh form) or "relu2" (ReLU squared)
    n_kv_head  key/value heads (GPT-2: n_head)
    bias       a bias on every linear (GPT-2) or none (LLaMA)
    qk_norm    an RMSNorm on each head's q and k (Qwen3)
    tied       the embedding unembeds (both) or an untied head, lm_head
    zero_proj  o_proj and down_proj start at zero (the speedrun's init), not small

With GPT-2's switches it computes model.gpt2's logits, and with LLaMA's llama/model.py's (tests
hold both). Weights are named as llama/model.py's; a learned table is "wpe", a LayerNorm's and a
linear's bias "bias". `loss_and_grads` is the fast step, as llama/fasttrain.py's; the engine
side (`extend`, `prefill`, `decode_step`) runs its KV cache, llama/engine.py's. NumPy, float32.
"""

import numpy as np

from .. import kvcache
from ..fasttrain import softmax_cross_entropy_
from ..model import future_mask, merge_heads, split_heads
from .engine import LlamaCache, n_vocab  # noqa: F401 (the engine's names generate.py reads)
from .fasttrain import attention, attention_backward, linear, linear_backward, side_by_side
from ..optim import GROUPS
from ..tree import flatten
from .model import rope, rope_angles
from .train import default_n_ffn

KVCache = LlamaCache  # its cache holds n_kv_head heads, as the LLaMA kind's
# The switches of each block: LLaMA's as llama/train.py trains it, and GPT-2's
LLAMA = {"norm": "rms", "positions": "rope", "mlp": "swiglu", "bias": False, "qk_norm": False,
         "tied": True, "zero_proj": False}
GPT2 = {**LLAMA, "norm": "layer", "positions": "learned", "mlp": "gelu", "bias": True}
CHOICES = {"norm": ("rms", "layer"), "positions": ("rope", "learned"),
           "mlp": ("swiglu", "gelu", "relu2")}
# --variant's names: what each is, the block it changes and how; "half": n_head / 2 key/value
# heads, each shared by two query heads (LLaMA's default here), else n_head
VARIANTS = {
    "gpt2": ("GPT-2's block, through this module", GPT2, {}, "all"),
    "llama": ("LLaMA's block, through this module", LLAMA, {}, "half"),
    "rope": ("rotary positions alone on GPT-2's block", GPT2, {"positions": "rope"}, "all"),
    "rmsnorm": ("RMSNorm alone on GPT-2's block", GPT2, {"norm": "rms"}, "all"),
    "swiglu": ("SwiGLU alone on GPT-2's block", GPT2, {"mlp": "swiglu"}, "all"),
    "gqa": ("shared key/value heads alone on GPT-2's block", GPT2, {}, "half"),
    "relu2": ("ReLU squared for SwiGLU, on LLaMA's block", LLAMA, {"mlp": "relu2"}, "half"),
    "qk-norm": ("q/k norms on LLaMA's block", LLAMA, {"qk_norm": True}, "half"),
    "zero-proj": ("o_proj and down_proj from zero, on LLaMA's block", LLAMA,
                  {"zero_proj": True}, "half"),
    "untied": ("an untied head on LLaMA's block", LLAMA, {"tied": False}, "half"),
}


def variant_hparams(name: str, n_vocab: int, n_ctx: int, n_embd: int, n_head: int,
                    n_layer: int) -> dict:
    """The hparams of --variant name at a run's shape."""
    _about, base, changed, kv = VARIANTS[name]
    n_kv_head = n_head // 2 if kv == "half" and n_head % 2 == 0 else n_head
    return hparams(n_vocab, n_ctx, n_embd, n_head, n_layer, {**base, **changed}, n_kv_head)


def shapes(hp: dict) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every weight of a variant with these hparams."""
    return {name: leaf.shape for name, leaf in
            flatten(init_params(hp, np.random.default_rng(0))).items()}


def groups(params: dict) -> dict[str, list[str]]:
    """The parameter groups: tables (embed_tokens, lm_head, wpe), gains, biases, matrices."""
    found = {group: [] for group in GROUPS}
    for name in flatten(params):
        group = ("embeddings" if name.split(".")[0] in ("embed_tokens", "lm_head", "wpe") else
                 "biases" if name.endswith(".bias") else
                 "gains" if name.rsplit(".", 2)[-2].endswith("norm") else "matrices")
        found[group].append(name)
    return found


def hparams(n_vocab: int, n_ctx: int, n_embd: int, n_head: int, n_layer: int, switches: dict,
            n_kv_head: int | None = None) -> dict:
    """The shape and switches of a variant (n_kv_head: n_head unless given); the MLP's width is
    GPT-2's 4 n_embd, or SwiGLU's 8/3 n_embd (the same weights in three matrices)."""
    n_ffn = default_n_ffn(n_embd) if switches["mlp"] == "swiglu" else 4 * n_embd
    return {"model": "variant", "n_vocab": n_vocab, "n_ctx": n_ctx, "n_embd": n_embd,
            "n_head": n_head, "n_kv_head": n_kv_head or n_head, "d_head": n_embd // n_head,
            "n_ffn": n_ffn, "n_layer": n_layer, "rope_theta": 10000.0,
            "norm_eps": 1e-6 if switches["norm"] == "rms" else 1e-5, **switches}


def init_params(hp: dict, rng: np.random.Generator) -> dict:
    """GPT-2's and LLaMA's first weights: normal(0, 0.02), the two residual writers scaled by
    1 / sqrt(2 n_layer) (or zero: zero_proj), wpe normal(0, 0.01), gains 1, biases 0."""
    e, d, f = hp["n_embd"], hp["d_head"], hp["n_ffn"]
    residual = 0.0 if hp["zero_proj"] else 0.02 / (2 * hp["n_layer"]) ** 0.5

    def weight(n_out, n_in, std=0.02):
        layer = {"weight": rng.normal(0.0, std, (n_out, n_in)).astype(np.float32)}
        return layer | ({"bias": np.zeros(n_out, np.float32)} if hp["bias"] else {})

    def norm(n=e):
        gain = {"weight": np.ones(n, np.float32)}
        return gain | ({"bias": np.zeros(n, np.float32)} if hp["norm"] == "layer" else {})

    def block():
        attn = {"q_proj": weight(hp["n_head"] * d, e), "k_proj": weight(hp["n_kv_head"] * d, e),
                "v_proj": weight(hp["n_kv_head"] * d, e),
                "o_proj": weight(e, hp["n_head"] * d, residual)}
        if hp["qk_norm"]:
            attn |= {"q_norm": {"weight": np.ones(d, np.float32)},
                     "k_norm": {"weight": np.ones(d, np.float32)}}
        mlp = {"up_proj": weight(f, e), "down_proj": weight(e, f, residual)}
        if hp["mlp"] == "swiglu":
            mlp["gate_proj"] = weight(f, e)
        return {"input_layernorm": norm(), "self_attn": attn,
                "post_attention_layernorm": norm(), "mlp": mlp}

    params = {"embed_tokens": {"weight": rng.normal(0.0, 0.02, (hp["n_vocab"], e))
                               .astype(np.float32)}}
    if hp["positions"] == "learned":
        params["wpe"] = {"weight": rng.normal(0.0, 0.01, (hp["n_ctx"], e)).astype(np.float32)}
    params["blocks"] = [block() for _ in range(hp["n_layer"])]
    params["norm"] = norm()
    if not hp["tied"]:
        params["lm_head"] = {"weight": rng.normal(0.0, 0.02, (hp["n_vocab"], e))
                             .astype(np.float32)}
    return params


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


def stream(ids, params: dict, hp: dict, n_past: int = 0, attends=None) -> tuple:
    """The residual stream after every block, positions from n_past, with each block's values
    (attends: each block's KV cache step, or None: causal attention over ids alone)."""
    ids = np.asarray(ids)
    n_seq = ids.shape[-1]
    cos, sin = rope_angles(n_past, n_seq, hp["d_head"], hp["rope_theta"])
    mask = future_mask(n_seq, n_seq, np.float32)
    x = params["embed_tokens"]["weight"][ids]  # [..., n_seq, n_embd]
    if hp["positions"] == "learned":
        x = x + params["wpe"]["weight"][n_past : n_past + n_seq]
    kept = []
    for i, block in enumerate(params["blocks"]):
        x, values = block_forward(x, block, hp, cos, sin, mask, attends and attends[i])
        kept.append(values)
    return x, kept, (cos, sin)


def logits(ids, params: dict, hp: dict) -> np.ndarray:
    """[..., n_seq] ids -> [..., n_seq, n_vocab]."""
    return final_logits(stream(ids, params, hp)[0], params, hp)


def trace(ids, params: dict, hp: dict, names=None) -> tuple[np.ndarray, dict]:
    """The logits of one [n_seq] row and each block's pattern ("blocks.{i}.attn.pattern")."""
    x, kept, _angles = stream(np.asarray(ids)[None], params, hp)
    out = final_logits(x[0], params, hp)
    values = {f"blocks.{i}.attn.pattern": k["pattern"][0] for i, k in enumerate(kept)}
    return out, {k: v for k, v in values.items() if names is None or k in names}


def loss_and_grads(batch, params: dict, hp: dict) -> tuple[float, dict]:
    """The mean cross-entropy (nats per token) of (inputs, targets) windows, and every
    gradient in params' structure."""
    inputs, targets = (np.atleast_2d(a) for a in batch)
    x, kept, (cos, sin) = stream(inputs, params, hp)
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
    return loss, grads


def extend(ids, params: dict, hp: dict, cache: LlamaCache) -> np.ndarray:
    """The variant on new positions only, through the cache: the last position's logits."""
    x = stream(ids, params, hp, cache.n_past, [layer.attend for layer in cache.layers])[0]
    return final_logits(x[..., -1, :], params, hp)


def prefill(ids, params: dict, hp: dict, cache: LlamaCache, chunk: int | None = None):
    """A prompt into the cache, as kvcache.prefill: the last logits."""
    return kvcache.prefill(ids, params, hp, cache, chunk, extend_with=extend)


def decode_step(next_ids, params: dict, hp: dict, cache: LlamaCache) -> np.ndarray:
    """One new position for each batch row, as kvcache.decode_step."""
    return kvcache.decode_step(next_ids, params, hp, cache, extend_with=extend)


def window_stream(inputs, params: dict, hp: dict) -> np.ndarray:
    """The last residual stream of one scoring window: [n] ids -> [n, n_embd]."""
    return stream(np.asarray(inputs)[None], params, hp)[0][0]


def final_logits(x: np.ndarray, params: dict, hp: dict) -> np.ndarray:
    """The logits of residual rows: the final norm, then the output layer."""
    return linear(norm(x, params["norm"], hp["norm_eps"])[0],
                  params.get("lm_head", params["embed_tokens"])["weight"])


def n_ctx(params: dict, hp: dict) -> int:
    """The longest context: the learned table's rows, or the n_ctx it trained at."""
    return hp["n_ctx"]
