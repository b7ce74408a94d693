"""The decode loop: feed the prompt once, then one token per step, and pick each next token.

Owns `generate`, `greedy` and `top_k`. It must not print, read files or touch global random
state: randomness comes only from a `np.random.Generator` made from the `seed` argument.
"""

from collections.abc import Iterator, Sequence

import numpy as np

from .encoder import END_OF_TEXT
from .errors import PicoGPTError
from .model import gpt2, softmax

# Prompt tokens per forward pass. A long prompt in one pass needs [n_head, n_new, n_all] scores
# and [n_new, 4 * n_embd] activations at once; 128 at a time lowered the peak memory of a
# 512-token prompt from 1.45x to 1.33x the 124M weights, at the same speed (631 vs 687 MiB).
CHUNK = 128


def greedy(logits: np.ndarray) -> int:  # [n_vocab] -> token id
    """The most likely token."""
    return int(np.argmax(logits))


def top_k(logits: np.ndarray, k: int, rng: np.random.Generator) -> int:  # [n_vocab] -> token id
    """Sample among the k most likely tokens, in proportion to their probabilities."""
    best = np.argpartition(logits, -k)[-k:]  # [k] ids of the k largest logits
    return int(best[rng.choice(k, p=softmax(logits[best]))])


def pick(logits: np.ndarray, k: int | None, temperature: float,
         rng: np.random.Generator) -> int:  # [n_vocab] -> token id
    """Greedy when k is None, otherwise top-k sampling at the given temperature."""
    return greedy(logits) if k is None else top_k(logits / temperature, k, rng)


def generate(input_ids: Sequence[int], params: dict, n_head: int, n_tokens: int, *,
             top_k: int | None = None, temperature: float = 1.0,
             seed: int | None = None) -> Iterator[int]:
    """Yield n_tokens new token ids after input_ids, one at a time (greedy unless top_k is set)."""
    check_settings(len(input_ids), params, n_tokens, top_k, temperature, seed)  # at the call
    return decode_loop([*input_ids], params, n_head, n_tokens, top_k, temperature,
                       np.random.default_rng(seed))


def decode_loop(input_ids: list[int], params: dict, n_head: int, n_tokens: int,
                top_k: int | None, temperature: float, rng: np.random.Generator) -> Iterator[int]:
    """The loop behind generate: feed the prompt once, then each token it picks."""
    new_ids = input_ids or [END_OF_TEXT]  # no prompt: start as GPT-2 starts a document
    cache = []  # keys and values of every position so far, one (k, v) per block
    for _ in range(n_tokens):
        logits, cache = feed(new_ids, params, n_head, cache)  # the prompt, then each new token
        next_id = pick(logits, top_k, temperature, rng)
        yield next_id
        new_ids = [next_id]


def feed(ids: Sequence[int], params: dict, n_head: int, cache: list,
         chunk: int = CHUNK) -> tuple[np.ndarray, list]:  # [n_new] -> [n_vocab], cache
    """Run ids through the model after the cache, chunk at a time; the last logits and cache."""
    assert ids, "feed needs at least one id"
    for start in range(0, len(ids), chunk):
        logits, cache = gpt2(np.array(ids[start : start + chunk]), **params, n_head=n_head,
                             cache=cache)
    return logits, cache


def check_settings(n_prompt: int, params: dict, n_tokens: int, top_k: int | None,
                   temperature: float, seed: int | None) -> None:
    """Raise PicoGPTError for settings the model cannot honour."""
    n_vocab, n_ctx = len(params["wte"]), len(params["wpe"])
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 0:
        raise PicoGPTError(f"n_tokens={n_tokens!r} is not a count of tokens; give a whole number "
                           f"from 0 to {n_ctx}.")
    if max(n_prompt, 1) + n_tokens > n_ctx:
        raise PicoGPTError(f"prompt is {n_prompt} tokens; with n_tokens={n_tokens} that passes "
                           f"GPT-2's limit of {n_ctx}. Shorten the prompt or lower n_tokens.")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                              or not 1 <= top_k <= n_vocab):
        raise PicoGPTError(f"top_k={top_k!r} is not a whole number from 1 to {n_vocab} "
                           f"(1 is greedy); leave it unset for greedy decoding.")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not (
            0 < temperature < float("inf")):
        raise PicoGPTError(f"temperature={temperature!r} must be a number above 0 (1 keeps "
                           f"GPT-2's probabilities; lower is more conservative).")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise PicoGPTError(f"seed={seed!r} is not a whole number from 0 up; give one, or leave "
                           f"it unset for a different sample each run.")
