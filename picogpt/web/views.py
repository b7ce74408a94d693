"""The views both pages draw, as data: a text's tokens, attention, head scores, logit lens and
wpe similarity, computed by the same functions that generate text: the model's kind's forward
with hooks and its logit lens (kinds.py; GPT-2's are inside.py's), and inside.py's scores. The
explain page (page.py) and the explore session (session.py) take them from here; views.html,
views.js and views.css draw them."""

import base64
from collections.abc import Callable

import numpy as np

from ..chars import Chars
from ..encoder import Encoder
from ..inside import (
    cosine_similarity,
    first_token_job,
    induction_job,
    job_weights,
    lens_rows,
    previous_token_job,
    residual_names,
)
from ..kinds import kind_of
from ..llama.inside import kv_head_of
from ..sampling import Step
from ..show import characters, piece, shown
from ..wordpiece import WordPiece

# Attention is the bulk of the page: n_layer * n_head * n^2 float32s. Past this many bytes
# (the 124M model's 144 heads at 72 positions) the page keeps the last positions only.
ATTENTION_BYTES = 3_000_000
N_WPE = 128  # positions in the wpe similarity picture
# Queries whose attention is made at once: one block's whole pattern at 1,024 positions is 50 MB
# on the 124M shape, and the softmax copies it twice (docs/performance.md, "The inside views").
ATTENTION_ROWS = 64


def views(ids: list[int], params: dict, hparams: dict | int, encoder: Encoder,
          pause: Callable[[], None] = lambda: None, lens_kept: bool = False) -> dict:
    """The views of a text that every page shows: its tokens (and the vocabulary's kind, "bpe",
    "wordpiece" or "chars", which the tokens' caption names), attention, head scores, logit lens and
    wpe similarity (none for a model without a learned position table). hparams are the model's
    (a GPT-2's n_head alone will do); each query head is named with the key/value head it reads
    ("kv_heads": a LLaMA's n_kv_head are shared by groups of query heads; a GPT-2's are its own
    query heads). pause is called after the forward pass and after each of the logit lens's
    rows, the long part (the explore server stops there once the text has changed). With
    lens_kept, the logit lens covers only the positions the attention keeps, as the explore
    page asks on each edit (every position costs n_layer + 1 products with the unembedding)."""
    hparams = {"n_head": hparams} if isinstance(hparams, int) else hparams  # a GPT-2's n_head
    kind, n_head = kind_of(hparams), hparams["n_head"]
    n_kv_head = hparams.get("n_kv_head", n_head)  # GPT-2: a key/value head per query head
    n_layer, n_seq = len(params["blocks"]), len(ids)
    per_position = n_layer * n_head * 4  # bytes of attention per (query, key) pair
    n_kept = min(n_seq, int((ATTENTION_BYTES / per_position) ** 0.5))
    first = n_seq - n_kept  # attention kept for positions first..n_seq-1, as queries and keys
    lens_first = first if lens_kept else 0
    kept = Kept(ids, n_layer, n_head, first, lens_first)
    kind.run_with_hooks(ids, params, hparams, kept.hook, rows=ATTENTION_ROWS)
    pause()
    rows = []
    lens = lens_rows(kept.streams, params, top=3,  # the kind's final norm and unembedding
                     final=lambda x: kind.lens(x, params, hparams))
    for row in lens:  # a row is made as the loop asks for it
        rows.append(row)
        pause()
    lens_ids, lens_probs = map(np.stack, zip(*rows))  # [n_layer + 1, n_seq - lens_first, 3]
    wpe = params.get("wpe")  # rotary positions (a LLaMA) have no table to picture
    return {
        "n_layer": n_layer, "n_head": n_head, "n_kv_head": n_kv_head,
        "kv_heads": [kv_head_of(h, n_head, n_kv_head) for h in range(n_head)],
        "vocabulary": "wordpiece" if isinstance(encoder, WordPiece) else (
            "chars" if isinstance(encoder, Chars) else "bpe"),
        "tokens": [piece(encoder, i) for i in ids],
        "characters": characters([encoder.decode_bytes([i]) for i in ids]),
        "attention": {"first": first, "n": n_kept, "data": float32_base64(kept.attention)},
        "heads": {kind: None if job is None else
                  kept.weights[kind][..., job[1]].mean(axis=-1).round(4).tolist()
                  for kind, job in kept.jobs.items()},
        "lens": {"first": lens_first,
                 "text": [[shown(encoder, i) for i in row] for row in lens_ids[:, :, 0]],
                 "probs": lens_probs[:, :, 0].round(4).tolist(),
                 "top": [[" / ".join(f"{shown(encoder, i)} {p:.3f}"
                                     for i, p in zip(ids_, probs_))
                          for ids_, probs_ in zip(row_ids, row_probs)]
                         for row_ids, row_probs in zip(lens_ids, lens_probs)]},
        "wpe": None if wpe is None else {"n": len(wpe[:N_WPE]), "data": float32_base64(
            cosine_similarity(np.asarray(wpe[:N_WPE])))},
    }


class Kept:
    """What the views keep of a forward pass, as the kind's run_with_hooks shows it: the residual
    streams at the lens's positions, the attention among the last positions, and for each head
    score every query's weight on its job's keys, [n_layer, n_head, n_seq]. Nothing else
    stays."""

    def __init__(self, ids: list[int], n_layer: int, n_head: int, first: int, lens_first: int):
        n_seq, n_kept = len(ids), len(ids) - first
        self.first, self.lens_first, self.lens = first, lens_first, set(residual_names(n_layer))
        self.streams: dict[str, np.ndarray] = {}
        self.attention = np.zeros((n_layer, n_head, n_kept, n_kept), np.float32)
        self.jobs = {"previous": None, "first": None, "induction": None}  # None: no such query
        if n_seq > 1:
            self.jobs["previous"], self.jobs["first"] = (previous_token_job(n_seq),
                                                        first_token_job(n_seq))
        if len(set(ids)) < n_seq:  # some token occurs twice
            self.jobs["induction"] = induction_job(ids)
        self.weights = {kind: np.zeros((n_layer, n_head, n_seq), np.float32)
                        for kind, job in self.jobs.items() if job is not None}

    def hook(self, name: str, value: np.ndarray, row: int = 0) -> None:
        """Keep what the views need of one named value; row is a pattern's first query."""
        if name in self.lens:
            self.streams[name] = value[self.lens_first:].copy()  # [n_seq - lens_first, n_embd]
        elif name.endswith(".attn.pattern"):  # [n_head, rows, n_seq], queries row, row + 1, ...
            layer, end = int(name.split(".")[1]), row + value.shape[-2]
            for kind, weights in self.weights.items():
                keys = self.jobs[kind][0][row:end]
                weights[layer, :, row:end] = job_weights(value, keys)
            if end > self.first:
                start = max(row, self.first)
                self.attention[layer, :, start - self.first : end - self.first] = value[
                    :, start - row :, self.first :]


def candidates(step: Step, encoder: Encoder) -> list[dict]:
    """A step's candidates as the page shows them: each token with its probabilities."""
    return [{**piece(encoder, int(i)), "before": float(b), "after": float(a)}
            for i, b, a in zip(step.ids, step.before, step.after)]


def float32_base64(array: np.ndarray) -> str:
    """An array's float32 bytes as base64: exact values in a third of JSON's size."""
    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")
