"""The views both pages draw, as data: a text's tokens, attention, head scores, logit lens and
wpe similarity, computed by the same functions that generate text (inside.py's trace and
scores). The explain page (page.py) and the explore session (session.py) take them from here;
views.html, views.js and views.css draw them."""

import base64
from collections.abc import Callable

import numpy as np

from ..chars import Chars
from ..encoder import Encoder
from ..inside import (
    cosine_similarity,
    first_token_score,
    induction_score,
    lens_rows,
    previous_token_score,
    residual_names,
    trace,
)
from ..sampling import Step
from ..show import characters, piece, shown
from ..wordpiece import WordPiece

# Attention is the bulk of the page: n_layer * n_head * n^2 float32s. Past this many bytes
# (the 124M model's 144 heads at 72 positions) the page keeps the last positions only.
ATTENTION_BYTES = 3_000_000
N_WPE = 128  # positions in the wpe similarity picture


def views(ids: list[int], params: dict, n_head: int, encoder: Encoder,
          pause: Callable[[], None] = lambda: None, lens_kept: bool = False) -> dict:
    """The views of a text that every page shows: its tokens (and the vocabulary's kind, "bpe",
    "wordpiece" or "chars", which the tokens' caption names), attention, head scores, logit lens and
    wpe similarity. pause is called after the trace and after each of the logit lens's
    rows, the long part (the explore server stops there once the text has changed). With
    lens_kept, the logit lens covers only the positions the attention keeps, as the explore
    page asks on each edit (every position costs n_layer + 1 products with the unembedding)."""
    n_layer, n_seq = len(params["blocks"]), len(ids)
    per_position = n_layer * n_head * 4  # bytes of attention per (query, key) pair
    n_kept = min(n_seq, int((ATTENTION_BYTES / per_position) ** 0.5))
    first = n_seq - n_kept  # attention kept for positions first..n_seq-1, as queries and keys
    patterns = [f"blocks.{i}.attn.pattern" for i in range(n_layer)]
    _logits, values = trace(ids, params, n_head, names={*patterns, *residual_names(n_layer)})

    pause()
    lens_first = first if lens_kept else 0
    streams = {name: values[name][lens_first:] for name in residual_names(n_layer)}
    rows = []
    for row in lens_rows(streams, params, top=3):  # a row is computed as the loop asks for it
        rows.append(row)
        pause()
    lens_ids, lens_probs = map(np.stack, zip(*rows))  # [n_layer + 1, n_seq - lens_first, 3]
    attention = np.stack([values[name][:, first:, first:] for name in patterns])
    wpe = np.asarray(params["wpe"][:N_WPE])
    heads = {"previous": None, "first": None, "induction": None}
    if n_seq > 1:
        heads["previous"] = previous_token_score(values).round(4).tolist()
        heads["first"] = first_token_score(values).round(4).tolist()
    if len(set(ids)) < n_seq:  # some token occurs twice
        heads["induction"] = induction_score(values, ids).round(4).tolist()
    return {
        "n_layer": n_layer, "n_head": n_head,
        "vocabulary": "wordpiece" if isinstance(encoder, WordPiece) else (
            "chars" if isinstance(encoder, Chars) else "bpe"),
        "tokens": [piece(encoder, i) for i in ids],
        "characters": characters([encoder.decode_bytes([i]) for i in ids]),
        "attention": {"first": first, "n": n_kept, "data": float32_base64(attention)},
        "heads": heads,
        "lens": {"first": lens_first,
                 "text": [[shown(encoder, i) for i in row] for row in lens_ids[:, :, 0]],
                 "probs": lens_probs[:, :, 0].round(4).tolist(),
                 "top": [[" / ".join(f"{shown(encoder, i)} {p:.3f}"
                                     for i, p in zip(ids_, probs_))
                          for ids_, probs_ in zip(row_ids, row_probs)]
                         for row_ids, row_probs in zip(lens_ids, lens_probs)]},
        "wpe": {"n": len(wpe), "data": float32_base64(cosine_similarity(wpe))},
    }


def candidates(step: Step, encoder: Encoder) -> list[dict]:
    """A step's candidates as the page shows them: each token with its probabilities."""
    return [{**piece(encoder, int(i)), "before": float(b), "after": float(a)}
            for i, b, a in zip(step.ids, step.before, step.after)]


def float32_base64(array: np.ndarray) -> str:
    """An array's float32 bytes as base64: exact values in a third of JSON's size."""
    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")
