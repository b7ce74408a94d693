"""A WordLevel vocabulary: each word of the text is one token, or the unknown token.

tokenizer.json's simplest model: the pre-tokenizer cuts the text into words (a Split regex, as
`[\\s\\S]` makes every character a word in the folders `python -m picogpt.train --model llama`
writes), and each word is looked up in the vocab. Added tokens are found wherever the text holds
them, and a begin token is put before a prompt when the post-processor adds one. The decoder
(Fuse) joins the tokens as they are. It has the face `Encoder` and `WordPiece` have (`encode`,
`decode`, `decode_bytes`, `n_vocab`, `start`, `end`, `unknown`, `begin`, `prompt_ids`,
`outside`). No I/O.
"""

import regex

from .encoder import added_parts, isolated
from .errors import PicoGPTError, _


class WordLevel:
    """A vocabulary of whole words: `encode(str) -> list[int]`, `decode(list[int]) -> str`."""

    def __init__(self, vocab: dict[str, int], unknown: str | None, *,
                 pieces: regex.Pattern | None = None, added: tuple[str, ...] = (),
                 begin: str | None = None, end: str | None = None,
                 timeout: float | None = None):
        """vocab: word -> id (added tokens among them); the special tokens by their text."""
        self.ids = vocab
        self.tokens = {i: token for token, i in vocab.items()}
        self.n_vocab = len(vocab)
        self.unknown = None if unknown is None else vocab[unknown]
        self.begin = self.start = None if begin is None else vocab[begin]
        self.end = None if end is None else vocab[end]
        self.pieces, self.timeout, self.added = pieces, timeout, tuple(added)
        self.added_at = regex.compile("|".join(
            regex.escape(token) for token in sorted(added, key=len, reverse=True))) \
            if added else None

    def words(self, text: str) -> list[tuple[str, bool]]:
        """text's words, each with whether it is an added token."""
        return [(word, False) if not is_added else (part, True)
                for part, is_added in added_parts(text, self.added_at)
                for word in ([part] if is_added or self.pieces is None
                             else isolated(part, self.pieces, self.timeout))]

    def encode(self, text: str) -> list[int]:
        """Token ids of text, a word each, without a begin token."""
        ids = [self.ids.get(word, self.unknown) for word, _added in self.words(text)]
        if None in ids:
            word = next(word for word, _added in self.words(text) if word not in self.ids)
            raise PicoGPTError(_("the vocabulary has no token for {word} and no unknown token "
                                 "to read it as; write the text without it.").format(
                                     word=repr(word)))
        return ids

    def prompt_ids(self, text: str) -> list[int]:
        """The ids the model is fed for a prompt: the begin token if there is one, then the
        text's."""
        ids = ([self.begin] if self.begin is not None else []) + self.encode(text)
        if not ids:
            raise PicoGPTError(_("this model's tokenizer puts no token before a text, so there "
                                 "is nothing to start from: give a prompt."))
        return ids

    def outside(self, text: str) -> list[str]:
        """The words of text outside the vocabulary (each becomes the unknown token), once each."""
        return list(dict.fromkeys(word for word, _added in self.words(text)
                                  if word not in self.ids))

    def decode(self, ids: list[int]) -> str:
        """The text of the ids: their tokens joined as they are."""
        for i in ids:
            if i not in self.tokens:
                raise ValueError(f"token id {i!r} is not one of this vocabulary's "
                                 f"{self.n_vocab} token ids")
        return "".join(self.tokens[i] for i in ids)

    def decode_bytes(self, ids: list[int]) -> bytes:
        """The UTF-8 bytes of decode(ids): every token is whole characters."""
        return self.decode(ids).encode("utf-8")
