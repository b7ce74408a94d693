"""What the picogpt command prints: streamed text, several samples, step candidates, scores.

It prints what the engine returns, streamed as it comes: text to stdout, progress to stderr, and no
other logic than the layout.
"""

import codecs
import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

from tqdm import tqdm

from ..encoder import Encoder, added_bytes
from ..errors import _
from ..sampling import Step
from ..score import Scores
from ..show import shown


def stream_text(ids: Iterable[int], encoder: Encoder, stop: str | None = None,
                after: Sequence[int] = ()) -> Iterator[str]:
    """The text of ids as they arrive after the prompt's ids (after), cut before `stop`.

    A character split across tokens waits for its last byte, and text that could be the start
    of `stop` waits until the next tokens show whether it is. The prompt's last token decides
    whether a WordPiece word starts with a space.
    """
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    held, previous = "", list(after[-1:])
    for next_id in ids:
        held += utf8.decode(added_bytes(encoder, previous, next_id))
        previous = [next_id]
        if stop and stop in held:
            yield held[: held.index(stop)]
            return
        n_keep = next((n for n in range(min(len(stop), len(held)), 0, -1)  # a stop's beginning
                       if held.endswith(stop[:n])), 0) if stop else 0
        yield held[: len(held) - n_keep]
        held = held[len(held) - n_keep :]
    yield held + utf8.decode(b"", final=True)  # bytes left over become U+FFFD, as in decode


def print_samples(steps: Iterable[tuple[int, int]], n_samples: int, encoder: Encoder,
                  stop: str | None, after: Sequence[int] = ()) -> None:
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
                print("\r" + _("picogpt: step {step}").format(step=step), end="",
                      file=sys.stderr, flush=True)
    finally:
        if show_progress:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        for i, ids in enumerate(samples):
            print("=" * 20, _("sample {i} of {n}").format(i=i + 1, n=n_samples), "=" * 20)
            print("".join(stream_text(ids, encoder, stop, after)), flush=True)


def predicted(encoder: Encoder, token_id: int) -> str:
    """A predicted token's visible text, quoted; labelled the end where the vocabulary's start
    token also ends a text (a character model's <|start|>), since a prediction of it is the end:
    the start is only ever fed."""
    cell = "'" + shown(encoder, token_id) + "'"
    is_end = encoder.end is not None and encoder.end == encoder.start == token_id
    return _("{token} (end)").format(token=cell) if is_end else cell


def print_steps(steps: Iterable[Step], encoder: Encoder, n: int) -> None:
    """Print each step as it comes: the token chosen, the entropy, and n candidates with their
    probabilities before -> after the filters, in aligned columns."""
    def cell(token_id: int) -> str:
        return predicted(encoder, token_id)[:14]

    # the column names are the names the code and --json use; the sentence is translated
    print(f"{'step':>4}  {'chosen':<14} {'entropy':>7}  "
          + _("candidates: probability before -> after the filters"))
    for number, step in enumerate(steps, 1):
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


def progress(total: int, desc: str) -> tqdm:
    """A progress bar on stderr, shown on a terminal only, gone when done."""
    return tqdm(total=total, unit="tok", desc=desc, leave=False, disable=None)


def print_scores(ids: list[int], scores: Scores, summary: dict, encoder: Encoder, top: int,
                 as_json: bool) -> None:
    """Print one line per token and the summary, or all of it as one JSON object."""
    if as_json:  # written a token at a time: a long text would otherwise be held twice
        sys.stdout.write(json.dumps(summary)[:-1] + ', "tokens": [')
        for j, token_id in enumerate(ids):
            token = {"id": token_id, "logprob": float(scores.logprobs[j]),
                     "rank": int(scores.ranks[j]),
                     "top": [{"id": int(i), "prob": float(p)}
                             for i, p in zip(scores.top_ids[j], scores.top_probs[j])]}
            for entry in [token, *token["top"]]:
                entry["text"] = encoder.decode([entry["id"]])
            sys.stdout.write((", " if j else "") + json.dumps(token, ensure_ascii=False))
        print("]}")
        return
    width = max(len(predicted(encoder, token_id)) for token_id in ids)
    print(f"{'token':<{width}} {'logprob':>9} {'rank':>6}" + ("  expected" if top else ""))
    for j, token_id in enumerate(ids):
        expected = "  ".join(f"{predicted(encoder, i)} {p:.3g}"
                             for i, p in zip(scores.top_ids[j], scores.top_probs[j]))
        cell = predicted(encoder, token_id)
        print(f"{cell:<{width}} {scores.logprobs[j]:9.3f} {scores.ranks[j]:6d}"
              + (f"  {expected}" if top else ""))
    print(_("{n_tokens} tokens, {n_chars} characters ({n_bytes} bytes): total NLL {nll} nats; "
            "{per_token} nats per token (perplexity {perplexity}), {per_char} nats per character "
            "({bits} bits per byte)").format(
                n_tokens=summary["n_tokens"], n_chars=summary["n_chars"],
                n_bytes=summary["n_bytes"], nll=f"{summary['nll_nats']:.3f}",
                per_token=f"{summary['nats_per_token']:.3f}",
                perplexity=f"{summary['perplexity']:.3f}",
                per_char=f"{summary['nats_per_char']:.3f}",
                bits=f"{summary['bits_per_byte']:.4f}"))


def print_text(ids, encoder: Encoder, stop: str | None, after: Sequence[int] = ()) -> None:
    """Stream the text of ids as they come after the prompt's ids, then end the line."""
    for text in stream_text(ids, encoder, stop, after):
        print(text, end="", flush=True)
    print(flush=True)


def reading_notice(where: str):
    """While waiting for the first output: after 2 s, say that the weights are being read."""
    # The weights are memory-mapped: after a restart the first pass reads them all from disk
    # (minutes for 1558M on a slow disk), and a silent wait looks like a hang.
    return notice_after(2.0, _("picogpt: reading the weights in {where} (after a restart they "
                               "come from disk) ...").format(where=where))


def say_outside(encoder, text: str) -> None:
    """One line on stderr naming the words of text the vocabulary has no token for: the model
    reads each as its unknown token ([UNK] in BERT's vocabulary). Not an error."""
    words = list(dict.fromkeys(encoder.outside(text)))
    if words and encoder.unknown is not None:  # without one, encode names them in its error
        unknown = encoder.decode([encoder.unknown])
        said = (_("picogpt: the vocabulary has no token for {words}; the model reads it as "
                  "{unknown}.") if len(words) == 1 else
                _("picogpt: the vocabulary has no token for {words}; the model reads each as "
                  "{unknown}."))
        print(said.format(words=" ".join(words), unknown=unknown), file=sys.stderr)
