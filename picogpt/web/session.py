"""An exploring session: one text, its KV cache, and what the model says could come next.

It holds what the --explore page can do to a text: set it (a prompt as typed), look at the next
token's candidates under any sampler settings and a poem's form (constraints.py's mask, the
whole text counted as the poem so far), append a token (picked, greedy or drawn with a seed),
take the last one back, generate several, and look inside. The model runs once per new
position: the text lives in a KV cache, an edit re-runs only the positions after the part that
stayed the same, and a change of settings only filters logits already computed. The checks are
the CLI's own (generate.check_settings and check_context, sampling's filters), so a setting is
refused with the same sentence here as on the command line. No I/O: server.py serves it.
"""

import codecs
from collections.abc import Callable, Iterator
from functools import cached_property

import numpy as np

from ..constraints import Verse, alphabet, byte_level_refusal, check_verse, masked, verse
from ..encoder import Encoder, added_bytes
from ..errors import PicoGPTError, _, whole_number
from ..generate import check_context, check_settings
from ..kinds import kind_of
from ..sampling import Sampling, describe, sample_rngs
from ..show import characters, piece
from .views import views

N_SHOWN = 10  # candidates the page lists


class Session:
    """A text and its cache, for one model."""

    def __init__(self, encoder: Encoder, hparams: dict, params: dict, model: dict):
        self.encoder, self.params, self.model, self.hparams = encoder, params, model, hparams
        kind = kind_of(hparams)  # the engine its kind runs on: GPT-2's kvcache.py, or another's
        self.engine, self.n_head = kind.engine, kind.runs_with(hparams)
        self.n_ctx, self.n_vocab = kind.n_ctx(hparams, params), kind.n_vocab(params)
        self.cache = self.engine.KVCache(params, self.n_head, self.n_ctx)  # the whole context
        self.ids: list[int] = []  # the text the cache holds, position by position
        self.logits = np.zeros(0)  # [n_vocab] the model's logits for the token after it
        self.set_text("")  # a session always has a text: the start token until it is given one

    def set_text(self, prompt: str) -> dict:
        """Make prompt the text, fed as generation feeds a prompt (encoder.prompt_ids)."""
        return self.set_ids(self.prompt_ids(prompt))

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids a prompt is fed as, checked to fit in the context. It touches no state, so
        a server can tokenize one request while another computes."""
        ids = self.encoder.prompt_ids(prompt)
        check_context(len(ids), 0, self.n_ctx)
        return ids

    def set_typed(self, ids: list[int]) -> dict:
        """Make ids (prompt_ids of the box's text) the text. The box shows the text after a
        leading start token (WordPiece's [CLS], GPT-2's <|endoftext|>), so a text that begins
        with one keeps it: typing never drops it, nor adds it twice."""
        start = self.encoder.start
        if self.ids[:1] == [start] and ids[:1] != [start]:
            ids = [start, *ids]
            check_context(len(ids), 0, self.n_ctx)
        return self.set_ids(ids)

    def set_ids(self, ids: list[int]) -> dict:
        """Make ids (from prompt_ids) the text: the model runs only the positions after the
        part that stayed the same. "retokenized" counts the tokens before the edit that the
        new ids split differently (a text built by picking tokens is not always the text's
        own tokenization), so that the page can say so."""
        changed = retokenized(self.ids, ids, self.encoder)
        same = next((i for i, (a, b) in enumerate(zip(self.ids, ids)) if a != b),
                    min(len(self.ids), len(ids)))
        same = min(same, len(ids) - 1)  # the last position runs again: its logits are needed
        self.cache.rewind(same)
        self.logits = self.engine.prefill(ids[same:], self.params, self.n_head, self.cache)
        self.ids = ids
        return {**self.state(), "retokenized": changed}

    def state(self) -> dict:
        """The text as the page shows it. Its box holds the text after a leading start token as
        the vocabulary's own decoding writes it (WordPiece's spaces included), in whole
        characters: bytes at the end that the next pieces may still finish are pending, and
        bytes inside it that begin no character (a stray lead byte) are stray, left out."""
        lead = int(self.ids[:1] == [self.encoder.start])
        text, pending, stray = box_text(text_pieces(self.encoder, self.ids[lead:]))
        return {"tokens": [piece(self.encoder, i) for i in self.ids],
                "characters": characters([self.encoder.decode_bytes([i]) for i in self.ids]),
                "text": text, "pending": pending.hex(" "), "stray": stray.hex(" "),
                "n_tokens": len(self.ids), "n_ctx": self.n_ctx}

    def form(self, acrostic: str | None, line: int | None,
             rhyme: bool = False) -> Verse | None:
        """The poem's form a request asks for (constraints.verse on this vocabulary), or None
        when it asks for none. At most a line per two positions, lines at most the context."""
        if acrostic in (None, "") and line is None and rhyme is False:
            return None
        check_verse(None if acrostic == "" else acrostic, line, rhyme)
        if line is not None:
            whole_number("line", line, 1, self.n_ctx, hint=_("5 for 五言, 7 for 七言"))
        if acrostic and len(acrostic) > self.n_ctx // 2:
            raise PicoGPTError(_("the acrostic has {n} characters; this model's {n_ctx} "
                                 "positions hold at most {cap} lines.").format(
                                     n=len(acrostic), n_ctx=self.n_ctx, cap=self.n_ctx // 2))
        if not self.takes_form:
            raise byte_level_refusal()
        letters = alphabet(self.encoder, self.n_vocab)  # read once, as verse reads it
        outside = [c for c in dict.fromkeys(acrostic or "")
                   if c not in letters.ids or not letters.chinese[letters.ids[c]]]
        if outside:  # said as the page names its field, not as the command line's flag
            raise PicoGPTError(_("the acrostic {acrostic}: the vocabulary has no Chinese "
                                 "character token for {chars}; choose characters the model "
                                 "knows.").format(acrostic=acrostic, chars=" ".join(outside)))
        return verse(self.encoder, acrostic or None, line, self.n_vocab, rhyme)

    @cached_property
    def takes_form(self) -> bool:
        """Whether a form can be asked of this model: its vocabulary writes each Chinese
        character and ，。 as one token (a character vocabulary, BERT's Chinese WordPiece),
        which GPT-2's byte-level BPE does not. Read once."""
        if isinstance(self.encoder, Encoder):
            return False
        try:
            verse(self.encoder, None, None, self.n_vocab)
        except PicoGPTError:
            return False
        return True

    def allowed(self, form: Verse) -> np.ndarray | None:  # -> [n_vocab] bool
        """The tokens that keep the text in form: the whole text is the poem so far (as on the
        command line: constraints.Verse.poem). None once the poem is complete: what follows it
        is free."""
        broken = form.first_break(self.ids)
        if broken is not None:
            raise PicoGPTError(_("the text does not keep the form: its token {n}, {token}, "
                                 "breaks it (with a form, the whole text is the poem so far). "
                                 "Clear the box, or turn the form off.").format(
                                     n=broken + 1 - (self.ids[:1] == [self.encoder.start]),
                                     token=repr(self.encoder.decode([self.ids[broken]]))))
        place = form.position(self.ids)
        return None if form.complete(place) else form.allowed_at(place)

    def filtered(self, sampling: Sampling, form: Verse | None = None) -> np.ndarray:
        """The next token's logits after the form's mask, if one is asked, and the sampler's
        filters (the penalty sees the text). Logits that are not all finite are refused: no
        sampler can draw from them, nor JSON carry them (the text stands)."""
        if not np.isfinite(self.logits).all():
            raise PicoGPTError(_("the model's logits after this text hold NaN or infinity "
                                 "(finite weights can still overflow float32), so there is "
                                 "nothing to show or draw from. Change the text, or load "
                                 "another model."))
        # [n_vocab]: the mask first, so that top-k keeps the k best tokens the form allows
        allowed = None if form is None else self.allowed(form)
        logits = self.logits if allowed is None else masked(self.logits, allowed)
        seen = np.zeros(self.logits.shape, bool)
        seen[self.ids] = True
        return sampling.filter(logits, seen)

    def next(self, sampling: Sampling, form: Verse | None = None) -> dict:
        """The most likely next tokens, their probabilities before and after the mask and
        filters, the entropy of what a draw would come from, and the token greedy decoding
        would take."""
        filtered = self.filtered(sampling, form)
        complete = form is not None and form.done(self.ids)
        step = describe(int(np.argmax(filtered)), self.logits, filtered, N_SHOWN)
        return {"candidates": [{**piece(self.encoder, int(i)), "before": float(b),
                                "after": float(a)}
                               for i, b, a in zip(step.ids, step.before, step.after)],
                "entropy": step.entropy, "greedy": step.token, "complete": complete}

    def append(self, token: int, form: Verse | None = None) -> dict:
        """Add one token to the text: one position through the model, through the cache. A
        token the form does not allow here is refused before the text changes."""
        whole_number("token", token, 0, self.n_vocab - 1)
        check_context(len(self.ids), 1, self.n_ctx)
        allowed = None if form is None else self.allowed(form)
        if allowed is not None and not allowed[token]:
            raise PicoGPTError(_("{token} does not keep the form here: take a token whose after "
                                 "bar is not empty, or turn the form off.").format(
                                     token=repr(self.encoder.decode([token]))))
        self.shown(token)
        self.step(token)
        return self.state()

    def shown(self, token: int) -> dict:
        """token as the page shows it; PicoGPTError for an id the vocabulary does not hold (a
        model whose wte has more rows than its vocabulary has tokens), before the text holds
        it."""
        if not 0 <= token < self.encoder.n_vocab:
            raise PicoGPTError(_("the model chose token {token}, which its vocabulary of {n} "
                                 "tokens does not hold; the text stops before it.").format(
                                     token=token, n=self.encoder.n_vocab))

        return piece(self.encoder, token)

    def step(self, token: int) -> None:
        """One position through the model. If the model fails, the session is as it was: the
        cache forgets what it wrote, and the text and logits are untouched."""
        try:
            logits = self.engine.decode_step(token, self.params, self.n_head, self.cache)
        except BaseException:
            self.cache.rewind(len(self.ids))
            raise
        self.logits, self.ids = logits, [*self.ids, token]

    def draw(self, sampling: Sampling, seed: int, form: Verse | None = None) -> dict:
        """Append the token a sampler draws with this seed: generate's first with that seed."""
        check_settings(1, sampling, seed, None, self.n_vocab)
        return self.append(sampling.pick(self.filtered(sampling, form),
                                          sample_rngs(seed, 1)[0]))

    def back(self) -> dict:
        """Take the last token back (the first stays: there is always a next token to show)."""
        if len(self.ids) < 2:
            raise PicoGPTError(_("there is no step to take back: the text is one token long."))
        self.ids = self.ids[:-1]
        self.cache.rewind(len(self.ids) - 1)  # re-run the new last position for its logits
        self.logits = self.engine.decode_step(self.ids[-1], self.params, self.n_head,
                                             self.cache)
        return self.state()

    def generate(self, sampling: Sampling, seed: int | None, n_tokens: int,
                 stopped: Callable[[], bool] = lambda: False,
                 form: Verse | None = None) -> Iterator[dict]:
        """Append up to n_tokens tokens as generate would pick them from this text, yielding
        each one's piece; it ends at the vocabulary's end token (not appended), when stopped()
        says so, or when a token completes the form's poem (after a complete one, the text
        goes on free)."""
        check_settings(n_tokens, sampling, seed, None, self.n_vocab)
        check_context(len(self.ids), n_tokens, self.n_ctx)
        rng = sample_rngs(seed, 1)[0]
        writing = form is not None and not form.done(self.ids)  # a poem that is not complete
        for _step in range(n_tokens):
            if stopped():
                return
            token = sampling.pick(self.filtered(sampling, form), rng)
            if token == self.encoder.end:
                return
            shown = self.shown(token)
            self.step(token)
            yield shown
            if writing and form.done(self.ids):
                return

    def inside(self, pause: Callable[[], None] = lambda: None) -> dict:
        """The text's attention, head scores, logit lens and wpe similarity, as on --explain
        (the lens at the positions the attention keeps); pause is called between the logit
        lens's rows (see views.views)."""
        return views(list(self.ids), self.params, self.hparams, self.encoder, pause,
                     lens_kept=True)


def text_pieces(encoder: Encoder, ids: list[int]) -> list[bytes]:
    """The bytes each token adds to the text before it, as the vocabulary decodes the whole:
    a BPE token's own bytes; a WordPiece token's with the space decode puts before it."""
    return [added_bytes(encoder, ids[max(i - 1, 0) : i], token) for i, token in enumerate(ids)]


def box_text(pieces: list[bytes]) -> tuple[str, bytes, bytes]:
    """(text, pending, stray) of the pieces' bytes: the whole characters a text box can hold
    without a "�"; the bytes at the end that begin a character the next pieces may finish;
    and bytes before that which begin or continue no character, left out of the text (the
    text after them is kept)."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")  # a stray b -> U+DC00+b
    decoded = decoder.decode(b"".join(pieces))  # final=False: an unfinished end is held back
    stray = bytes(ord(c) - 0xDC00 for c in decoded if "\udc80" <= c <= "\udcff")
    text = "".join(c for c in decoded if not "\udc80" <= c <= "\udcff")
    return text, decoder.getstate()[0], stray


def retokenized(old: list[int], new: list[int], encoder: Encoder) -> int:
    """How many of old's tokens, each wholly before the first byte where the two texts differ
    (the token the edit touches excepted), new does not keep as they were."""
    pieces = text_pieces(encoder, old)
    before, after = b"".join(pieces), b"".join(text_pieces(encoder, new))
    shared = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b),
                  min(len(before), len(after)))
    ends = np.cumsum([len(data) for data in pieces])  # where each old token's bytes end
    n_before = int(np.sum(ends < shared))
    kept = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    return max(0, n_before - kept)
