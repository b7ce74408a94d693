"""The KV cache: the keys and values of positions already seen, so a new token costs one position.

Why it exists: to pick token t + 1, attention needs the keys and values of all t positions, but
only position t's are new; the others are what earlier steps computed. Without a cache every
step runs the whole sequence through every block again. With it, a step runs one position
through the blocks and reads the stored keys and values. The logits are the same (a test checks
it); only the work changes. docs/kv-cache.md has the shapes, the memory and the measured speed.

It holds the buffers, a prompt shared by several samples, dropping finished samples, and the two
ways to run new positions: `prefill` (a prompt, in chunks) and `decode_step` (one position per
sample); and `Conversation`, a chat's cache kept from one turn to the next: each turn the whole
conversation is rendered again (a template may write an earlier turn differently once a later
one exists: Qwen3's drops the <think> block of earlier replies), and only the ids after the
longest prefix the cache already holds run through the model. It holds no math: a block takes
its attention step as an argument (`attend`), and a cache layer's `attend` stores the new keys
and values and then calls the attention itself.
"""

import sys
from collections.abc import Iterator
from types import ModuleType

import numpy as np

from .errors import PicoGPTError, _
from .fast import causal_attention, layer_norm, transformer_block, unembed
from .model import attention_scores, embed, future_mask, softmax
from .sampling import Sampling

# Prompt positions per pass. A pass holds [n_head, n_new, n_past + n_new] attention scores and
# [n_new, 4 * n_embd] activations at once, but runs the matrix products faster the more positions
# it has. A prompt's first pass has no past, so it can take more positions for the same peak
# memory than a pass late in a long prompt; fast.py's in-place softmax made room for both to
# double (measurements: docs/performance.md, "Prefill").
FIRST_CHUNK, CHUNK = 512, 256
SCORE_CHUNK = 256  # positions per pass through a block when scoring (window_stream)


class LayerCache:
    """One block's keys and values: two buffers [*batch, n_head, n_positions, d_head], allocated
    once with room for every position the run will see; the first n_past positions are filled."""

    def __init__(self, shape: tuple, dtype, prompt: "LayerCache | None" = None):
        self.k, self.v = np.empty(shape, dtype), np.empty(shape, dtype)
        self.n_past = 0
        self.prompt = prompt  # keys and values every row continues: read, never written

    def filled(self) -> tuple[np.ndarray, np.ndarray]:
        """Views of the keys and values stored so far: [*batch, n_head, n_past, d_head] each."""
        return self.k[..., : self.n_past, :], self.v[..., : self.n_past, :]

    def attend(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """mha's attention step: store the new positions' k and v, then attend over all."""
        # [*batch, n_head, n_new, d_head] x3 -> [*batch, n_head, n_new, d_head]
        n_all = self.n_past + k.shape[-2]
        if n_all > self.k.shape[-2]:  # a conversation goes on past the room it was made with
            self.grow(n_all)
        self.k[..., self.n_past : n_all, :] = k  # written in place: the past is never copied
        self.v[..., self.n_past : n_all, :] = v
        self.n_past = n_all
        if self.prompt is None:
            return causal_attention(q, *self.filled())
        return self.attend_after_prompt(q, *self.filled())

    def grow(self, n_positions: int) -> None:
        """Room for at least n_positions: new buffers, twice as long or more, the past copied
        into them (doubling keeps the copies' total under twice the final size)."""
        *batch, n_head, n_room, d_head = self.k.shape
        shape = (*batch, n_head, max(n_positions, 2 * n_room), d_head)
        k, v = np.empty(shape, self.k.dtype), np.empty(shape, self.v.dtype)
        k[..., : self.n_past, :] = self.k[..., : self.n_past, :]  # not filled(): a subclass
        v[..., : self.n_past, :] = self.v[..., : self.n_past, :]  # may view it reshaped
        self.k, self.v = k, v

    def attend_after_prompt(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Attention over the shared prompt's positions followed by this row's own."""
        # The prompt's [n_head, n_prompt, d_head] keys and values broadcast over the batch rows
        # instead of being copied into each, which keeps the peak memory of several samples
        # after a long prompt near one sample's (docs/performance.md, "Several samples"). One
        # softmax over both parts' scores gives the weights of attention over the joined sequence.
        prompt_k, prompt_v = self.prompt.filled()
        # [n_new, n_all] of the row's own; a decode step's one query is the last position and
        # sees all of them (fast.attend_block skips that mask too)
        mask = future_mask(q.shape[-2], k.shape[-2], q.dtype) if q.shape[-2] > 1 else 0.0
        scores = np.concatenate([attention_scores(q, prompt_k, 0.0),  # the prompt: all earlier
                                 attention_scores(q, k, mask)], axis=-1)
        weights = softmax(scores)  # [*batch, n_head, n_new, n_prompt + n_all]
        n_prompt = prompt_k.shape[-2]
        return weights[..., :n_prompt] @ prompt_v + weights[..., n_prompt:] @ v


class KVCache:
    """A LayerCache per block, for a batch of rows (samples) that are all at the same position."""

    def __init__(self, params: dict, n_head: int, n_positions: int, batch: tuple = (),
                 prompt: "KVCache | None" = None):
        """Room for n_positions positions of each batch row (after prompt's, if one is given)."""
        n_embd, dtype = params["wte"].shape[-1], params["wte"].dtype  # float64 params: float64
        shape = (*batch, n_head, n_positions, n_embd // n_head)
        prompts = prompt.layers if prompt else [None] * len(params["blocks"])
        self.layers = [LayerCache(shape, dtype, p) for p in prompts]
        self.prompt = prompt

    @property
    def n_past(self) -> int:
        """Positions seen so far, the shared prompt's included: where the next position sits."""
        return self.layers[0].n_past + (self.prompt.n_past if self.prompt else 0)

    def rewind(self, n_past: int) -> None:
        """Forget every position from n_past on: the next ones are written over them."""
        assert 0 <= n_past <= self.n_past and self.prompt is None, "rewind within own positions"
        for layer in self.layers:
            layer.n_past = n_past

    def keep(self, rows: list[int]) -> None:
        """Drop every batch row but these: finished samples stop costing work and memory."""
        for layer in self.layers:  # [len(rows), n_head, n_positions, d_head] each
            layer.k, layer.v = layer.k[rows], layer.v[rows]


def extend(ids, params: dict, n_head: int, cache: KVCache) -> np.ndarray:
    """gpt2 on new positions only, through the cache: the last position's logits."""
    # [..., n_new] ids -> [..., n_vocab]; the cache gains n_new positions
    x = embed(ids, params["wte"], params["wpe"], start=cache.n_past)  # [..., n_new, n_embd]
    last = len(params["blocks"]) - 1
    for i, (block, layer) in enumerate(zip(params["blocks"], cache.layers)):
        # generating reads only the last position's logits, so the last block owes only that
        # position's output (every position's keys and values still go into its cache): a
        # prompt skips nearly one block's work (1/12 at 124M), and the other positions' logits
        x = transformer_block(x, **block, n_head=n_head, attend=layer.attend, last_only=i == last)
    return unembed(layer_norm(x[..., -1, :], **params["ln_f"]), params["wte"])


def prefill(ids, params: dict, n_head: int, cache: KVCache,
            chunk: int | None = None, extend_with=None) -> np.ndarray:
    """Run a prompt's ids into the cache, a chunk of positions per pass: the last logits.

    chunk=None takes FIRST_CHUNK positions in the first pass of an empty cache, CHUNK after.
    extend_with is another kind's pass over new positions (llama/engine.py's); None is GPT-2's.
    """
    ids = np.asarray(ids)  # [..., n_prompt] -> [..., n_vocab]
    assert ids.shape[-1] > 0, "prefill needs at least one id"
    start = 0
    while start < ids.shape[-1]:
        stop = start + (chunk or (FIRST_CHUNK if cache.n_past == 0 else CHUNK))
        logits = (extend_with or extend)(ids[..., start:stop], params, n_head, cache)
        start = stop
    return logits


def decode_step(next_ids, params: dict, n_head: int, cache: KVCache,
                extend_with=None) -> np.ndarray:
    """One new position for each batch row: its token's logits for the position after it
    (extend_with: another kind's pass over new positions; None is GPT-2's)."""
    # [n_rows] ids -> [n_rows, n_vocab] (a cache without a batch: [] -> [n_vocab])
    return (extend_with or extend)(np.asarray(next_ids)[..., None], params, n_head, cache)


def window_stream(inputs, params: dict, n_head: int) -> np.ndarray:
    """The last residual stream of one scoring window (score.py's), from position 0, one block
    at a time."""
    # [n] ids -> [n, n_embd]. Block by block, not chunk by chunk as prefill: only one block's
    # keys and values are ever held (all 12 of a 1024-token window are 72 MiB on the 124M),
    # and each block's weights serve every chunk in turn.
    x = embed(inputs, params["wte"], params["wpe"])  # [n, n_embd]
    for block in params["blocks"]:
        cache = LayerCache((n_head, len(inputs), x.shape[-1] // n_head), x.dtype)  # this block's
        for start in range(0, len(inputs), SCORE_CHUNK):
            rows = slice(start, start + SCORE_CHUNK)
            x[rows] = transformer_block(x[rows], **block, n_head=n_head, attend=cache.attend)
    return x


def final_logits(x: np.ndarray, params: dict, n_head: int) -> np.ndarray:
    """The logits of last residual rows: the final LayerNorm, then the tied unembedding."""
    # [..., n_embd] -> [..., n_vocab]
    return unembed(layer_norm(x, **params["ln_f"]), params["wte"])


class Conversation:
    """A conversation's KV cache and the ids it holds, kept from one turn to the next."""

    def __init__(self, params: dict, n_head: int | dict, n_ctx: int,
                 engine: ModuleType | None = None):
        """engine holds the model's `KVCache`, `prefill` and `decode_step`: its kind's engine
        (kinds.py; kvcache.py for GPT-2, llama/engine.py for the LLaMA kind, which takes its
        hparams where GPT-2's
        takes n_head); the cache starts small and grows as the conversation does."""
        engine = engine or sys.modules[__name__]  # this module, for GPT-2
        self.params, self.n_head, self.n_ctx, self.engine = params, n_head, n_ctx, engine
        self.cache = engine.KVCache(params, n_head, 64, batch=(1,))
        self.ids: list[int] = []  # the ids whose keys and values the cache holds

    def reply(self, ids: list[int], n_tokens: int, sampling: Sampling, rng: np.random.Generator,
              ends: set[int]) -> Iterator[int]:
        """Yield the reply's ids after the whole conversation so far (ids: rendered and encoded,
        ending where the reply begins), up to n_tokens, the end token not yielded."""
        if len(ids) + n_tokens > self.n_ctx:
            raise PicoGPTError(_("the conversation is {n} tokens; with n_tokens={n_tokens} it "
                                 "passes the model's limit of {n_ctx} tokens. Start a new "
                                 "conversation, or lower --n_tokens.").format(
                                     n=len(ids), n_tokens=n_tokens, n_ctx=self.n_ctx))
        same = next((i for i, (a, b) in enumerate(zip(ids, self.ids)) if a != b),
                    min(len(ids), len(self.ids)))
        same = min(same, len(ids) - 1)  # at least one new position gives the next logits
        self.cache.rewind(same)  # the positions after the shared prefix are written over
        self.ids = list(ids)
        logits = self.engine.prefill([ids[same:]], self.params, self.n_head, self.cache)[0]
        seen = None
        if sampling.repetition_penalty != 1.0:
            seen = np.zeros((1, logits.shape[-1]), bool)
            seen[0, ids] = True
        for step in range(n_tokens):
            token = sampling.pick(sampling.filter(logits[None], seen)[0], rng)
            if token in ends:  # not cached: the template writes it into the next turn's ids
                return
            yield token
            if step == n_tokens - 1:
                return
            logits = self.engine.decode_step(np.array([token]), self.params, self.n_head,
                                             self.cache)[0]
            self.ids.append(token)
            if seen is not None:
                seen[0, token] = True
