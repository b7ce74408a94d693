"""Byte-level BPE: text to GPT-2 token ids and back.

It holds the `Encoder` class, built from GPT-2's token table (encoder.json) and merge list
(vocab.bpe) that files/vocab_files.py read.

Every vocabulary picogpt reads (this one, and WordPiece's beside it) has the same face: `encode`,
`decode`, `decode_bytes`, `n_vocab`, and its special tokens as data: `start` (the id a text
begins after), `end` (the id that ends a text, or None), `unknown` (the id of a word outside
the vocabulary, or None), and `prompt_ids` (what the model is fed for a prompt). GPT-2 has one
special token, <|endoftext|>, which both ends a document and begins the next, so it is `start`
and `end`; it is fed before a prompt only when the prompt is empty, as OpenAI's code did.

The same class runs the byte-level BPEs that came after GPT-2's (Qwen's, LLaMA-3's), which
tokenizer.json describes with a few more settings, all data of the encoder:
- `normal`: a Unicode normalization run on the text first ("NFC"), or None;
- `pieces`: the regex that cuts text into pieces before BPE (GPT-2's `PIECES`, or the model's
  own: Qwen's cuts digits one by one); a regex that came in a download runs under `timeout`;
- `added`: tokens found wherever the text holds them, before anything else runs (ChatML's
  <|im_start|> and <|im_end|>, which a chat template writes into the text);
- `begin`: the id put before every prompt (LLaMA-3's <|begin_of_text|>), or None;
- `whole`: a piece that is a token as a whole is that token, without merging (LLaMA-3).
"""

import unicodedata

import regex

from .errors import PicoGPTError, _

N_VOCAB, N_MERGES = 50257, 50000  # GPT-2's vocabulary: 256 bytes, 50,000 merges, <|endoftext|>
END_OF_TEXT = N_VOCAB - 1  # id of "<|endoftext|>" in GPT-2's encoder.json, its last
SPECIAL = "<|endoftext|>"  # a byte-level BPE's one special token, in GPT-2's and picogpt's own

# GPT-2 cuts text into pieces before BPE: English contractions (lower case only, as OpenAI's
# encoder does), letter runs, digit runs and other-symbol runs, each with at most one leading
# space, then whitespace. BPE never merges across two pieces.
PIECES = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> dict[int, str]:
    """Map each of the 256 byte values to the printable character encoder.json spells it with."""
    # bytes that are printable Latin-1 stand for themselves; the others are moved up past 255
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    unprintable = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable},
            **{b: chr(256 + i) for i, b in enumerate(unprintable)}}


def merge_pair(tokens: tuple | list, pair: tuple[str, str]) -> tuple:
    """tokens with every occurrence of pair, left to right, joined into one token: one step of
    BPE, when encoding (encoder.bpe) and when learning merges (merges.py)."""
    merged, i = [], 0
    while i < len(tokens):
        if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
            merged.append(tokens[i] + tokens[i + 1])
            i += 2
        else:
            merged.append(tokens[i])
            i += 1
    return tuple(merged)


def added_parts(text: str, added_at: regex.Pattern | None):
    """text as (part, is it an added token) pairs, in order, the empty parts left out: each
    match of added_at (the added tokens, longest first) is a part of its own."""
    at = 0
    for match in added_at.finditer(text) if added_at else ():
        if match.start() > at:
            yield text[at : match.start()], False
        yield match.group(), True
        at = match.end()
    if at < len(text):
        yield text[at:], False


def isolated(text: str, pieces: regex.Pattern, timeout: float | None) -> list[str]:
    """text cut as tokenizers' Split with behavior "Isolated" cuts it: each match of pieces,
    and the text between two matches, as a piece of its own. A regex from a download is stopped
    after timeout seconds per 100,000 characters."""
    cut, at = [], 0
    seconds = None if timeout is None else timeout * (1 + len(text) / 100_000)
    try:
        for match in pieces.finditer(text, timeout=seconds):
            cut += [text[at : match.start()]] if match.start() > at else []
            cut += [match.group()] if match.end() > match.start() else []
            at = match.end()
    except TimeoutError:
        raise PicoGPTError(_("the tokenizer's pre-tokenizer regex took more than {seconds} "
                             "s on a text of {n} characters, so it was stopped: the regex "
                             "is unsafe. Use the tokenizer.json the model was released "
                             "with.").format(seconds=f"{seconds:g}", n=len(text))) from None
    return [*cut, text[at:]] if at < len(text) else cut


def added_bytes(encoder, previous: list[int], token: int) -> bytes:
    """The bytes token adds to a text that ends with the ids in previous (the last one is
    enough): a BPE token's own bytes; for WordPiece, whose space before a word depends on the
    token before it, the text of both less the text of the first."""
    before = encoder.decode_bytes(previous[-1:])
    return encoder.decode_bytes([*previous[-1:], token])[len(before) :]


class Encoder:
    """A byte-level BPE tokenizer: `encode(str) -> list[int]`, `decode(list[int]) -> str`."""

    def __init__(self, encoder: dict[str, int], merges: list[tuple[str, str]], *,
                 pieces: regex.Pattern = PIECES, normal: str | None = None,
                 added: tuple[str, ...] = (), begin: str | None = None,
                 start: str | None = SPECIAL, end: str | None = SPECIAL, whole: bool = False,
                 timeout: float | None = None):
        """GPT-2's tokenizer from its table and merges; the keywords describe a later one,
        each special token (begin, start, end) named by its text in the table."""
        self.encoder = encoder  # token spelled in bytes_to_unicode's alphabet -> id
        self.n_vocab = len(encoder)
        self.start = None if start is None else encoder[start]  # 50256 in GPT-2's table
        self.end = None if end is None else encoder[end]
        self.begin = None if begin is None else encoder[begin]
        self.unknown = None  # 256 byte tokens: every text encodes
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}  # lower merges first
        self.pieces, self.normal, self.whole, self.timeout = pieces, normal, whole, timeout
        self.added = tuple(added)
        # longest first, so that of two added tokens starting at one place the longer wins
        self.added_at = regex.compile("|".join(
            regex.escape(token) for token in sorted(added, key=len, reverse=True))) \
            if added else None
        byte_to_char = bytes_to_unicode()
        self.byte_to_char = [byte_to_char[b] for b in range(256)]
        char_to_byte = {c: b for b, c in byte_to_char.items()}
        self.token_bytes = {i: token.encode("utf-8") if token in self.added
                            else bytes(char_to_byte[c] for c in token)
                            for token, i in encoder.items()}
        self.piece_ids: dict[str, list[int]] = {}  # memo: text pieces repeat a lot

    def bpe(self, piece: str) -> list[str]:
        """Split one piece into tokens by applying the lowest-ranked merge until none applies."""
        if self.whole and piece in self.encoder:
            return [piece]
        parts = list(piece)
        while len(parts) > 1:
            pairs = set(zip(parts, parts[1:]))
            best = min(pairs, key=lambda pair: self.ranks.get(pair, float("inf")))
            if best not in self.ranks:
                break
            parts = merge_pair(parts, best)
        return list(parts)

    def encode(self, text: str) -> list[int]:
        """Token ids of text, without a begin token. "<|endoftext|>" written in the text is
        plain text for GPT-2, as in OpenAI's; a later tokenizer's added tokens are found in it."""
        ids = []
        for part, is_added in self.parts(text):
            if is_added:
                ids.append(self.encoder[part])
                continue
            for piece in self.cut(unicodedata.normalize(self.normal, part) if self.normal
                                  else part):
                if piece not in self.piece_ids:
                    spelled = "".join(self.byte_to_char[b] for b in piece.encode("utf-8"))
                    self.piece_ids[piece] = [self.encoder[token] for token in self.bpe(spelled)]
                ids += self.piece_ids[piece]
        return ids

    def parts(self, text: str):
        """text as (part, is it an added token) pairs: added_parts with this tokenizer's."""
        return added_parts(text, self.added_at)

    def cut(self, text: str) -> list[str]:
        """text cut into the pieces BPE runs on (GPT-2's regex, or the tokenizer's own)."""
        return PIECES.findall(text) if self.pieces is PIECES else \
            isolated(text, self.pieces, self.timeout)

    def prompt_ids(self, text: str) -> list[int]:
        """The ids the model is fed for a prompt: the begin token if the tokenizer adds one, then
        the text's tokens; for GPT-2, <|endoftext|> alone for an empty prompt, as GPT-2 saw the
        start of a document."""
        if self.begin is not None:
            return [self.begin, *self.encode(text)]
        ids = self.encode(text) or ([self.start] if self.start is not None else [])
        if not ids:
            raise PicoGPTError(_("this model's tokenizer puts no token before a text, so there "
                                 "is nothing to start from: give a prompt."))
        return ids

    def outside(self, text: str) -> list[str]:
        """The words of text that would become the unknown token: none, for byte-level BPE."""
        return []

    def decode_bytes(self, ids: list[int]) -> bytes:
        """The UTF-8 bytes the ids stand for (a token may hold part of a character)."""
        try:
            return b"".join(self.token_bytes[i] for i in ids)
        except KeyError as e:
            raise ValueError(f"token id {e.args[0]!r} is not one of this vocabulary's "
                             f"{len(self.token_bytes)} token ids") from None

    def decode(self, ids: list[int]) -> str:
        """Text of the ids; bytes that do not form valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def model_tokens(n_vocab: int, encoder=None, needed: bool = True) -> tuple[int | None, int | None]:
    """The start and end token of a model with n_vocab tokens (wte's rows): its encoder's, or
    GPT-2's <|endoftext|> for a model with GPT-2's 50,257 tokens. For any other model with no
    encoder, a PicoGPTError that asks for one when needed, else (None, None)."""
    if encoder is not None:
        tokens = (encoder.start, encoder.end)
    elif n_vocab == N_VOCAB:
        tokens = (END_OF_TEXT, END_OF_TEXT)
    elif needed:
        raise PicoGPTError(_("this model has {n_vocab} tokens, not GPT-2's {gpt2}, so its start "
                             "and end tokens are its own: pass its encoder (encoder=, from "
                             "load_model) or its start token (start_id=).").format(
            n_vocab=n_vocab, gpt2=N_VOCAB))
    else:
        return None, None
    wrong = [i for i in tokens if i is not None and not 0 <= i < n_vocab]  # None: it has none
    if wrong:
        raise PicoGPTError(_("the vocabulary's start or end token, id {id}, is not one of the "
                             "model's {n_vocab} tokens; use the model's own vocabulary.").format(
            id=wrong[0], n_vocab=n_vocab))
    return tokens
