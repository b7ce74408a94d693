"""A character vocabulary: each character is a token, for training a model on a small text.

Owns the `Chars` class and `count_chars`, which builds a vocabulary from a text. Every
character the text holds at least twice is a token (line breaks and spaces too, so a model can
end a line); any other character becomes one unknown token; a start token opens every poem or
paragraph in training, so an empty prompt works as GPT-2's <|endoftext|> does. A model folder
keeps it as chars.json (a JSON list: the line number of the list is the id), which
files/vocab_files.py reads.

Why not WordPiece's vocab.txt: BERT's basic tokenization drops spaces and line breaks, so a
poem's lines could not end. Why not byte-level BPE: GPT-2's cuts a Chinese character into two
or three byte tokens (docs/poems.md measures all three). `Chars` has the face `Encoder` and
`WordPiece` have (`encode`, `decode`, `decode_bytes`, `n_vocab`, `start`, `end`, `unknown`,
`prompt_ids`, `outside`), so every command runs it unchanged. It also holds `paragraphs`, the
one rule that cuts a text (or a file of poems) into the pieces a model trains on one at a time,
which the text task and the poems' reader (files/poems.py) share. No I/O.

`WordLevel` is the same vocabulary as tokenizer.json describes it (a WordLevel model whose
pre-tokenizer makes each character a word), in the Hugging Face folders `python -m picogpt.train
--model llama` writes; it reads any WordLevel tokenizer.json whose words a Split regex cuts (or
whose whole text is one word): each word one token or the unknown token, added tokens found
wherever the text holds them, the begin token its post-processor adds, the tokens joined as
they are when decoding (Fuse).
"""

import re
from collections import Counter

import regex

from .encoder import added_parts, isolated
from .errors import PicoGPTError, _

START, UNKNOWN = "<|start|>", "<|unknown|>"  # the two special tokens, last in the list
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


def count_chars(text: str, min_count: int = 2) -> list[str]:
    """The tokens of a character vocabulary for text: each character it holds at least
    min_count times, most frequent first (ties in the text's order), then the unknown and the
    start token."""
    counts = Counter(text)  # keeps first-seen order, so most_common breaks ties by it
    return [char for char, n in counts.most_common() if n >= min_count] + [UNKNOWN, START]


class Chars:
    """A character vocabulary: `encode(str) -> list[int]`, `decode(list[int]) -> str`."""

    def __init__(self, tokens: list[str]):
        self.tokens = list(tokens)  # id -> token: characters, then <|unknown|> and <|start|>
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        self.n_vocab = len(self.tokens)
        # start also ends: a model learns to begin the next poem where one ends, and
        # generation stops there, as GPT-2's <|endoftext|> does
        self.start = self.end = self.ids[START]
        self.unknown = self.ids[UNKNOWN]

    def encode(self, text: str) -> list[int]:
        """Token ids of text, a character each; "<|start|>" typed in the text is plain text."""
        return [self.ids.get(char, self.unknown) for char in text]

    def prompt_ids(self, text: str) -> list[int]:
        """The ids the model is fed for a prompt: the start token, then the text's characters,
        as every poem began in training."""
        return [self.start, *self.encode(text)]

    def outside(self, text: str) -> list[str]:
        """The characters of text outside the vocabulary (each becomes <|unknown|>), once each."""
        return list(dict.fromkeys(char for char in text if char not in self.ids))

    def decode(self, ids: list[int]) -> str:
        """The text of the ids: each token's character (a special token as its name)."""
        for i in ids:
            if not 0 <= i < self.n_vocab:
                raise ValueError(f"token id {i!r} is not one of this vocabulary's "
                                 f"{self.n_vocab} token ids")
        return "".join(self.tokens[i] for i in ids)

    def decode_bytes(self, ids: list[int]) -> bytes:
        """The UTF-8 bytes of decode(ids): every token is whole characters."""
        return self.decode(ids).encode("utf-8")


def paragraphs(text: str) -> list[str]:
    """The one rule that cuts a text (or a file of poems) into paragraphs: the pieces between
    blank lines; with no blank line, its lines (a text of one poem a line); with one line, its
    sentences; with one sentence, its first nine tenths and its last tenth."""
    text = text.replace("\r\n", "\n")
    parts = [part.strip("\n") for part in re.split(r"\n[ \t\r]*\n", text) if part.strip()]
    if len(parts) < 2:
        parts = [line for line in text.split("\n") if line.strip()]
    if len(parts) < 2:
        parts = [part for part in SENTENCE_END.split(text.strip()) if part.strip()]
    if len(parts) < 2 and len(text.strip()) >= 10:
        cut = len(text.strip()) * 9 // 10
        parts = [text.strip()[:cut], text.strip()[cut:]]
    return parts


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
