"""Which vocabulary a model folder holds: the files before tokenizer.json (vocab_files.py) or
tokenizer.json (tokenizer_json.py, which transformers 5 saves for either kind), and, when a
folder holds both, that they are one vocabulary. Every loader reads a folder's vocabulary
through `read_vocab`. It reads and checks, and writes nothing.
"""

from pathlib import Path

from ..chars import WordLevel
from ..encoder import Encoder
from ..errors import PicoGPTError, _
from ..wordpiece import WordPiece
from .tokenizer_json import read_described
from .vocab_files import BPE_FILES, TOKENIZER_JSON, WORDPIECE_FILES, read_files


def read_vocab(folder: Path, fix: str, gpt2: bool = False):
    """The vocabulary of a model folder (an Encoder or a WordPiece), chosen by its files; with
    gpt2, it must be GPT-2's own 50,257 tokens and 50,000 merges. fix says what to do about a
    bad file."""
    if not (folder / TOKENIZER_JSON).is_file():
        return read_files(folder, fix, gpt2)
    described = read_described(folder, fix, gpt2)
    older = [name for pair in BPE_FILES for name in pair] + [WORDPIECE_FILES[0]]
    if any((folder / name).is_file() for name in older):
        same_vocabulary(read_files(folder, fix, gpt2), described, folder, fix)
    return described


def same_vocabulary(older, described, folder: Path, fix: str) -> None:
    """older (from vocab.json and merges.txt, or vocab.txt ...) and described (tokenizer.json's)
    must be one vocabulary; else one line naming the first difference."""
    files = " + ".join(name for name in [*[n for pair in BPE_FILES for n in pair],
                                         WORDPIECE_FILES[0]] if (folder / name).is_file())
    kinds = {Encoder: "byte-level BPE", WordPiece: "WordPiece", WordLevel: "WordLevel"}
    if type(older) is not type(described):
        what = _("the kind of vocabulary ({a} in tokenizer.json, {b} in {files})").format(
            a=kinds[type(described)], b=kinds[type(older)], files=files)
    elif isinstance(older, Encoder):
        what = first_difference(described.encoder, older.encoder, "token", files) or \
            first_difference(dict(enumerate(sorted(described.ranks, key=described.ranks.get))),
                             dict(enumerate(sorted(older.ranks, key=older.ranks.get))),
                             "merge", files)
    else:
        what = first_difference(described.ids, older.ids, "token", files) or next((
            _("{name} ({a} in tokenizer.json, {b} in {files})").format(
                name=name, a=getattr(described, name), b=getattr(older, name), files=files)
            for name in ("lower", "strip", "chinese", "start", "end", "unknown", "n_vocab")
            if getattr(described, name) != getattr(older, name)), None)
    if what:
        raise PicoGPTError(_("{folder} holds tokenizer.json and {files}, which disagree on "
                             "{what}; {fix}.").format(folder=folder, files=files, what=what,
                                                      fix=fix))


def first_difference(described: dict, older: dict, name: str, files: str) -> str | None:
    """The first key whose value differs between the two (tokenizer.json's first), said."""
    for key in [*described, *(key for key in older if key not in described)]:
        if described.get(key) != older.get(key):
            return _("{name} {key} ({a} in tokenizer.json, {b} in {files})").format(
                name=name, key=repr(key), a=described.get(key), b=older.get(key), files=files)
    return None
