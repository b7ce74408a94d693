"""Training a small GPT-2 in NumPy: initial weights, the schedule, batches, the loop.

The gradients come from fasttrain.py's `loss_and_grads` (backward.py's, in fewer passes over
memory; tests hold the two equal); this module learns with them and an optimizer (optim.py,
AdamW by default): GPT-2's initial weights, the learning rate at each step, random windows of a
text's ids, the loop with its progress bar, and the loss on held-out text. What a model learns
from (a text, random runs, poems) is a task's (picogpt/tasks/); the command that reads the data
and writes a model folder, `python -m picogpt.train`, is picogpt/cli/train.py, which this
package's __main__.py runs.

    python -m picogpt.train book.txt --name mine --steps 600
    picogpt "Once upon a time" --model_size mine
    python -m picogpt.train --task induction --name ind   # no text: tasks/induction.py
"""

import math
import sys

import numpy as np
from tqdm import tqdm

from ..backward import cross_entropy
from ..encoder import N_VOCAB
from ..errors import _
from ..fasttrain import loss_and_grads
from ..model import gpt2
from ..optim import AdamW, adamw, leaf_groups  # noqa: F401 (adamw: the one-step face)
from ..tree import tree_map  # noqa: F401 (its name here since the first training)


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


SCHEDULES = ("cosine", "wsd")  # the shapes learning_rate knows, after the warm-up
COOLDOWN = 0.2  # the share of the steps over which "wsd" comes down


def learning_rate(step: int, steps: int, lr: float, warmup: int,
                  schedule: str = "cosine") -> float:
    """The learning rate at step (0 .. steps - 1): a linear rise to lr over the first warmup
    steps (lr * (step + 1) / warmup), then down to lr / 10, which the last step reaches: along
    half a cosine ("cosine"), or ("wsd": warmup-stable-decay) staying at lr until the last
    COOLDOWN of the steps, then along a straight line."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "wsd":
        left = (steps - step - 1) / max(1, round(COOLDOWN * steps))  # 1 .. 0 in the cooldown
        return float(lr * (0.1 + 0.9 * min(1.0, left)))
    done = (step - warmup + 1) / max(1, steps - warmup)  # 0 at the warm-up's end, 1 at the last
    return float(lr * (0.1 + 0.45 * (1 + np.cos(np.pi * done))))  # a float: float32 stays


def batches(ids: np.ndarray, n_batch: int, n_seq: int, rng: np.random.Generator,
            repeats: float = 0.0, n_vocab: int = N_VOCAB, starts: np.ndarray | None = None):
    """Endless (inputs, targets) pairs of [n_batch, n_seq] windows at random places in ids, or
    beginning at random ones of starts (indices into ids; anywhere if none leaves room for a
    window); with repeats, that share of the windows is random tokens with a run of them
    repeated instead."""
    places = None if starts is None else starts[starts < len(ids) - n_seq]
    while True:
        if places is None or not len(places):
            at = rng.integers(0, len(ids) - n_seq, n_batch)[:, None]  # [n_batch, 1]
        else:
            at = rng.choice(places, n_batch)[:, None]
        window = ids[at + np.arange(n_seq + 1)]  # [n_batch, n_seq + 1]
        if repeats:
            for row in np.flatnonzero(rng.random(n_batch) < repeats):
                window[row] = repeated_window(n_seq + 1, n_vocab, rng)
        yield window[:, :-1], window[:, 1:]


def repeated_window(n: int, n_vocab: int, rng: np.random.Generator) -> np.ndarray:
    """n random token ids in which a run of them, between n / 6 and n / 2 long, comes again
    later, after a gap of random length: only the context says what follows in the copy."""
    window = rng.integers(0, n_vocab - 1, n)  # never the last id, <|endoftext|>
    length = int(rng.integers(n // 6, n // 2))
    start = int(rng.integers(0, n - 2 * length + 1))
    again = int(rng.integers(start + length, n - length + 1))
    window[again : again + length] = window[start : start + length]
    return window

class Stopped(KeyboardInterrupt):
    """Ctrl-C during learn: the step it stopped at, and the params and optimizer state there (the
    state of a step is replaced whole, so a stop never leaves half an update)."""

    def __init__(self, step: int, params: dict, state: dict):
        super().__init__()
        self.step, self.params, self.state = step, params, state


class Diverged(Exception):
    """The loss of a step was not a number, or more than twice the first step's: the learning
    rate is too high for this model, and the steps after would only make it worse."""

    def __init__(self, step: int, loss: float, first: float):
        super().__init__(step, loss, first)
        self.step, self.loss, self.first = step, loss, first


def gpt2_step(n_head: int):
    """The step of a GPT-2: (inputs, targets) windows and params -> the loss and gradients."""
    return lambda batch, params: loss_and_grads(*batch, params, n_head)


def learn(params: dict, batches, steps: int, lr: float, warmup: int, step, curve: dict,
          curve_every: int, measure_at=None, state: dict | None = None, optimizer=None,
          groups: dict | None = None, schedule: str = "cosine") -> tuple[dict, float]:
    """The training loop: steps of the optimizer (AdamW's defaults if None) on the batches at
    the schedule's rate, with step(batch, params) -> (loss, grads) (`gpt2_step` for a GPT-2); the
    loss of each step added to curve["loss"], and measure_at(step, params, state) every
    curve_every steps and after the last (the command measures, prints and keeps a checkpoint
    there; it returns what the progress bar shows). state is the optimizer's to go on from (a
    stopped run's: its "step" is where the loop starts), or None to start; groups the model
    kind's parameter groups (kinds.py; by leaf name if None). Returns the params and the last
    step's loss. Ctrl-C raises Stopped, a loss that runs away Diverged."""
    state, shown = state or {"step": 0}, {}
    optimizer = optimizer or AdamW()
    groups = groups or leaf_groups(params)
    bar = tqdm(zip(range(state["step"], steps), batches), total=steps, initial=state["step"],
               desc=_("picogpt: training"), unit="step", file=sys.stderr)
    # a loss that runs away overflows float32 on its way (warnings a learner cannot act on);
    # the run ends at the first such step with one line instead (Diverged)
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for step_number, batch in bar:
                if measure_at and step_number % curve_every == 0:
                    shown = measure_at(step_number, params, state)
                loss, grads = step(batch, params)
                first = curve["loss"][0] if curve["loss"] else loss
                if not math.isfinite(loss) or loss > 2 * first:
                    raise Diverged(step_number, loss, first)
                rate = learning_rate(step_number, steps, lr, warmup, schedule)
                params, state = optimizer.step(params, grads, state, rate, groups)
                curve["loss"].append(round(loss, 4))
                bar.set_postfix(shown | {_("loss"): f"{loss:.3f}"})
            bar.close()
            if measure_at:
                measure_at(steps, params, state)
    except KeyboardInterrupt:
        raise Stopped(state["step"], params, state) from None
    finally:
        bar.close()
    return params, curve["loss"][-1]


def held_out_loss(params: dict, ids: np.ndarray, n_head: int) -> float:
    """The mean loss (nats per token) of a GPT-2 on every token of ids after the first
    (`windowed_loss`). ids are held-out text, never trained on."""
    n_vocab, n_ctx = params["wte"].shape[0], len(params["wpe"])
    return windowed_loss(ids, n_ctx, lambda rows: gpt2(rows, **params, n_head=n_head), n_vocab)


def windowed_loss(ids: np.ndarray, n_ctx: int, logits, n_vocab: int) -> float:
    """The mean loss (nats per token) on every token of ids after the first, ids read in windows
    of n_ctx that follow one another: each token is scored once, with the tokens before it in
    its window as its context. logits(rows) is the model's forward, [n_rows, n_seq] ids ->
    [n_rows, n_seq, n_vocab]."""
    n_rows = max(1, 2**24 // (n_ctx * n_vocab))  # windows at once: logits of about 64 MB
    windows = [ids[start : start + n_ctx + 1] for start in range(0, len(ids) - 1, n_ctx)]
    full = [window for window in windows if len(window) == n_ctx + 1]
    groups = [full[i : i + n_rows] for i in range(0, len(full), n_rows)]
    total = 0.0
    for group in groups + [[window] for window in windows if len(window) < n_ctx + 1]:
        rows = np.stack(group)  # [n_rows, n_seq + 1]: the last window may be shorter
        total += cross_entropy(logits(rows[:, :-1]), rows[:, 1:])[0] * rows[:, 1:].size
    return total / (len(ids) - 1)
