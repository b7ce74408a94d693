"""The decode loop: feed the prompt once, then one token per step, and pick each next token.

It holds the three ways to generate, which differ only in what they yield: `generate` (token ids),
`generate_steps` (each token with the candidates it was picked from) and `generate_samples`
(several samples decoded together). How a token is picked is sampling.py's; the keys and values
kept between steps are kvcache.py's; a form the text must keep (`constraint=`, a poem's lines) is
constraints.py's, applied here as a mask before the filters. Another kind of model (the LLaMA
kind) runs through its own engine, its row of the table of kinds says which (kinds.py); its
hparams go where GPT-2's n_head goes (`Kind.runs_with`).
"""

from collections.abc import Iterator, Sequence

import numpy as np

from . import kvcache
from .constraints import Verse, masked
from .encoder import END_OF_TEXT, Encoder, added_bytes, model_tokens
from .errors import PicoGPTError, _, number, text, whole_number
from .sampling import Sampling, Step, describe, sample_rngs


def generate(input_ids: Sequence[int], params: dict, n_head: int | dict, n_tokens: int, *,
             top_k: int | None = None, top_p: float | None = None, temperature: float = 1.0,
             seed: int | None = None, repetition_penalty: float = 1.0, stop_at_end: bool = True,
             stop: str | None = None, encoder: Encoder | None = None,
             constraint: Verse | None = None) -> Iterator[int]:
    """Yield up to n_tokens new token ids after input_ids, one at a time.

    Greedy unless top_k or top_p is set; the filters run in the order repetition penalty,
    temperature, top-k, top-p. `seed` makes sampling repeatable. The text ends early at the
    vocabulary's end token (not yielded: `encoder.end`, or GPT-2's <|endoftext|> when no
    encoder is given) unless stop_at_end is False, and once it contains `stop` (which needs
    `encoder` to read the text; the token that completes it is yielded). Empty input_ids start
    from the vocabulary's start token, as a document starts. A `constraint` (constraints.py's
    `verse`) allows only the tokens that keep its form, before the filters, and ends the text
    when the form is complete. n_head is a GPT-2's head count; a model of another kind gives
    its hparams whole in its place (`loaded.kind.runs_with(hparams)`).
    """
    samples = checked(input_ids, params, n_head, n_tokens, 1, 0, top_k=top_k, top_p=top_p,
                      temperature=temperature, seed=seed, repetition_penalty=repetition_penalty,
                      stop_at_end=stop_at_end, stop=stop, encoder=encoder,
                      constraint=constraint)
    return (token for _, token in samples)


def generate_steps(input_ids: Sequence[int], params: dict, n_head: int | dict, n_tokens: int, *,
                   candidates: int = 10, **settings) -> Iterator[Step]:
    """generate's tokens, each as a Step that also holds the `candidates` most likely tokens
    and their probabilities before and after the filters. Takes generate's settings."""
    whole_number("candidates", candidates, 1)
    steps = checked(input_ids, params, n_head, n_tokens, 1, candidates, **settings)
    return (step for _, step in steps)


def generate_samples(input_ids: Sequence[int], params: dict, n_head: int | dict, n_tokens: int, *,
                     n_samples: int, **settings) -> Iterator[tuple[int, int]]:
    """n_samples samples decoded together in one batch, yielded step by step as (sample, token
    id) pairs. Takes generate's settings; sample i comes from its own generator, made from
    (seed, i), so it is the same sample as in a batch of any other size."""
    whole_number("n_samples", n_samples, 1)
    return checked(input_ids, params, n_head, n_tokens, n_samples, 0, **settings)


def checked(input_ids: Sequence[int], params: dict, n_head: int | dict, n_tokens: int,
            n_samples: int, candidates: int, *, top_k: int | None = None,
            top_p: float | None = None, temperature: float = 1.0, seed: int | None = None,
            repetition_penalty: float = 1.0, stop_at_end: bool = True, stop: str | None = None,
            encoder: Encoder | None = None,
            constraint: Verse | None = None) -> Iterator[tuple[int, int | Step]]:
    """decode_samples, once the settings are checked: at the call, not at the first token."""
    sampling = Sampling(top_k, top_p, temperature, repetition_penalty)
    n_vocab, n_ctx = sizes(params, n_head)
    check_settings(n_tokens, sampling, seed, stop, n_vocab)
    check_context(len(input_ids), n_tokens, n_ctx)
    check_ids(input_ids, n_vocab)
    if stop is not None and encoder is None:
        raise PicoGPTError(_("stop needs encoder= to read the generated text; pass the Encoder "
                             "from load_encoder_hparams_and_params."))
    if constraint is not None:
        check_constraint(constraint, input_ids, n_tokens, n_vocab)
    start, end = model_tokens(n_vocab, encoder, needed=not input_ids or stop_at_end)
    return decode_samples([*input_ids] or [start], params, n_head, n_tokens, sampling,
                          sample_rngs(seed, n_samples), end if stop_at_end else None,
                          stop.encode("utf-8") if stop else None, encoder, candidates,
                          constraint)


def decode_samples(prompt: list[int], params: dict, n_head: int | dict, n_tokens: int,
                   sampling: Sampling, rngs: list[np.random.Generator],
                   end: int | None = END_OF_TEXT, stop: bytes | None = None,
                   encoder: Encoder | None = None,
                   candidates: int = 0,
                   constraint: Verse | None = None) -> Iterator[tuple[int, int | Step]]:
    """The loop behind generate: one sample per rng; yields (sample, token id) step by step
    (a Step in place of the id when candidates > 0). A sample ends at the token `end` (not
    yielded; None never ends early), or when it completes the constraint's form.

    The prompt is fed once. Then each step runs all running samples as one batch of
    [n_alive, 1] ids, so the weights are read once per step. The samples share the prompt's
    keys and values (a KVCache with a prompt); each caches only its own new positions. One
    sample just extends the prompt's cache. A finished sample leaves the batch.
    """
    if n_tokens == 0:
        return
    engine = engine_of(n_head)  # the cache and steps of the model's kind
    new_cache, run_prompt = engine.KVCache, engine.prefill
    if len(rngs) == 1:  # one batch row, its cache sized for the prompt and every new token
        cache = new_cache(params, n_head, len(prompt) + n_tokens, batch=(1,))
        logits = run_prompt([prompt], params, n_head, cache)  # [1, n_vocab]
    else:  # the samples share the prompt's cache; each caches only its own new positions
        shared = new_cache(params, n_head, len(prompt))
        logits = run_prompt(prompt, params, n_head, shared)[None]  # [1, n_vocab]
        cache = new_cache(params, n_head, n_tokens, batch=(len(rngs),), prompt=shared)
    logits = np.broadcast_to(logits, (len(rngs), logits.shape[-1]))  # [n_alive, n_vocab]
    alive = list(range(len(rngs)))  # which sample each batch row holds
    seen = None  # [n_alive, n_vocab] which tokens each sample has had, for the penalty
    if sampling.repetition_penalty != 1.0:
        seen = np.zeros(logits.shape, bool)
        seen[:, prompt] = True
    written = [b""] * len(rngs)  # each sample's output so far, when there is a stop text
    last = [prompt[-1:]] * len(rngs)  # each sample's last token, which a WordPiece space follows
    # where each sample stands in the constraint's poem: the whole text counts, prompt included
    places = [constraint.position(prompt)] * len(rngs) if constraint is not None else None
    for step in range(n_tokens):
        allowed = logits
        if constraint is not None:  # before the filters: they see only the tokens it allows
            mask = np.array([constraint.allowed_at(places[i]) for i in alive])  # [n_alive, ..]
            allowed = masked(logits, mask)
        filtered = sampling.filter(allowed, seen)  # [n_alive, n_vocab]
        next_ids = [sampling.pick(row, rngs[i]) for row, i in zip(filtered, alive)]
        keep = []
        for row, (i, token) in enumerate(zip(alive, next_ids)):
            if token == end:
                continue
            yield i, (describe(token, logits[row], filtered[row], candidates) if candidates
                      else token)
            if stop is not None:
                piece = added_bytes(encoder, last[i], token)
                written[i], last[i] = written[i] + piece, [token]
                if stop in written[i][-len(stop) - len(piece) :]:  # only where it could be new
                    continue
            if constraint is not None:
                places[i] = constraint.advance(places[i], token)
                if constraint.complete(places[i]):
                    continue
            keep.append(row)
        if not keep or step == n_tokens - 1:
            return
        if len(keep) < len(alive):  # finished samples stop costing work
            alive = [alive[row] for row in keep]
            cache.keep(keep)
            seen = None if seen is None else seen[keep]
        ids = np.array([next_ids[row] for row in keep])  # [n_alive]
        if seen is not None:
            seen[np.arange(len(keep)), ids] = True
        logits = engine.decode_step(ids, params, n_head, cache)  # [n_alive, n_vocab]


class Running(dict):
    """A model's hparams with the engine its kind runs on (its KV cache, prefill, decode step,
    scoring windows, n_vocab and n_ctx): what a model of another kind than GPT-2 gives
    generate() and score() in n_head's place (kinds.py: Kind.runs_with)."""

    def __init__(self, hparams: dict, engine):
        super().__init__(hparams)
        self.engine = engine


def engine_of(n_head: int | Running):
    """The engine n_head's model runs on: its kind's, or kvcache.py's for a GPT-2's head count."""
    if isinstance(n_head, Running):
        return n_head.engine
    if isinstance(n_head, dict):  # hparams without their kind's engine
        raise PicoGPTError(_("give generate and score a GPT-2's n_head, or another kind's "
                             "hparams as its kind runs them: "
                             "picogpt.kinds.kind_of(hparams).runs_with(hparams)."))
    return kvcache


def sizes(params: dict, n_head: int | Running) -> tuple[int, int]:
    """The model's n_vocab and n_ctx, as its kind reads them (a GPT-2's from wte and wpe)."""
    if not isinstance(n_head, Running):
        return len(params["wte"]), len(params["wpe"])
    return n_head.engine.n_vocab(params), n_head.engine.n_ctx(params, n_head)


# Temperature and repetition penalty divide float32 logits (GPT-2's reach ~100): outside these
# bounds a logit can become inf or 0 (float32 of 1e-300 is 0), and the probabilities NaN
SCALES = (1e-6, 1e6)


def check_settings(n_tokens: int, sampling: Sampling, seed: int | None, stop: str | None,
                   n_vocab: int | None = None) -> None:
    """Raise PicoGPTError for a setting that makes no sense, before any work is done; top_k is
    bounded by the model's n_vocab once it is known."""
    whole_number("n_tokens", n_tokens, 0)
    if sampling.top_k is not None:
        whole_number("top_k", sampling.top_k, 1, n_vocab,
                     _("1 is greedy; leave it unset for greedy decoding"))
    if sampling.top_p is not None:
        number("top_p", sampling.top_p, 0, 1,
               _("1 keeps every token; leave it unset for greedy decoding"))
    for name, value, hint in (
            ("temperature", sampling.temperature,
             _("1 keeps the model's probabilities; lower is more conservative")),
            ("repetition_penalty", sampling.repetition_penalty,
             _("1 is off; 1.2 is a common choice against loops"))):
        number(name, value, 0, SCALES[1], hint)
        if value < SCALES[0]:
            raise PicoGPTError(_("{name}={value} is too small: below {low} it makes float32's "
                                 "logits overflow; {hint}.").format(
                                     name=name, value=repr(value), low=f"{SCALES[0]:g}",
                                     hint=hint))
    if seed is not None:
        whole_number("seed", seed, 0, hint=_("give one, or leave it unset for a different "
                                             "sample each run"))
    if stop is not None:
        text("stop", stop, _("give the text to stop at, or leave it unset"))


def check_constraint(constraint: Verse, input_ids: Sequence[int], n_tokens: int,
                     n_vocab: int) -> None:
    """Raise PicoGPTError if the constraint's mask does not fit the model, the prompt breaks
    its form (the whole text is the poem), or the rest of the form does not fit in n_tokens."""
    if constraint.n_vocab != n_vocab:
        raise PicoGPTError(_("the constraint was made for {made} tokens, but the model has "
                             "{n_vocab}; make it from the model's own encoder.").format(
                                 made=constraint.n_vocab, n_vocab=n_vocab))
    broken = constraint.first_break(input_ids)
    if broken is not None:  # counted as typed: after a leading start token
        typed = broken + 1 - (list(input_ids[:1]) == [constraint.alphabet.start])
        raise PicoGPTError(_("the prompt does not keep the form: its token {n} breaks it (the "
                             "prompt is the poem's start; write a title on a line of its own, "
                             "ended by a line break, before the poem).").format(n=typed))
    if constraint.done(input_ids):
        raise PicoGPTError(_("the prompt already holds the poem's {n} lines; ask for more lines, "
                             "or shorten the prompt.").format(n=constraint.n_lines))
    needed = constraint.n_tokens(input_ids)
    if needed is not None and needed > n_tokens:
        raise PicoGPTError(_("the poem takes {needed} tokens, but n_tokens={n_tokens}; raise "
                             "n_tokens to {needed}.").format(needed=needed, n_tokens=n_tokens))


def check_ids(ids: Sequence[int], n_vocab: int) -> None:
    """Raise PicoGPTError if an id is not one of the model's n_vocab tokens."""
    wrong = [i for i in ids if not 0 <= i < n_vocab]
    if wrong:
        raise PicoGPTError(_("token id {id} is not one of the model's {n_vocab} tokens (0 .. "
                             "{last}); encode the prompt with the model's own vocabulary.")
                           .format(id=wrong[0], n_vocab=n_vocab, last=n_vocab - 1))


def check_context(n_prompt: int, n_tokens: int, n_ctx: int) -> None:
    """Raise PicoGPTError if the prompt and the new tokens do not fit in the context."""
    if max(n_prompt, 1) + n_tokens > n_ctx:
        raise PicoGPTError(_("prompt is {n_prompt} tokens; with n_tokens={n_tokens} that passes "
                             "the model's limit of {n_ctx} tokens. Shorten the prompt or lower "
                             "n_tokens.").format(n_prompt=n_prompt, n_tokens=n_tokens,
                                                 n_ctx=n_ctx))

