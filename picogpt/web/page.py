"""The offline page of a run: `picogpt "prompt" --explain report.html`.

It turns a run (its ids, the step candidates from `generate_steps`, a `trace` of the whole
sequence) into one self-contained HTML file: the template `explain.html` beside this module,
with the drawing code every page shares (`views.js`, `views.css`) and the run's data inlined.
Nothing is fetched when the page opens: no CDN, no fonts. Every number on the page is one that
`generate_steps`, `trace`, `logit_lens` or the head scores returned (views.py computes them for
both pages).
"""

import json
import os
from html import escape
from importlib import resources
from pathlib import Path

import numpy as np

from ..encoder import Encoder
from ..errors import PicoGPTError, _
from ..files.openai import RELEASED_SHAPES
from ..generate import generate_steps
from ..sampling import Step
from ..score import score
from ..show import piece
from .views import candidates, views
from .words import both_languages

PLAIN = "The cat sat on the mat. It was a warm day, and the children were playing in the park."
GUESS = 7.0  # nats a token: GPT-2 124M scores plain English near 3 to 5; a model that has
# learned nothing near ln(50257) = 10.8, what a uniform guess scores; random weights more


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
    if shape == RELEASED_SHAPES.get(model.get("name")):
        logprobs = score(encoder.encode(PLAIN), params, shape[2], start_id=encoder.start)
        if -float(np.mean(logprobs)) < GUESS:
            return model
    return {**model, "kind": "random"}


def page_data(ids: list[int], n_prompt: int, steps: list[Step], params: dict,
              hparams: dict | int, encoder: Encoder, settings: dict, model: dict) -> dict:
    """Everything the page shows, computed by the model's kind's forward with hooks, its logit
    lens, the head scores and the generation API (hparams: the model's, or a GPT-2's n_head, as
    views.views takes them). model names the model: {"name", "kind" ("released", "trained" or "hf"),
    "n_layer", "n_head", "n_embd"}; the page calls it random weights as titled() says."""
    return {"settings": settings, "model": titled(model, params, encoder), "n_prompt": n_prompt,
            "steps": [{"token": piece(encoder, step.token), "entropy": step.entropy,
                       "candidates": candidates(step, encoder)} for step in steps],
            **views(ids, params, hparams, encoder)}


def write_page(path: str, data: dict) -> None:
    """Fill the template with the shared drawing code and the data, and write the page."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(fill("explain.html", data))


def fill(template: str, data: dict | None = None) -> str:
    """A page template with the shared views (views.html, views.css, views.js) inlined, the
    pages' words from the message catalog in both languages in place of /*WORDS*/null, and
    data (JSON) in place of /*DATA*/null."""
    files = resources.files("picogpt.web")
    page = files.joinpath(template).read_text(encoding="utf-8")
    for mark, name in (("<!--VIEWS_HTML-->", "views.html"), ("/*VIEWS_CSS*/", "views.css"),
                       ("/*VIEWS_JS*/", "views.js"), ("/*EXPLORE_JS*/", "explore.js")):
        page = page.replace(mark, files.joinpath(name).read_text(encoding="utf-8"))
    page = page.replace("/*WORDS*/null", json.dumps(both_languages(), ensure_ascii=False)
                        .translate(IN_SCRIPT))

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
        said = (_("--explain {path} is a folder; give a file name in a folder you can write "
                  "to.") if Path(path).is_dir() else
                _("--explain {path} is in {folder}, which does not exist; give a file name in a "
                  "folder you can write to.") if not folder.is_dir() else
                _("--explain {path} is in {folder}, which you cannot write to; give a file name "
                  "in a folder you can write to."))
        raise PicoGPTError(said.format(path=path, folder=folder))
