"""The decode loop: feed the prompt once, then one token per step, and pick each next token.

Owns `generate`, the loop behind it and the checks of its settings. How a token is picked is
sampling.py's; the keys and values the loop keeps between steps are kvcache.py's. It must not
print, read files or touch global random state: randomness comes only from the per-sample
generators that sampling.py makes from the `seed` argument.
"""

from collections.abc import Iterator, Sequence

import numpy as np

from .encoder import END_OF_TEXT, Encoder
from .errors import PicoGPTError
from .kvcache import KVCache, feed, forward
from .sampling import Sampling, Step, describe, sample_rngs


def generate(input_ids: Sequence[int], params: dict, n_head: int, n_tokens: int, *,
             top_k: int | None = None, top_p: float | None = None, temperature: float = 1.0,
             seed: int | None = None, repetition_penalty: float = 1.0, stop_at_end: bool = True,
             stop: str | None = None, encoder: Encoder | None = None, n_samples: int = 1,
             candidates: int = 0) -> Iterator:
    """Yield up to n_tokens new token ids after input_ids, one at a time.

    Greedy unless top_k or top_p is set. A sample ends early at <|endoftext|> (not yielded)
    unless stop_at_end is False, and once its text contains `stop` (which needs `encoder` to
    read the text; the token that completes it is yielded). With n_samples > 1 the samples
    decode together and the generator yields (sample, token id) pairs, step by step. With
    candidates=N each token id comes as a Step that also holds the N most likely candidates
    (plain generation does none of that work).
    """
    sampling = Sampling(top_k, top_p, temperature, repetition_penalty)
    check_settings(n_tokens, sampling, seed, n_samples, stop, candidates,
                   len(params["wte"]))  # at the call, not at the first token
    check_context(len(input_ids), n_tokens, len(params["wpe"]))
    if stop is not None and encoder is None:
        raise PicoGPTError("stop needs encoder= to read the generated text; pass the Encoder "
                           "from load_encoder_hparams_and_params.")
    stop_bytes = stop.encode("utf-8") if stop else None
    steps = decode_samples([*input_ids], params, n_head, n_tokens, sampling,
                           sample_rngs(seed, n_samples), stop_at_end, stop_bytes, encoder,
                           candidates)
    return steps if n_samples > 1 else (token for _, token in steps)


def decode_samples(input_ids: list[int], params: dict, n_head: int, n_tokens: int,
                   sampling: Sampling, rngs: list[np.random.Generator], stop_at_end: bool = True,
                   stop: bytes | None = None, encoder: Encoder | None = None,
                   candidates: int = 0) -> Iterator[tuple[int, int | Step]]:
    """The loop behind generate: one sample per rng; yields (sample, token id) step by step
    (a Step in place of the id when candidates > 0).

    The prompt is fed once. Then each step runs all running samples as one batch of
    [n_alive, 1] ids, so the weights are read once per step. The samples share the prompt's
    keys and values (a KVCache with a prompt); each caches only its own new positions. One
    sample just extends the prompt's cache. A finished sample leaves the batch.
    """
    if n_tokens == 0:
        return
    prompt = input_ids or [END_OF_TEXT]  # no prompt: start as GPT-2 starts a document
    if len(rngs) == 1:  # one batch row, its cache sized for the prompt and every new token
        cache = KVCache(params, n_head, len(prompt) + n_tokens, batch=(1,))
        logits = feed([prompt], params, n_head, cache)  # [1, n_vocab]
    else:  # the samples share the prompt's cache; each caches only its own new positions
        shared = KVCache(params, n_head, len(prompt))
        logits = feed(prompt, params, n_head, shared)[None]  # [1, n_vocab]
        cache = KVCache(params, n_head, n_tokens, batch=(len(rngs),), prompt=shared)
    logits = np.broadcast_to(logits, (len(rngs), logits.shape[-1]))  # [n_alive, n_vocab]
    alive = list(range(len(rngs)))  # which sample each batch row holds
    seen = None  # [n_alive, n_vocab] which tokens each sample has had, for the penalty
    if sampling.repetition_penalty != 1.0:
        seen = np.zeros(logits.shape, bool)
        seen[:, prompt] = True
    text = [b""] * len(rngs)  # each sample's output so far, when there is a stop text to find
    for step in range(n_tokens):
        filtered = sampling.filter(logits, seen)  # [n_alive, n_vocab]
        next_ids = [sampling.pick(row, rngs[i]) for row, i in zip(filtered, alive)]
        keep = []
        for row, (i, token) in enumerate(zip(alive, next_ids)):
            if stop_at_end and token == END_OF_TEXT:
                continue
            yield i, (describe(token, logits[row], filtered[row], candidates) if candidates
                      else token)
            if stop is not None:
                piece = encoder.decode_bytes([token])
                text[i] += piece
                if stop in text[i][-len(stop) - len(piece) :]:  # only where it could be new
                    continue
            keep.append(row)
        if not keep or step == n_tokens - 1:
            return
        if len(keep) < len(alive):  # finished samples stop costing work
            alive = [alive[row] for row in keep]
            cache.keep(keep)
            seen = None if seen is None else seen[keep]
        ids = np.array([[next_ids[row]] for row in keep])  # [n_alive, 1]
        if seen is not None:
            seen[np.arange(len(keep)), ids[:, 0]] = True
        logits = forward(ids, params, n_head, cache)  # [n_alive, n_vocab]


def is_count(value, low: int = 0) -> bool:
    """A whole number (not a bool) of at least low."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def is_number(value, low: float, high: float = float("inf"), high_ok: bool = False) -> bool:
    """A real number in (low, high), or (low, high] with high_ok."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and low < value and (value <= high if high_ok else value < high))


def check_settings(n_tokens: int, sampling: Sampling, seed: int | None, n_samples: int,
                   stop: str | None, candidates: int = 0, n_vocab: int = 50257) -> None:
    """Raise PicoGPTError for a setting that makes no sense, before any work is done."""
    problems = [
        (is_count(n_tokens), f"n_tokens={n_tokens!r} is not a count of tokens; give a whole "
                             f"number from 0 up."),
        (sampling.top_k is None or is_count(sampling.top_k, 1) and sampling.top_k <= n_vocab,
         f"top_k={sampling.top_k!r} is not a whole number from 1 to {n_vocab} (1 is greedy); "
         f"leave it unset for greedy decoding."),
        (sampling.top_p is None or is_number(sampling.top_p, 0, 1, high_ok=True),
         f"top_p={sampling.top_p!r} must be a number above 0 and at most 1 (1 keeps every "
         f"token); leave it unset for greedy decoding."),
        (is_number(sampling.temperature, 0), f"temperature={sampling.temperature!r} must be a "
         f"number above 0 (1 keeps GPT-2's probabilities; lower is more conservative)."),
        (is_number(sampling.repetition_penalty, 0), f"repetition_penalty="
         f"{sampling.repetition_penalty!r} must be a number above 0 (1 is off; 1.2 is a "
         f"common choice against loops)."),
        (seed is None or is_count(seed), f"seed={seed!r} is not a whole number from 0 up; "
                                         f"give one, or leave it unset for a different sample "
                                         f"each run."),
        (is_count(n_samples, 1), f"n_samples={n_samples!r} is not a whole number from 1 up."),
        (stop is None or isinstance(stop, str) and stop != "",
         f"stop={stop!r} is not a text to stop at; give a non-empty text, or leave it unset."),
        (is_count(candidates), f"candidates={candidates!r} is not a whole number from 0 up."),
    ]
    for ok, message in problems:
        if not ok:
            raise PicoGPTError(message)


def check_context(n_prompt: int, n_tokens: int, n_ctx: int) -> None:
    """Raise PicoGPTError if the prompt and the new tokens do not fit in the context."""
    if max(n_prompt, 1) + n_tokens > n_ctx:
        raise PicoGPTError(f"prompt is {n_prompt} tokens; with n_tokens={n_tokens} that passes "
                           f"GPT-2's limit of {n_ctx}. Shorten the prompt or lower n_tokens.")
