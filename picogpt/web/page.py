"""The offline page of a run: `picogpt "prompt" --explain report.html`.

It turns a run (its ids, the step candidates from `generate_steps`, a `trace` of the whole
sequence) into one self-contained HTML file: the template `explain.html` beside this module,
with the drawing code every page shares (`views.js`, `views.css`) and the run's data inlined.
Nothing is fetched when the page opens: no CDN, no fonts. Every number on the page is one that
`generate_steps`, `trace`, `logit_lens` or the head scores returned. `views` holds what the
--explore page's server computes with the same functions.
"""

import base64
import json
import os
from collections.abc import Callable
from html import escape
from importlib import resources
from pathlib import Path

import numpy as np

from ..encoder import Encoder
from ..errors import PicoGPTError
from ..generate import generate_steps
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
from ..score import score
from ..wordpiece import WordPiece
from .show import characters, piece, shown

# OpenAI's sizes as their hparams.json give them: (n_layer, n_embd, n_head)
RELEASED = {"124M": (12, 768, 12), "355M": (24, 1024, 16), "774M": (36, 1280, 20),
            "1558M": (48, 1600, 25)}
PLAIN = "The cat sat on the mat. It was a warm day, and the children were playing in the park."
GUESS = 7.0  # nats a token: GPT-2 124M scores plain English near 3 to 5; a model that has
# learned nothing near ln(50257) = 10.8, what a uniform guess scores; random weights more
# Attention is the bulk of the page: n_layer * n_head * n^2 float32s. Past this many bytes
# (the 124M model's 144 heads at 72 positions) the page keeps the last positions only.
ATTENTION_BYTES = 3_000_000
N_WPE = 128  # positions in the wpe similarity picture


def titled(model: dict, params: dict, encoder: Encoder) -> dict:
    """model as the pages name it: "random" (random weights, never GPT-2) when the loaded model
    says so (its folder's random-weights.txt), or when a folder of one of OpenAI's sizes
    ("released") does not hold that size's shape or predicts plain English no better than a
    guess (its loss on PLAIN at GUESS nats a token or more)."""
    if model.get("random"):
        return {**model, "kind": "random"}
    if model.get("kind") != "released":
        return model
    shape = tuple(model.get(key) for key in ("n_layer", "n_embd", "n_head"))
    if shape == RELEASED.get(model.get("name")):
        logprobs = score(encoder.encode(PLAIN), params, shape[2], start_id=encoder.start)
        if -float(np.mean(logprobs)) < GUESS:
            return model
    return {**model, "kind": "random"}


def page_data(ids: list[int], n_prompt: int, steps: list[Step], params: dict, n_head: int,
              encoder: Encoder, settings: dict, model: dict) -> dict:
    """Everything the page shows, computed by trace, logit_lens, the head scores and the
    generation API. model names the model: {"name", "kind" ("released", "trained" or "hf"),
    "n_layer", "n_head", "n_embd"}; the page calls it random weights as titled() says."""
    return {"settings": settings, "model": titled(model, params, encoder), "n_prompt": n_prompt,
            "steps": [{"token": piece(encoder, step.token), "entropy": step.entropy,
                       "candidates": candidates(step, encoder)} for step in steps],
            **views(ids, params, n_head, encoder)}


def views(ids: list[int], params: dict, n_head: int, encoder: Encoder,
          pause: Callable[[], None] = lambda: None, lens_kept: bool = False) -> dict:
    """The views of a text that every page shows: its tokens (and the vocabulary's kind, "bpe"
    or "wordpiece", which the tokens' caption names), attention, head scores, logit lens and
    wpe similarity. pause is called after the trace and after each of the logit lens's
    rows, the long part (the explore server stops there once the text has changed). With
    lens_kept, the logit lens covers only the positions the attention keeps, as the explore
    page asks on each edit (every position costs n_layer + 1 products with the unembedding)."""
    n_layer, n_seq = len(params["blocks"]), len(ids)
    per_position = n_layer * n_head * 4  # bytes of attention per (query, key) pair
    n_kept = min(n_seq, int((ATTENTION_BYTES / per_position) ** 0.5))
    first = n_seq - n_kept  # attention kept for positions first..n_seq-1, as queries and keys
    patterns = [f"blocks.{i}.attn.pattern" for i in range(n_layer)]
    _, values = trace(ids, params, n_head, names={*patterns, *residual_names(n_layer)})
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
        "vocabulary": "wordpiece" if isinstance(encoder, WordPiece) else "bpe",
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


def write_page(path: str, data: dict) -> None:
    """Fill the template with the shared drawing code and the data, and write the page."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(fill("explain.html", data))


def fill(template: str, data: dict | None = None) -> str:
    """A page template with the shared views (views.html, views.css, views.js) inlined, and
    data (JSON) in place of /*DATA*/null."""
    files = resources.files("picogpt.web")
    page = files.joinpath(template).read_text(encoding="utf-8")
    for mark, name in (("<!--VIEWS_HTML-->", "views.html"), ("/*VIEWS_CSS*/", "views.css"),
                       ("/*VIEWS_JS*/", "views.js"), ("/*EXPLORE_JS*/", "explore.js")):
        page = page.replace(mark, files.joinpath(name).read_text(encoding="utf-8"))
    if data is not None:
        page = page.replace("/*DATA*/null", json.dumps(data, ensure_ascii=False).translate(
            IN_SCRIPT))
    return page


# JSON inside <script>: "</script>" would end it, "<!--<script>" would make the browser read
# on past its end, and U+2028 ends a line in older JavaScript. As escapes in JSON's strings
# (where alone they can occur) they mean the same characters to JSON.parse and to JavaScript.
IN_SCRIPT = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                           "\u2028": "\\u2028", "\u2029": "\\u2029"})


class Page:
    """A page that Jupyter shows inline, in a frame of its own (the last line of a cell, or
    display(page)); `html` is the whole page, as --explain would write it."""

    def __init__(self, html: str):
        self.html = html

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{escape(self.html, quote=True)}" style="width: 100%; '
                f'height: 900px; border: 1px solid #ddd"></iframe>')


def explain(prompt: str, encoder: Encoder, hparams: dict, params: dict, n_tokens: int = 8,
            model: dict | None = None, **settings) -> Page:
    """The --explain page of a run, for a notebook: n_tokens generated after prompt with
    generate's settings (greedy unless top_k or top_p), then the page of the whole text. model
    names it, as load_model does ({"name", "kind"}); unset, the page calls it random weights."""
    prompt_ids = encoder.prompt_ids(prompt)
    steps = list(generate_steps(prompt_ids, params, hparams["n_head"], n_tokens, candidates=10,
                                encoder=encoder, **settings))
    model = model or {"name": "", "kind": "random"}
    shown = {"top_k": None, "top_p": None, "seed": None, "temperature": 1.0,
             "repetition_penalty": 1.0, **settings}
    data = page_data([*prompt_ids, *(step.token for step in steps)], len(prompt_ids), steps,
                     params, hparams["n_head"], encoder, shown,
                     {**{key: hparams[key] for key in ("n_layer", "n_head", "n_embd")}, **model})
    return Page(fill("explain.html", data))


def check_path(path: str) -> None:
    """Raise PicoGPTError unless a page can be written at path: before any work starts."""
    folder = Path(path).parent
    if Path(path).is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
        reason = ("is a folder" if Path(path).is_dir() else
                  f"is in {folder}, which does not exist" if not folder.is_dir() else
                  f"is in {folder}, which you cannot write to")
        raise PicoGPTError(f"--explain {path} {reason}; give a file name in a folder you can "
                           f"write to.")


def float32_base64(array: np.ndarray) -> str:
    """An array's float32 bytes as base64: exact values in a third of JSON's size."""
    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")
