"""A tokenizer.json, read as one of the kinds of vocabulary picogpt runs.

transformers 5 saves every tokenizer, GPT-2's and BERT's alike, as tokenizer.json (the tokenizers
library's file: a model, a normalizer, a pre-tokenizer, a post-processor, a decoder and added
tokens) and tokenizer_config.json. A byte-level BPE (model "BPE" with its vocab and merges, a
ByteLevel decoder) becomes encoder.py's Encoder: GPT-2's (the ByteLevel pre-tokenizer with its
own regex) here, a later one's (Qwen's, LLaMA-3's) in later_tokenizers.py, as is a WordLevel
(chars.py's WordLevel). A WordPiece (model "WordPiece" with its vocab, BertNormalizer,
BertPreTokenizer) becomes wordpiece.py's WordPiece, with the normalizer's settings (lowercase ->
do_lower_case, handle_chinese_chars -> tokenize_chinese_chars, strip_accents) and the model's
unk_token. The file is JSON, so the tokenizers library is not needed.

Anything those classes would run differently (a Unigram model, SentencePiece's byte fallback, a
normalizer or pre-tokenizer they lack, a setting they do not have, a token added to GPT-2's by a
fine-tune) is refused in one line that names it, and so is a tokenizer_config.json that states
a setting otherwise. The vocabulary is built with vocab_files.py's checks; vocab_files.py
compares it with the older files of the folder. Nothing is written.
"""

from pathlib import Path

from ..encoder import N_MERGES, N_VOCAB, SPECIAL
from ..errors import PicoGPTError, _
from ..wordpiece import WordPiece
from .later_tokenizers import (
    begin_token,
    later_bpe,
    plain,
    refused,
    split_regex,
    wordlevel_described,
)
from .store import read_json
from .vocab_files import TOKENIZER_JSON, WORDPIECE_FILES, bpe_encoder, folder_settings

SPLIT = "Sequence [Split, ByteLevel]"  # a later byte-level BPE's pre-tokenizer (Qwen, LLaMA-3)
BPE_PARTS = {"normalizer": (None, "NFC"), "pre_tokenizer": ("ByteLevel", SPLIT),
             "decoder": ("ByteLevel",),
             "post_processor": (None, "ByteLevel", "TemplateProcessing",
                                "Sequence [ByteLevel, TemplateProcessing]")}
WORDLEVEL_PARTS = {"normalizer": (None,), "pre_tokenizer": (None, "Split"), "decoder": ("Fuse",),
                   "post_processor": (None, "TemplateProcessing")}
WORDPIECE_PARTS = {"normalizer": ("BertNormalizer",), "pre_tokenizer": ("BertPreTokenizer",),
                   "decoder": ("WordPiece", None)}
CONTINUES, MAX_WORD = "##", 100  # what wordpiece.py's WordPiece runs, as BERT's
# BertTokenizer's defaults: transformers 5 runs them over tokenizer.json's when its
# tokenizer_config.json names that class and leaves a setting out
BERT_CLASSES = ("BertTokenizer", "BertTokenizerFast")
BERT_DEFAULTS = {"do_lower_case": True, "tokenize_chinese_chars": True, "strip_accents": None,
                 "unk_token": "[UNK]"}


def read_described(folder: Path, fix: str, gpt2: bool):
    """The vocabulary tokenizer.json describes, checked against tokenizer_config.json (and
    special_tokens_map.json) beside it: where both state a setting, they must agree."""
    path = folder / TOKENIZER_JSON
    described = read_tokenizer_json(path, fix)
    config = read_json(folder / WORDPIECE_FILES[1]) if (folder / WORDPIECE_FILES[1]).is_file() \
        else {}
    if not isinstance(config, dict):
        raise PicoGPTError(_("{file} is not a JSON object of tokenizer settings; {fix}.").format(
            file=folder / WORDPIECE_FILES[1], fix=fix))
    if described["kind"] == "bpe":
        return bpe_described(folder, described, config, gpt2, fix)
    if gpt2:
        raise PicoGPTError(_("{path} holds a WordPiece vocabulary, not GPT-2's encoder.json and "
                             "vocab.bpe; {fix}.").format(path=path, fix=fix))
    if described["kind"] == "wordlevel":
        return wordlevel_described(folder, described, config, fix)
    return wordpiece_described(folder, described, config, fix)


def bpe_described(folder: Path, described: dict, config: dict, gpt2: bool, fix: str):
    """An Encoder of tokenizer.json's byte-level BPE; tokenizer_config.json may name no other
    start or end token than <|endoftext|>, nor add a space before a text."""
    path = folder / TOKENIZER_JSON
    if described["pieces"] is not None:
        return later_bpe(folder, described, config, fix)
    stated = {name: config.get(name) for name in ("bos_token", "eos_token", "add_prefix_space")}
    for name, value in stated.items():
        value = value.get("content") if isinstance(value, dict) else value
        if value not in (None, False, SPECIAL):
            raise PicoGPTError(_("{file} sets {name} to {value}; picogpt's byte-level BPE adds "
                                 "no space before a text and begins and ends one with {end}. "
                                 "{fix}.").format(file=folder / WORDPIECE_FILES[1], name=name,
                                                  value=repr(value), end=SPECIAL,
                                                  fix=fix[0].upper() + fix[1:]))
    check_added(path, described["added"], described["vocab"], {SPECIAL}, fix)
    return bpe_encoder(described["vocab"], described["merges"],
                       (N_VOCAB, N_MERGES) if gpt2 else None,
                       (f"{path}'s model.vocab", f"{path}'s model.merges"), fix,
                       normal=described["normal"])


def wordpiece_described(folder: Path, described: dict, config: dict, fix: str):
    """A WordPiece of tokenizer.json's vocab and normalizer, with the special tokens of
    tokenizer_config.json and special_tokens_map.json, which must state its settings alike."""
    path, vocab = folder / TOKENIZER_JSON, described["vocab"]
    given = folder_settings(folder, fix)
    bert = config.get("tokenizer_class") in BERT_CLASSES
    keys = {"do_lower_case": "normalizer.lowercase", "unk_token": "model.unk_token",
            "tokenize_chinese_chars": "normalizer.handle_chinese_chars",
            "strip_accents": "normalizer.strip_accents"}
    for name, value in described["settings"].items():
        if given.get(name, BERT_DEFAULTS[name] if bert else value) != value:
            raise PicoGPTError(_("{config} sets {name} to {stated}, but {path} sets {key} to "
                                 "{value}: the two files disagree; {fix}.").format(
                config=folder / WORDPIECE_FILES[1], name=name,
                stated=repr(given.get(name, BERT_DEFAULTS[name])), path=path, key=keys[name],
                value=repr(value), fix=fix))
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise PicoGPTError(_("{path}'s model.vocab's ids are not 0 .. {last}, each once; "
                             "{fix}.").format(path=path, last=len(vocab) - 1, fix=fix))

    settings = {**given, **described["settings"]}
    specials = {settings.get(f"{name}_token", default) for name, default in (
        ("cls", "[CLS]"), ("sep", "[SEP]"), ("unk", "[UNK]"), ("pad", "[PAD]"),
        ("mask", "[MASK]"))}
    check_added(path, described["added"], vocab, specials, fix)
    try:
        return WordPiece(sorted(vocab, key=vocab.get), **settings)
    except PicoGPTError as e:
        raise PicoGPTError(f"{path}: {e}; {fix}.") from None


def check_added(path: Path, added: list, vocab: dict, specials: set, fix: str) -> None:
    """Each added token of a tokenizer.json must be one of the vocabulary's special tokens, at
    its id in the vocabulary: picogpt's classes know no others."""
    for text, i in added:
        if text not in specials or vocab.get(text) != i:
            raise PicoGPTError(_("{path} adds the token {text} (id {id}), which is not one of "
                                 "the vocabulary's special tokens ({specials}) at its id; "
                                 "picogpt's tokenizers know no other added tokens. {fix}.").format(
                path=path, text=repr(text), id=i, specials=", ".join(sorted(specials)),
                fix=fix[0].upper() + fix[1:]))


def read_tokenizer_json(path: Path, fix: str) -> dict:
    """tokenizer.json as {"kind": "bpe", "vocab": {token: id}, "merges": [(a, b), ...]} or
    {"kind": "wordpiece", "vocab": {token: id}, "settings": {...}}, with "added": each added
    token's text and id. A kind picogpt cannot run is refused by name."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise PicoGPTError(_("{path} is not a tokenizers file (a JSON object with a \"model\"); "
                             "{fix}.").format(path=path, fix=fix))
    model, kind = data["model"], data["model"].get("type")
    if kind == "BPE" and model.get("byte_fallback"):  # SentencePiece's BPE, converted
        raise refused(path, _("a SentencePiece BPE with byte fallback (as Llama-2's and "
                              "TinyLlama's)"))
    if kind not in ("BPE", "WordPiece", "WordLevel"):
        raise refused(path, _("a {kind} model").format(kind=kind))
    parts = {"BPE": BPE_PARTS, "WordLevel": WORDLEVEL_PARTS, "WordPiece": WORDPIECE_PARTS}
    for part, kinds in parts[kind].items():
        if named(data.get(part)) not in kinds:
            raise refused(path, _("a {part} of type {kind}, with a {model} model").format(
                part=part, kind=named(data.get(part)), model=kind))
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise PicoGPTError(_("{path}'s model has no vocab of token -> id; {fix}.").format(
            path=path, fix=fix))
    added = added_tokens(path, data.get("added_tokens"), fix)
    if kind == "WordLevel":
        plain(path, data.get("added_tokens") or [])
        unknown = model.get("unk_token")
        return {"kind": "wordlevel", "vocab": vocab, "added": added,
                "pieces": split_regex(path, data.get("pre_tokenizer") or {}),
                "begin": begin_token(path, data),
                "unk": unknown if isinstance(unknown, str) else None}
    if kind == "BPE":
        pieces, begin = split_regex(path, data["pre_tokenizer"]), begin_token(path, data)
        if pieces is None and begin is not None:
            raise refused(path, _("GPT-2's byte-level BPE with a begin token {token} added by "
                                  "its post_processor").format(token=repr(begin)))
        if pieces is not None:
            plain(path, data.get("added_tokens") or [])
        return {"kind": "bpe", "vocab": vocab, "merges": bpe_merges(path, data, fix),
                "added": added, "pieces": pieces, "begin": begin,
                "normal": named(data.get("normalizer")),
                "whole": data["model"].get("ignore_merges", False) is True}
    return {"kind": "wordpiece", "vocab": vocab, "settings": described_settings(path, data),
            "added": added}


def added_tokens(path: Path, listed, fix: str) -> list[tuple[str, int]]:
    """Each added token's text and id, from tokenizer.json's added_tokens: a list of objects
    with a "content" that is a string and an "id" that is a whole number (or none at all)."""
    tokens = listed if isinstance(listed, list) else [None] if listed is not None else []
    if not all(isinstance(token, dict) and isinstance(token.get("content"), str)
               and isinstance(token.get("id"), int) and not isinstance(token["id"], bool)
               for token in tokens):
        raise PicoGPTError(_("{path}'s added_tokens is not a list of tokens (objects with a "
                             "string \"content\" and a whole-number \"id\"); {fix}.").format(
                                 path=path, fix=fix))
    return [(token["content"], token["id"]) for token in tokens]


def named(part) -> str | None:
    """The type of a normalizer, pre-tokenizer or decoder (None if there is none); a Sequence
    is named with the types it holds, as in "Sequence [Strip, ByteLevel]", one level deep (a
    Sequence nested 450 deep would otherwise pass Python's recursion limit)."""
    if not isinstance(part, dict):
        return None
    inside = (part.get("normalizers") or part.get("pretokenizers") or part.get("decoders")
              or part.get("processors"))
    if part.get("type") == "Sequence" and isinstance(inside, list):
        return "Sequence [{}]".format(", ".join(
            str(step.get("type") if isinstance(step, dict) else None) for step in inside))
    return str(part.get("type"))


def bpe_merges(path: Path, data: dict, fix: str) -> list[tuple[str, str]]:
    """The merge list of a byte-level BPE, after checking the settings picogpt's Encoder runs:
    GPT-2's pre-tokenizer regex, no space added before a text, no dropout, no subword marks."""
    model, pre = data["model"], data["pre_tokenizer"]
    later = pre.get("type") == "Sequence"  # [Split, ByteLevel]: the ByteLevel runs no regex
    pre = pre["pretokenizers"][1] if later else pre
    unlike = [("pre_tokenizer.add_prefix_space", pre.get("add_prefix_space"), (False, None)),
              ("pre_tokenizer.use_regex", pre.get("use_regex", True), (not later,)),
              ("model.dropout", model.get("dropout"), (None, 0, 0.0)),
              ("model.byte_fallback", model.get("byte_fallback", False), (False,)),
              ("model.continuing_subword_prefix", model.get("continuing_subword_prefix"),
               (None, "")),
              ("model.end_of_word_suffix", model.get("end_of_word_suffix"), (None, "")),
              ("model.ignore_merges", model.get("ignore_merges", False),
               (False, True) if later else (False,))]
    for name, value, runs in unlike:
        if value not in runs:
            raise refused(path, _("a byte-level BPE with {name} = {value}").format(
                name=name, value=repr(value)))
    merges, listed = [], model.get("merges")
    for merge in listed if isinstance(listed, list) else [None]:
        # tokenizers writes a merge as ["a", "b"] since version 0.20, as "a b" before it
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if not (isinstance(pair, list) and len(pair) == 2 and all(
                isinstance(half, str) for half in pair)):
            raise PicoGPTError(_("{path}'s model.merges is not a list of pairs of tokens; "
                                 "{fix}.").format(path=path, fix=fix))
        merges.append(tuple(pair))
    return merges


def described_settings(path: Path, data: dict) -> dict:
    """What WordPiece takes from a BERT tokenizer.json, after checking the settings it runs:
    BERT's text cleaning, "##" before a piece inside a word, words of at most 100 characters."""
    model, normalizer = data["model"], data["normalizer"]
    unlike = [("normalizer.clean_text", normalizer.get("clean_text", True), (True,)),
              ("model.continuing_subword_prefix", model.get("continuing_subword_prefix",
                                                            CONTINUES), (CONTINUES,)),
              ("model.max_input_chars_per_word", model.get("max_input_chars_per_word",
                                                           MAX_WORD), (MAX_WORD,))]
    decoder = data.get("decoder")
    if isinstance(decoder, dict):
        unlike.append(("decoder.prefix", decoder.get("prefix", CONTINUES), (CONTINUES,)))
    for name, value, runs in unlike:
        if value not in runs:
            raise refused(path, _("a WordPiece with {name} = {value}").format(
                name=name, value=repr(value)))
    settings = {"do_lower_case": normalizer.get("lowercase", True),
                "tokenize_chinese_chars": normalizer.get("handle_chinese_chars", True),
                "strip_accents": normalizer.get("strip_accents"),
                "unk_token": model.get("unk_token", "[UNK]")}
    for name, value in settings.items():
        wanted = str if name == "unk_token" else bool
        if not (isinstance(value, wanted) or name == "strip_accents" and value is None):
            raise refused(path, _("a WordPiece with {name} = {value}").format(
                name=name, value=repr(value)))
    return settings
