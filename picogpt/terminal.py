"""What the picogpt command prints: streamed text, several samples, step candidates, scores.

Owns the terminal views. cli.py decides what to run and calls these; they print to stdout
(progress to stderr) and hold no other logic than laying out what the engine returned.
"""

import codecs
import contextlib
import json
import math
import sys
import threading
from collections.abc import Callable, Iterable, Iterator

import numpy as np
from tqdm import tqdm

from .encoder import Encoder
from .inside import visible
from .sampling import Step
from .score import score_windows


def stream_text(ids: Iterable[int], encoder: Encoder, stop: str | None = None) -> Iterator[str]:
    """The text of ids as they arrive, cut before `stop`.

    A character split across tokens waits for its last byte, and text that could be the start
    of `stop` waits until the next tokens show whether it is.
    """
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    held = ""
    for next_id in ids:
        held += utf8.decode(encoder.decode_bytes([next_id]))
        if stop and stop in held:
            yield held[: held.index(stop)]
            return
        n_keep = next((n for n in range(min(len(stop), len(held)), 0, -1)  # a stop's beginning
                       if held.endswith(stop[:n])), 0) if stop else 0
        yield held[: len(held) - n_keep]
        held = held[len(held) - n_keep :]
    yield held + utf8.decode(b"", final=True)  # bytes left over become U+FFFD, as in decode


def print_samples(steps: Iterable[tuple[int, int]], n_samples: int, encoder: Encoder,
                  stop: str | None) -> None:
    """Print each of several samples, whole, under a line naming it, once all are done."""
    # The samples grow together, one token each per step; interleaving them on screen would be
    # unreadable, so a progress line on stderr shows the steps and the text waits until the end
    # (or Ctrl-C, which prints what each sample has so far).
    samples: list[list[int]] = [[] for _ in range(n_samples)]
    show_progress, step = sys.stderr.isatty(), 0
    try:
        for i, token in steps:
            samples[i].append(token)
            if show_progress and len(samples[i]) > step:
                step = len(samples[i])
                print(f"\rpicogpt: step {step}", end="", file=sys.stderr, flush=True)
    finally:
        if show_progress:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        for i, ids in enumerate(samples):
            print(f"{'=' * 20} sample {i + 1} of {n_samples} {'=' * 20}")
            print("".join(stream_text(ids, encoder, stop)), flush=True)


def keep(step: Step, steps: list[Step]) -> int:
    """Note a step and pass its token on (the page needs every step after streaming)."""
    steps.append(step)
    return step.token


def print_steps(ids: Iterable[Step], steps: list[Step], encoder: Encoder, n: int) -> None:
    """Print each step as it comes: the token chosen, the entropy, and n candidates with their
    probabilities before -> after the filters, in aligned columns."""
    def cell(token_id: int) -> str:
        return ("'" + visible(encoder.decode_bytes([token_id])) + "'")[:14]

    print(f"{'step':>4}  {'chosen':<14} {'entropy':>7}  candidates: probability before -> "
          f"after the filters")
    for number, step in enumerate(ids, 1):
        steps.append(step)
        columns = "  ".join(f"{cell(int(i)):<14} {b:<8.3g} -> {a:<8.3g}"
                            for i, b, a in zip(step.ids[:n], step.before, step.after))
        print(f"{number:>4}  {cell(step.token):<14} {step.entropy:7.3f}  {columns}", flush=True)


@contextlib.contextmanager
def notice_after(seconds: float, message: str) -> Iterator[Callable[[], None]]:
    """Print message on stderr after seconds, unless the function this yields is called first
    or the block ends."""
    timer = threading.Timer(seconds, lambda: print(message, file=sys.stderr, flush=True))
    timer.daemon = True  # never keeps the process alive
    timer.start()
    try:
        yield timer.cancel
    finally:
        timer.cancel()


def call_first(function: Callable[[], None], items: Iterable) -> Iterator:
    """items as they come, calling function when the first arrives (or when none does)."""
    try:
        for item in items:
            function()  # notice_after's cancel: calling it again does nothing
            yield item
    finally:
        function()


def print_scores(text: str, ids: list[int], params: dict, n_head: int, encoder: Encoder,
                 stride: int | None, top: int, as_json: bool,
                 started: Callable[[], None] = lambda: None) -> None:
    """Score ids, then print one line per token and a summary, or all of it as JSON;
    `started` is called when the first window is scored."""
    # The scores stay in the windows' arrays and each line is made as it is printed: a
    # 100,000-token file would otherwise hold ~40 MB of per-token Python objects.
    windows = []
    with tqdm(total=len(ids), unit="tok", desc="scoring", leave=False, disable=None) as bar:
        for window in call_first(started, score_windows(ids, params, n_head, stride, top)):
            windows.append(window)
            bar.update(len(window.logprobs))
    logprobs, ranks, top_ids, top_probs = (np.concatenate([getattr(w, name) for w in windows])
                                           for name in ("logprobs", "ranks", "top_ids",
                                                        "top_probs"))
    nll = -math.fsum(logprobs.tolist())
    n_bytes = len(text.encode("utf-8"))
    summary = {"n_tokens": len(ids), "nll_nats": nll, "perplexity": math.exp(nll / len(ids)),
               "bits_per_byte": nll / math.log(2) / n_bytes, "n_bytes": n_bytes}
    if as_json:  # one JSON object, written a token at a time
        sys.stdout.write(json.dumps(summary)[:-1] + ', "tokens": [')
        for j, token_id in enumerate(ids):
            token = {"id": token_id, "logprob": float(logprobs[j]), "rank": int(ranks[j]),
                     "top": [{"id": int(i), "prob": float(p)}
                             for i, p in zip(top_ids[j], top_probs[j])]}
            for entry in [token, *token["top"]]:
                entry["text"] = encoder.decode([entry["id"]])
            sys.stdout.write((", " if j else "") + json.dumps(token, ensure_ascii=False))
        print("]}")
        return
    width = max(len(visible(encoder.decode_bytes([token_id]))) for token_id in ids) + 2
    print(f"{'token':<{width}} {'logprob':>9} {'rank':>6}" + ("  expected" if top else ""))
    for j, token_id in enumerate(ids):
        expected = "  ".join(f"'{visible(encoder.decode_bytes([int(i)]))}' {p:.3g}"
                             for i, p in zip(top_ids[j], top_probs[j]))
        shown = "'" + visible(encoder.decode_bytes([token_id])) + "'"
        print(f"{shown:<{width}} {logprobs[j]:9.3f} {ranks[j]:6d}"
              + (f"  {expected}" if top else ""))
    print(f"{summary['n_tokens']} tokens, {n_bytes} bytes: total NLL {nll:.3f} nats, "
          f"perplexity {summary['perplexity']:.3f} per token, "
          f"{summary['bits_per_byte']:.4f} bits per byte")
