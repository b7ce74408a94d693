"""The backward pass of GPT-2 in NumPy: each forward function's gradient, the loss, the chain.

Read it beside model.py, in the same order. Each forward function there has a backward function
here with the same name and `_backward`: it takes the gradient of the loss with respect to the
forward function's output (`dout`, the output's shape) and the forward's inputs, and returns the
gradients with respect to those inputs and weights. `cross_entropy` is the loss and its
gradient; `loss_and_grads` is the whole chain, from ids to a gradient for every array of params.

The forward values come from model.py's own functions, run once by `inside.trace`, which keeps
every intermediate array; nothing of the forward math is written a second time. No state, no
I/O. Tests check every function against torch's autograd and against finite differences;
docs/backward.md teaches them one by one. train.py uses them to learn.
"""

import numpy as np

from .inside import trace
from .model import layer_norm, merge_heads, softmax, split_heads


def gelu_backward(dout: np.ndarray, x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    """d gelu(x) / dx times dout, for the tanh form of gelu."""
    inner = 0.7978845608028654 * (x + 0.044715 * (x * x * x))  # gelu = 0.5 x (1 + tanh(inner))
    t = np.tanh(inner)
    d_inner = 0.7978845608028654 * (1 + 3 * 0.044715 * (x * x))
    return dout * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)


def softmax_backward(dout: np.ndarray, p: np.ndarray) -> np.ndarray:  # [..., n] -> [..., n]
    """Through softmax, given its output p: each score moves every probability of its row."""
    return p * (dout - np.sum(dout * p, axis=-1, keepdims=True))


def layer_norm_backward(dout: np.ndarray, x: np.ndarray, g: np.ndarray, b: np.ndarray,
                        eps: float = 1e-5) -> tuple[np.ndarray, dict]:
    """Through layer_norm: dx [..., n_embd] and {"g", "b"} [n_embd] each."""
    # dout, x [..., n_seq, n_embd] -> dx [..., n_seq, n_embd]
    normed = layer_norm(x, np.ones_like(g), np.zeros_like(b), eps)  # (x - mean) / std
    rstd = 1 / np.sqrt(np.var(x, axis=-1, keepdims=True) + eps)  # [..., n_seq, 1]
    dnormed = dout * g
    # the mean and the variance depend on every feature, hence the two averages taken away
    dx = rstd * (dnormed - np.mean(dnormed, axis=-1, keepdims=True)
                 - normed * np.mean(dnormed * normed, axis=-1, keepdims=True))
    flat = (-1, x.shape[-1])
    return dx, {"g": np.sum((dout * normed).reshape(flat), axis=0),
                "b": np.sum(dout.reshape(flat), axis=0)}


def linear_backward(dout: np.ndarray, x: np.ndarray, w: np.ndarray,
                    b: np.ndarray) -> tuple[np.ndarray, dict]:
    """Through linear: dx [..., n_in] and {"w": [n_in, n_out], "b": [n_out]}."""
    # dout [..., n_out], x [..., n_in] -> dx [..., n_in]; the weights' gradients sum positions
    dout_2d, x_2d = dout.reshape(-1, dout.shape[-1]), x.reshape(-1, x.shape[-1])
    dx = (dout_2d @ w.T).reshape(x.shape)
    return dx, {"w": x_2d.T @ dout_2d, "b": np.sum(dout_2d, axis=0)}


def ffn_backward(dout: np.ndarray, x: np.ndarray, c_fc: dict, c_proj: dict, pre: np.ndarray,
                 post: np.ndarray) -> tuple[np.ndarray, dict]:
    """Through ffn, given GELU's input (pre) and output (post): dx and {"c_fc", "c_proj"}."""
    # dout [..., n_seq, n_embd], pre and post [..., n_seq, 4 * n_embd] -> dx [..., n_seq, n_embd]
    dpost, dc_proj = linear_backward(dout, post, **c_proj)  # [..., n_seq, 4 * n_embd]
    dx, dc_fc = linear_backward(gelu_backward(dpost, pre), x, **c_fc)  # [..., n_seq, n_embd]
    return dx, {"c_fc": dc_fc, "c_proj": dc_proj}


def attention_backward(dout: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                       pattern: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Through causal attention, given its weights (pattern): dq, dk, dv.

    The mask adds a constant, so it passes nothing back: where it hid a key the pattern is 0,
    and so is that score's gradient."""
    # dout [..., n_q, d_head]; pattern [..., n_q, n_k]
    dv = pattern.swapaxes(-1, -2) @ dout  # [..., n_k, d_head]
    dscores = softmax_backward(dout @ v.swapaxes(-1, -2), pattern)  # [..., n_q, n_k]
    dscores /= q.shape[-1] ** 0.5  # the forward divided the scores by sqrt(d_head)
    return dscores @ k, dscores.swapaxes(-1, -2) @ q, dv


def mha_backward(dout: np.ndarray, x: np.ndarray, c_attn: dict, c_proj: dict, n_head: int,
                 q: np.ndarray, k: np.ndarray, v: np.ndarray, pattern: np.ndarray,
                 z: np.ndarray) -> tuple[np.ndarray, dict]:
    """Through mha, given the heads' q, k, v, pattern and outputs z: dx, {"c_attn", "c_proj"}."""
    # dout, x [..., n_seq, n_embd]; q, k, v, z [..., n_head, n_seq, d_head] -> dx like x
    dmerged, dc_proj = linear_backward(dout, merge_heads(z), **c_proj)  # [..., n_seq, n_embd]
    dq, dk, dv = attention_backward(split_heads(dmerged, n_head), q, k, v, pattern)
    dqkv = np.concatenate([merge_heads(d) for d in (dq, dk, dv)], axis=-1)  # [.., 3 * n_embd]
    dx, dc_attn = linear_backward(dqkv, x, **c_attn)
    return dx, {"c_attn": dc_attn, "c_proj": dc_proj}


def transformer_block_backward(dout: np.ndarray, block: dict, n_head: int,
                               values: dict, at: str) -> tuple[np.ndarray, dict]:
    """Through one block, given its traced values (names starting with `at`): dx and dblock."""
    # dout [..., n_seq, n_embd] -> dx [..., n_seq, n_embd]; dblock shaped as block
    # forward: x1 = x + mha(ln_1(x)); x2 = x1 + ffn(ln_2(x1)). A residual passes dout on as is.
    x, x1 = values[f"{at}resid_pre"], values[f"{at}resid_mid"]
    dh, dmlp = ffn_backward(dout, layer_norm(x1, **block["ln_2"]), **block["mlp"],
                            pre=values[f"{at}mlp.pre"], post=values[f"{at}mlp.post"])
    dx1_norm, dln_2 = layer_norm_backward(dh, x1, **block["ln_2"])
    dx1 = dout + dx1_norm
    heads = {name: values[f"{at}attn.{name}"] for name in ("q", "k", "v", "pattern", "z")}
    dh, dattn = mha_backward(dx1, layer_norm(x, **block["ln_1"]), **block["attn"],
                             n_head=n_head, **heads)
    dx_norm, dln_1 = layer_norm_backward(dh, x, **block["ln_1"])
    return dx1 + dx_norm, {"mlp": dmlp, "attn": dattn, "ln_1": dln_1, "ln_2": dln_2}


def embed_backward(dx: np.ndarray, inputs: np.ndarray, wte: np.ndarray,
                       wpe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Through embed, x = wte[inputs] + wpe[:n_seq]: dwte (a row per token seen) and dwpe."""
    # dx [..., n_seq, n_embd], inputs [..., n_seq] -> [n_vocab, n_embd], [n_ctx, n_embd]
    n_embd = dx.shape[-1]
    dwte = np.zeros_like(wte)
    np.add.at(dwte, inputs.reshape(-1), dx.reshape(-1, n_embd))  # a token seen twice adds twice
    dwpe = np.zeros_like(wpe)
    dwpe[: dx.shape[-2]] = np.sum(dx.reshape(-1, *dx.shape[-2:]), axis=0)
    return dwte, dwpe


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean negative log-probability of the targets, in nats, and its gradient w.r.t. logits."""
    # logits [..., n_seq, n_vocab], targets [..., n_seq]
    p = softmax(logits)
    picked = np.take_along_axis(p, targets[..., None], axis=-1)  # [..., n_seq, 1]
    # the floor only matters below float32's smallest normal number (log would give -inf)
    loss = -np.mean(np.log(np.maximum(picked, np.finfo(p.dtype).tiny)))
    np.put_along_axis(p, targets[..., None], picked - 1, axis=-1)  # p - one_hot: in place
    p /= targets.size  # the mean over every position of every sequence
    return float(loss), p


def needed(n_layer: int) -> set[str]:
    """The traced values the backward pass reads (not the scores before the softmax)."""
    per_block = ("resid_pre", "resid_mid", "resid_post", "attn.q", "attn.k", "attn.v",
                 "attn.pattern", "attn.z", "mlp.pre", "mlp.post")
    return {"ln_final", *(f"blocks.{i}.{name}" for i in range(n_layer) for name in per_block)}


def loss_and_grads(inputs: np.ndarray, targets: np.ndarray, params: dict,
                   n_head: int) -> tuple[float, dict]:
    """Mean cross-entropy of the targets after each input (nats), and its gradient for each
    array of params, in the same nested structure. inputs, targets: [n_batch, n_seq] ids."""
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    n_layer = len(params["blocks"])
    logits, values = trace(inputs, params, n_head, names=needed(n_layer))  # model.py's forward
    loss, dlogits = cross_entropy(logits, targets)  # [..., n_seq, n_vocab]
    del logits  # with dlogits, the step's largest arrays: one is enough from here on
    # the unembedding, logits = ln_final @ wte.T, is wte's second use and second gradient
    ln_final = values["ln_final"]
    dwte_out = (dlogits.reshape(-1, dlogits.shape[-1]).T
                @ ln_final.reshape(-1, ln_final.shape[-1]))  # [n_vocab, n_embd]
    dx = dlogits @ params["wte"]  # [..., n_seq, n_embd]
    del dlogits
    dx, dln_f = layer_norm_backward(dx, values[f"blocks.{n_layer - 1}.resid_post"],
                                    **params["ln_f"])
    dblocks = [None] * n_layer
    for i in reversed(range(n_layer)):
        dx, dblocks[i] = transformer_block_backward(dx, params["blocks"][i], n_head, values,
                                                    f"blocks.{i}.")
    dwte, dwpe = embed_backward(dx, inputs, params["wte"], params["wpe"])
    return loss, {"wte": dwte + dwte_out, "wpe": dwpe, "blocks": dblocks, "ln_f": dln_f}
