"""The tokenizer.json kinds after GPT-2's and BERT's: a later byte-level BPE (Qwen2's, LLaMA-3's)
and a WordLevel (the character vocabulary `python -m picogpt.train --model llama` writes), and
the parts they add, read and checked: a Split pre-tokenizer's regex, the begin token a
TemplateProcessing post-processor puts before a text, added tokens found wherever the text
holds them (which may lie past the model's vocab, as Qwen's do). tokenizer_json.py reads the
file and chooses the kind; it writes nothing.
"""

from pathlib import Path

import regex

from ..chars import WordLevel
from ..encoder import SPECIAL, bytes_to_unicode
from ..errors import PicoGPTError, _
from .vocab_files import TOKENIZER_JSON, bpe_encoder

# Seconds a downloaded Split regex may take on a text of 100,000 characters (Qwen's takes about
# 0.2 s): a pattern that backtracks without end is stopped, not waited for
REGEX_SECONDS = 2.0


def later_bpe(folder: Path, described: dict, config: dict, fix: str):
    """An Encoder of a byte-level BPE after GPT-2's: its vocab with its added tokens (which may
    lie past it, as Qwen's do), its regex, its begin token, and tokenizer_config.json's
    eos_token as the token that ends a text (else <|endoftext|>, if it has one)."""
    path = folder / TOKENIZER_JSON
    table, added = with_added(path, described, fix)
    alphabet = set(bytes_to_unicode().values())
    odd = set("".join(token for token in described["vocab"] if token not in added)) - alphabet
    if odd:  # a byte-level BPE spells every token in the 256 byte characters
        raise refused(path, _("a BPE whose tokens are not spelled in bytes (it holds {char}); "
                              "a SentencePiece tokenizer, perhaps").format(char=repr(min(odd))))
    pieces = compiled(path, described["pieces"], fix)
    end = config.get("eos_token")
    end = end.get("content") if isinstance(end, dict) else end
    end = end if end in table else SPECIAL if SPECIAL in table else None
    return bpe_encoder(table, described["merges"], None,
                       (f"{path}'s model.vocab", f"{path}'s model.merges"), fix,
                       pieces=pieces, normal=described["normal"], added=tuple(added),
                       begin=described["begin"], start=described["begin"], end=end,
                       whole=described["whole"], timeout=REGEX_SECONDS)


def wordlevel_described(folder: Path, described: dict, config: dict, fix: str) -> WordLevel:
    """A WordLevel of tokenizer.json's vocab (with its added tokens), its Split regex, its begin
    token and unk_token, and tokenizer_config.json's eos_token as the token that ends a text."""
    path = folder / TOKENIZER_JSON
    table, added = with_added(path, described, fix)
    if sorted(table.values()) != list(range(len(table))):
        raise PicoGPTError(_("{path}'s model.vocab's ids are not 0 .. {last}, each once; "
                             "{fix}.").format(path=path, last=len(table) - 1, fix=fix))
    unknown = described["unk"]
    if unknown is not None and unknown not in table:
        raise PicoGPTError(_("{path}'s model.unk_token {token} is not in its vocab; "
                             "{fix}.").format(path=path, token=repr(unknown), fix=fix))
    end = config.get("eos_token")
    end = end.get("content") if isinstance(end, dict) else end
    return WordLevel(table, unknown, pieces=compiled(path, described["pieces"], fix),
                     added=tuple(added), begin=described["begin"],
                     end=end if end in table else None, timeout=REGEX_SECONDS)


def with_added(path: Path, described: dict, fix: str) -> tuple[dict, set]:
    """The vocab with the added tokens (which may lie past it, as Qwen's do), and those."""
    table = dict(described["vocab"])
    for text, i in described["added"]:
        if table.setdefault(text, i) != i:
            raise PicoGPTError(_("{path} adds the token {text} at id {id}, but its model.vocab "
                                 "has it at id {other}; {fix}.").format(
                                     path=path, text=repr(text), id=i, other=table[text],
                                     fix=fix))
    return table, {text for text, _i in described["added"]}


def compiled(path: Path, pattern: str | None, fix: str):
    """The pre-tokenizer's regex, compiled (None: none)."""
    try:
        return None if pattern is None else regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError) as e:
        raise PicoGPTError(_("{path}'s pre-tokenizer regex does not compile ({reason}); "
                             "{fix}.").format(path=path, reason=e, fix=fix)) from None


def split_regex(path: Path, pre: dict) -> str | None:
    """The regex of a later byte-level BPE's Split pre-tokenizer (None for GPT-2's ByteLevel,
    which runs its own), after checking it is run as picogpt runs it: each match and each text
    between two matches a piece of its own ("Isolated"), not inverted."""
    if pre.get("type") not in ("Sequence", "Split"):
        return None
    split = pre["pretokenizers"][0] if pre.get("type") == "Sequence" else pre
    pattern = split.get("pattern")
    pattern = (pattern.get("Regex") if "Regex" in pattern else regex.escape(pattern.get("String"))
               if isinstance(pattern.get("String"), str) else None) \
        if isinstance(pattern, dict) else None
    for name, value, runs in (("pre_tokenizer Split's behavior", split.get("behavior"),
                               ("Isolated",)),
                              ("pre_tokenizer Split's invert", split.get("invert", False),
                               (False,))):
        if value not in runs:
            raise refused(path, _("a byte-level BPE with {name} = {value}").format(
                name=name, value=repr(value)))
    if not isinstance(pattern, str):
        raise refused(path, _("a Split pre-tokenizer without a regex or string pattern"))
    return pattern


def begin_token(path: Path, data: dict) -> str | None:
    """The token the post-processor puts before a text (LLaMA-3's <|begin_of_text|>), or None;
    a TemplateProcessing that adds anything else is refused."""
    post = data.get("post_processor")
    steps = post.get("processors") if isinstance(post, dict) and post.get("type") == "Sequence" \
        else [post]
    template = next((step for step in steps or [] if isinstance(step, dict)
                     and step.get("type") == "TemplateProcessing"), None)
    if template is None:
        return None
    single, specials = template.get("single"), template.get("special_tokens")
    names = [item.get("SpecialToken", {}).get("id") if isinstance(item, dict) else None
             for item in single] if isinstance(single, list) else [None]
    given = [item.get("Sequence", {}).get("id") for item in single[1:]
             if isinstance(item, dict)] if names and single else []
    if not (len(names) in (1, 2) and names[-1] is None and given == ["A"] * (len(names) - 1)
            and (len(names) == 1 or isinstance(specials, dict) and isinstance(
                specials.get(names[0]), dict) and len(specials[names[0]].get("ids", [])) == 1)):
        raise refused(path, _("a post_processor that adds tokens other than one before the "
                              "text"))
    return names[0] if len(names) == 2 else None


def plain(path: Path, added: list) -> None:
    """Each added token must be found as itself wherever the text holds it: none that also
    eats the spaces beside it or must stand as a word of its own."""
    for token in added:
        flags = [name for name in ("lstrip", "rstrip", "single_word") if token.get(name)]
        if flags:
            raise refused(path, _("an added token {text} with {flag} set").format(
                text=repr(token["content"]), flag=flags[0]))


def refused(path: Path, what: str) -> PicoGPTError:
    """The one line that refuses a tokenizer picogpt would run differently than its file says."""
    return PicoGPTError(_("{path} describes {what}, which picogpt cannot run: it runs byte-level "
                          "BPE tokenizers as GPT-2's, Qwen's and LLaMA-3's, WordPiece "
                          "tokenizers as BERT's, and WordLevel tokenizers as picogpt.train "
                          "writes, with their own settings only.").format(path=path, what=what))
