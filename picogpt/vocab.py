"""Which vocabulary a model folder holds, read from its files and checked.

Owns reading a vocabulary from disk: a byte-level BPE (encoder.json and vocab.bpe, as OpenAI
ships GPT-2's and picogpt.train writes its own; vocab.json and merges.txt in a Hugging Face
folder) or a WordPiece vocabulary (vocab.txt, with tokenizer_config.json and
special_tokens_map.json beside it, as BERT's and the uer Chinese GPT-2s' are). The files
decide which, in every folder picogpt reads: OpenAI's, a trained model's and a Hugging Face
folder. The classes that turn text into ids are encoder.py's and wordpiece.py's; this room
only reads and checks, and must not write.
"""

from pathlib import Path

from .encoder import SPECIAL, Encoder
from .errors import PicoGPTError
from .store import read_json

N_VOCAB, N_MERGES = 50257, 50000  # what GPT-2's encoder.json and vocab.bpe hold
END_OF_TEXT_ID = 50256  # where GPT-2's table puts <|endoftext|>
BPE_FILES = (("encoder.json", "vocab.bpe"), ("vocab.json", "merges.txt"))  # OpenAI's, HF's
WORDPIECE_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def read_vocab(folder: Path, fix: str, gpt2: bool = False):
    """The vocabulary of a model folder (an Encoder or a WordPiece), chosen by its files; with
    gpt2, it must be GPT-2's own 50,257 tokens and 50,000 merges. fix says what to do about a
    bad file."""
    bpe = [pair for pair in BPE_FILES if all((folder / name).is_file() for name in pair)]
    wordpiece = (folder / WORDPIECE_FILES[0]).is_file()
    if len(bpe) + wordpiece != 1:
        names = [name for pair in BPE_FILES for name in pair] + list(WORDPIECE_FILES)
        found = [name for name in names if (folder / name).is_file()]
        halves = [f"{a} without {b}" for pair in BPE_FILES for a, b in (pair, pair[::-1])
                  if (folder / a).is_file() and not (folder / b).is_file()]
        which = "both a BPE and a WordPiece vocabulary" if bpe and wordpiece else (
            "two BPE vocabularies" if len(bpe) > 1 else
            f"no whole vocabulary ({'; '.join(halves)})" if halves else "no vocabulary")
        raise PicoGPTError(
            f"{folder} holds {which} (found: {', '.join(found) or 'none of them'}); picogpt "
            f"needs exactly one: encoder.json + vocab.bpe, vocab.json + merges.txt (byte-level "
            f"BPE, as GPT-2's) or vocab.txt (WordPiece, as BERT's). {fix[0].upper()}{fix[1:]}.")
    if wordpiece:
        if gpt2:
            raise PicoGPTError(f"{folder} holds vocab.txt, not GPT-2's encoder.json and "
                               f"vocab.bpe; {fix}.")
        return read_wordpiece(folder, fix)
    tokens, merges = bpe[0]
    return read_bpe(folder / tokens, folder / merges, (N_VOCAB, N_MERGES) if gpt2 else None, fix)


def read_bpe(tokens_file: Path, merges_file: Path, sizes: tuple[int, int] | None,
             fix: str) -> Encoder:
    """A byte-level BPE from a token table (JSON: token -> id) and a merge list (a pair a
    line, after a "#version" line), checked to hold <|endoftext|>; with sizes (GPT-2's),
    exactly that many tokens and merges and <|endoftext|> = 50256. fix is what the error says
    to do."""
    table = read_json(tokens_file)
    n_tokens, n_merges = sizes or (None, None)
    if not isinstance(table, dict) or SPECIAL not in table or (n_tokens is not None and (
            len(table) != n_tokens or table[SPECIAL] != END_OF_TEXT_ID)):
        count = f"{n_tokens} tokens, {SPECIAL} = {END_OF_TEXT_ID}" if n_tokens else \
            f"token -> id, with {SPECIAL}"
        what = "GPT-2's token table" if n_tokens else "a BPE token table"
        raise PicoGPTError(f"{tokens_file} is not {what} ({count}); {fix}.")
    if sorted(table.values()) != list(range(len(table))):
        raise PicoGPTError(f"{tokens_file}'s ids are not 0 .. {len(table) - 1}, each once; "
                           f"{fix}.")
    try:
        lines = merges_file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else "it is not UTF-8 text"
        raise PicoGPTError(f"cannot read {merges_file} ({reason}); {fix}.") from None
    # Each half of a merge is a token too: reusing the table's string for it, not a second
    # copy, keeps ~5 MiB less in memory for the whole run
    same = {token: token for token in table}
    merges = [tuple(same.get(half, half) for half in line.split()) for line in lines
              if line and not line.startswith("#version")]
    if (n_merges is not None and len(merges) != n_merges) or any(
            len(merge) != 2 for merge in merges):
        count = f"{n_merges} pairs" if n_merges else "one pair a line"
        what = "GPT-2's merge list" if n_merges else "a BPE merge list"
        raise PicoGPTError(f"{merges_file} is not {what} ({count}); {fix}.")
    return Encoder(table, merges)


def read_wordpiece(folder: Path, fix: str):
    """A WordPiece vocabulary: vocab.txt (one token a line; its line number is its id) and the
    settings of tokenizer_config.json and special_tokens_map.json where they exist."""
    raise NotImplementedError("WordPiece vocabularies are being added (issue 33)")
