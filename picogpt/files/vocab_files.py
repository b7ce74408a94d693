"""The vocabulary files before tokenizer.json, read and checked.

A byte-level BPE (encoder.json and vocab.bpe, or Hugging Face's vocab.json and merges.txt) or a
WordPiece vocabulary (vocab.txt with tokenizer_config.json and special_tokens_map.json), or
a character vocabulary (chars.json, as picogpt.train --vocab chars writes): `read_files`
reads the one kind a folder holds. tokenizer.json, which transformers 5 saves for either kind,
is tokenizer_json.py's, built on the readers here; which of the two a folder is read by, and
that they agree, is folder_vocab.py's. It reads and checks; the classes that use the vocabulary are
encoder.py's, wordpiece.py's and chars.py's.
"""

from pathlib import Path

from ..chars import START, UNKNOWN, Chars
from ..encoder import END_OF_TEXT, N_MERGES, N_VOCAB, SPECIAL, Encoder, bytes_to_unicode
from ..errors import PicoGPTError, _, reason
from ..wordpiece import WordPiece
from .store import read_json

BPE_FILES = (("encoder.json", "vocab.bpe"), ("vocab.json", "merges.txt"))  # OpenAI's, HF's
CHARS_FILE = "chars.json"  # a JSON list of picogpt's character vocabulary: id -> token
WORDPIECE_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
TOKENIZER_JSON = "tokenizer.json"  # the tokenizers library's one file: either kind
# what WordPiece takes from those two JSON files: each setting's types (None: the default), and
# which words of `wanted` the error names them with
FLAG, TOKEN = ((bool,), "flag"), ((str, type(None)), "token")
SETTINGS = {"do_lower_case": FLAG, "tokenize_chinese_chars": FLAG, "do_basic_tokenize": FLAG,
            "strip_accents": ((bool, type(None)), "flag or null"),
            "never_split": ((list, type(None)), "words"),
            **{f"{name}_token": TOKEN for name in ("cls", "sep", "unk", "pad", "mask")}}


def wanted(kind: str) -> str:
    """What a setting of SETTINGS must be, in words."""
    return {"flag": _("true or false"), "token": _("a string"),
            "flag or null": _("true, false or null"), "words": _("a list of strings or null")}[kind]


def read_files(folder: Path, fix: str, gpt2: bool):
    """The vocabulary of the files before tokenizer.json: exactly one kind of them."""
    bpe = [pair for pair in BPE_FILES if all((folder / name).is_file() for name in pair)]
    wordpiece = (folder / WORDPIECE_FILES[0]).is_file()
    chars = (folder / CHARS_FILE).is_file()
    if len(bpe) + wordpiece + chars != 1:
        names = [name for pair in BPE_FILES for name in pair] + list(WORDPIECE_FILES) + [
            CHARS_FILE]
        found = [name for name in names if (folder / name).is_file()]
        halves = [_("{a} without {b}").format(a=a, b=b) for pair in BPE_FILES
                  for a, b in (pair, pair[::-1])
                  if (folder / a).is_file() and not (folder / b).is_file()]
        which = _("two kinds of vocabulary") if bool(bpe) + wordpiece + chars > 1 else (
            _("two BPE vocabularies") if len(bpe) > 1 else
            _("no whole vocabulary ({halves})").format(halves=_("; ").join(halves)) if halves
            else _("no vocabulary"))
        raise PicoGPTError(_(
            "{folder} holds {which} (found: {found}); picogpt needs exactly one: encoder.json + "
            "vocab.bpe, vocab.json + merges.txt (byte-level BPE, as GPT-2's), vocab.txt "
            "(WordPiece, as BERT's), tokenizer.json (either) or chars.json (characters). {fix}."
            ).format(folder=folder, which=which, found=", ".join(found) or _("none of them"),
                     fix=fix[0].upper() + fix[1:]))
    if chars:
        if gpt2:
            raise PicoGPTError(_("{folder} holds {file}, not GPT-2's encoder.json and vocab.bpe; "
                                 "{fix}.").format(folder=folder, file=CHARS_FILE, fix=fix))
        return read_chars(folder / CHARS_FILE, fix)
    if wordpiece:
        if gpt2:
            raise PicoGPTError(_("{folder} holds vocab.txt, not GPT-2's encoder.json and "
                                 "vocab.bpe; {fix}.").format(folder=folder, fix=fix))
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
    try:
        lines = merges_file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise PicoGPTError(_("cannot read {file} ({reason}); {fix}.").format(
            file=merges_file, reason=reason(e), fix=fix)) from None

    merges = [tuple(line.split()) for line in lines if line and not line.startswith("#version")]
    return bpe_encoder(table, merges, sizes, (str(tokens_file), str(merges_file)), fix)


def bpe_encoder(table, merges: list[tuple], sizes: tuple[int, int] | None,
                names: tuple[str, str], fix: str, **settings) -> Encoder:
    """An Encoder of a token table and a merge list, checked: <|endoftext|> and every byte are
    tokens, the ids are 0 .. n - 1, each merge is a pair that makes a token; with sizes
    (GPT-2's), exactly that many tokens and merges and <|endoftext|> = 50256. names are the
    table's and the list's, as the error names them. settings go to the Encoder: a later
    tokenizer's (its own pieces regex) need not hold <|endoftext|>."""
    tokens_file, merges_file = names
    n_tokens, n_merges = sizes or (None, None)
    special = "pieces" not in settings
    if not isinstance(table, dict) or special and SPECIAL not in table or (
            n_tokens is not None and (len(table) != n_tokens or table[SPECIAL] != END_OF_TEXT)):
        said = (_("{file} is not GPT-2's token table ({n} tokens, {special} = {id}); {fix}.")
                if n_tokens else
                _("{file} is not a BPE token table (token -> id, with {special}); {fix}.")
                if special else _("{file} is not a BPE token table (token -> id); {fix}."))
        raise PicoGPTError(said.format(file=tokens_file, n=n_tokens, special=SPECIAL,
                                       id=END_OF_TEXT, fix=fix))
    if sorted(table.values()) != list(range(len(table))):
        raise PicoGPTError(_("{file}'s ids are not 0 .. {last}, each once; {fix}.").format(
            file=tokens_file, last=len(table) - 1, fix=fix))
    missing = [c for c in bytes_to_unicode().values() if c not in table]
    if missing:  # byte-level BPE spells every text with these: without one, some text fails
        raise PicoGPTError(_("{file} lacks the byte token {token!r}, one of the 256 every "
                             "byte-level BPE holds; {fix}.").format(
                                 file=tokens_file, token=missing[0], fix=fix))
    # Each half of a merge is a token too: reusing the table's string for it, not a second
    # copy, keeps ~5 MiB less in memory for the whole run
    same = {token: token for token in table}
    merges = [tuple(same.get(half, half) for half in merge) for merge in merges]
    if (n_merges is not None and len(merges) != n_merges) or any(
            len(merge) != 2 or merge[0] + merge[1] not in table for merge in merges):
        said = (_("{file} is not GPT-2's merge list ({n} pairs); {fix}.") if n_merges else
                _("{file} is not a BPE merge list (one pair a line, each making a token); "
                  "{fix}."))
        raise PicoGPTError(said.format(file=merges_file, n=n_merges, fix=fix))
    return Encoder(table, merges, **settings)


def read_chars(path: Path, fix: str) -> Chars:
    """A character vocabulary: chars.json, a JSON list of distinct tokens (its index is the id),
    each one character but the two special tokens. fix is what the error says to do."""
    tokens = read_json(path)
    if not (isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)
            and len(set(tokens)) == len(tokens) and {START, UNKNOWN} <= set(tokens)
            and all(len(t) == 1 for t in tokens if t not in (START, UNKNOWN))):
        raise PicoGPTError(_("{path} is not a character vocabulary (a JSON list of distinct "
                             "characters with {unknown} and {start}); {fix}.").format(
                                 path=path, unknown=UNKNOWN, start=START, fix=fix))

    return Chars(tokens)


def read_wordpiece(folder: Path, fix: str) -> WordPiece:
    """A WordPiece vocabulary: vocab.txt (one token a line; its line number is its id) and the
    settings of tokenizer_config.json and special_tokens_map.json where they exist, defaulting
    as BertTokenizer's. fix is what the error says to do."""
    path = folder / WORDPIECE_FILES[0]
    try:  # universal newlines, as transformers' load_vocab reads it: \r\n ends a line too
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PicoGPTError(_("cannot read {file} ({reason}); {fix}.").format(
            file=path, reason=reason(e), fix=fix)) from None
    tokens = text.split("\n")
    if tokens[-1] == "":  # the newline that ends the last line starts no token
        tokens.pop()
    settings = folder_settings(folder, fix)
    try:
        return WordPiece(tokens, **settings)
    except PicoGPTError as e:
        raise PicoGPTError(_("{file}: {error}; {fix}.").format(file=path, error=e, fix=fix)
                           ) from None


def folder_settings(folder: Path, fix: str) -> dict:
    """The WordPiece settings of a folder's tokenizer_config.json and special_tokens_map.json
    (the latter wins, as from_pretrained); refused if basic tokenization is turned off."""
    settings = {}
    for name in WORDPIECE_FILES[1:]:
        settings.update(wordpiece_settings(folder / name, fix))
    if settings.pop("do_basic_tokenize", True) is not True:
        raise PicoGPTError(_("{file} turns off BERT's basic tokenization (do_basic_tokenize), "
                             "which picogpt's WordPiece always runs; {fix}.").format(
                                 file=folder / WORDPIECE_FILES[1], fix=fix))
    return settings


def wordpiece_settings(path: Path, fix: str) -> dict:
    """The settings WordPiece takes from one tokenizer JSON file ({} if it is absent), checked.
    A special token is a string, or an object whose "content" is one (as transformers saves)."""
    if not path.is_file():
        return {}
    config = read_json(path)
    if not isinstance(config, dict):
        raise PicoGPTError(_("{file} is not a JSON object of tokenizer settings; {fix}.").format(
            file=path, fix=fix))
    settings = {}
    for name, (kinds, kind) in SETTINGS.items():
        value = config.get(name)
        if isinstance(value, dict) and name.endswith("_token"):
            value = value.get("content")
        if name in config and not isinstance(value, kinds) or (
                isinstance(value, list) and not all(isinstance(word, str) for word in value)):
            raise PicoGPTError(_("{file} sets {name} to {value}, where picogpt needs {wanted}; "
                                 "{fix}.").format(file=path, name=name, value=repr(value),
                                                  wanted=wanted(kind), fix=fix))

        if name in config and value is not None:
            settings[name] = value
    return settings
