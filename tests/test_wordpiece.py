"""WordPiece against transformers' BERT tokenizers, on a vocab.txt built like bert-base-chinese's.

The references: `BertTokenizer` and `BertTokenizerFast` (in transformers 5 one class, run by
the tokenizers library) and `BertTokenizerLegacy`, transformers' Python BERT tokenizer. picogpt
follows BertTokenizer wherever the two disagree (tests below name each place), and the legacy
one for never_split, which only it honours. The genuine bert-base-chinese vocab.txt is tested
only when its path is given: PICOGPT_BERT_CHINESE_VOCAB=/path/to/vocab.txt, with -m genuine.
"""

import functools
import os
import random
from pathlib import Path

import pytest

from picogpt import PicoGPTError, WordPiece
from scripts.fixtures.bert_vocab import chinese_vocab, small_vocab, write

CORPUS = {
    "Chinese, full-width punctuation": "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
    "Chinese, half-width punctuation": "我们学习语言模型,你好!世界?(中文)[模型]",
    "Chinese quotes and marks": "他说：“你好！”《语言模型》、……——「世界」",
    "English, capitals": "Hello World, THE Learning Model is NEW. Python and NumPy.",
    "English, accents": "Café naïve résumé Ångström façade Ñandú Straße ÉCOLE",
    "English, decomposed accents": "Cafe\u0301 nai\u0308ve",
    "digits": "2020年3月14日 3.14159 1,000,000 ０１２３ 12:30 ٣",
    "emoji": "你好😀👍🏽 hi👨\u200d👩\u200d👧 🇺🇳 ❤️",
    "other scripts": "한국어 Русский Ελληνικά עברית 日本語のテキスト 㐀𠀀龍",
    "Greek capitals": "ΑΣ ΟΔΟΣ Σ σας",
    "whitespace": "a\tb\nc\r\nd  e\u3000中\xa0文\u2028x\u2029y",
    "control characters": "a\x00b c\x01d e\x7ff g\u200bh i\ufffdj k\u200dl m\ue000n o\u0378p",
    "long words": "x" * 100 + " " + "y" * 101 + " " + "中" * 150 + " " + "ab" * 60,
    "special tokens typed": "[CLS]床前[SEP]明月 [UNK] [MASK][PAD] [cls] [unused1] <S> a[SEP]b",
    "empty": "",
    "spaces only": "  \t\n ",
}
SETTINGS = [{}, {"do_lower_case": False}, {"strip_accents": False},
            {"do_lower_case": False, "strip_accents": True}, {"tokenize_chinese_chars": False}]
# where the Python tokenizer disagrees with BertTokenizer, and why: it composes accents (NFC)
# before looking them up, lower-cases a final Σ as ς, and drops unassigned code points
LEGACY_DIFFERS = {"English, decomposed accents", "Greek capitals", "control characters"}


@functools.cache
def vocab_file() -> Path:
    """The 21,128-token vocab.txt, written once in a temporary folder."""
    import tempfile

    return write(Path(tempfile.mkdtemp(prefix="bert_vocab")), chinese_vocab())


@functools.cache
def references(settings: tuple) -> tuple:
    """BertTokenizer, BertTokenizerFast and BertTokenizerLegacy with these settings."""
    from transformers import BertTokenizer, BertTokenizerFast
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    return tuple(cls(str(vocab_file()), **dict(settings))
                 for cls in (BertTokenizer, BertTokenizerFast, BertTokenizerLegacy))


@functools.cache
def wordpiece(settings: tuple = ()) -> WordPiece:
    return WordPiece(chinese_vocab(), **dict(settings))


def reference_ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
def test_same_ids_as_bert_tokenizer_and_bert_tokenizer_fast(settings):
    fast, also_fast, legacy = references(tuple(settings.items()))
    ours = wordpiece(tuple(settings.items()))
    for name, text in CORPUS.items():
        ids = ours.encode(text)
        assert ids == reference_ids(fast, text) == reference_ids(also_fast, text), name
        if name not in LEGACY_DIFFERS:
            assert ids == reference_ids(legacy, text), name


def test_same_ids_as_bert_tokenizer_on_the_bpe_encoders_corpus():
    # 114,000 characters in a dozen scripts, with emoji, combining marks, odd spaces and code
    with open(Path(__file__).parent / "data" / "corpus.txt", encoding="utf-8", newline="") as f:
        text = f.read()
    for settings in [(), (("do_lower_case", False),)]:
        assert wordpiece(settings).encode(text) == reference_ids(references(settings)[0], text)


def test_where_the_python_tokenizer_differs_it_differs_from_bert_tokenizer_too():
    for name in LEGACY_DIFFERS:
        assert any(reference_ids(legacy, CORPUS[name]) != reference_ids(fast, CORPUS[name])
                   for fast, _, legacy in (references(tuple(x.items())) for x in SETTINGS)), name


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
def test_same_ids_as_bert_tokenizer_on_random_text(settings):
    fast = references(tuple(settings.items()))[0]
    ours = wordpiece(tuple(settings.items()))
    pool = [*"中文床前明月光，。！？、“”（）《》…—abcABCéÉüÑçßΣσςİǅﬁ0123456789,.!?;:'\"()-/$^`",
            "😀", "👍🏽", "\u200d", "\t", "\n", "\r\n", "\u3000", "\xa0", "\x00", "\x7f", "\u200b",
            "\ufffd", "\u2028", "\ue000", "\u0378", "e\u0301", "[CLS]", "[SEP]", "[UNK]", "[PAD]",
            "[unused1]", "<S>", "㐀", "𠀀", "龍", "가", "x" * 101, "the", "Learning", "  "]
    rng = random.Random(33)
    for _ in range(1500):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 12)))
        assert ours.encode(text) == reference_ids(fast, text), repr(text)


def test_never_split_words_stay_whole_and_as_typed():
    settings = (("never_split", ("The", "[unused1]", "Café")),)
    legacy = references(settings)[2]
    ours = wordpiece(settings)
    text = "The the THE [unused1] x[unused1] Café café"  # Café: not a token, so [UNK]
    ids = ours.encode(text)
    assert ids == reference_ids(legacy, text)
    tokens = chinese_vocab()
    assert [tokens[i] for i in ids[:4]] == ["The", "the", "the", "[unused1]"]
    assert ids[-2:] == [ours.unknown, ours.ids["cafe"]]


def test_a_word_over_100_characters_is_unknown_whole():
    ours = wordpiece()
    assert ours.encode("a" * 100) == [ours.ids["a"]] + [ours.ids["##a"]] * 99
    assert ours.encode("a" * 101) == [ours.unknown]
    assert ours.outside("a" * 101 + " b") == ["a" * 101]


def test_special_tokens():
    ours = wordpiece()
    tokens = chinese_vocab()
    assert (ours.n_vocab, ours.start, ours.end, ours.unknown) == (21128, tokens.index("[CLS]"),
                                                                   tokens.index("[SEP]"),
                                                                   tokens.index("[UNK]"))
    assert ours.prompt_ids("") == [ours.start]
    assert ours.prompt_ids("中文") == [ours.start, ours.ids["中"], ours.ids["文"]]
    assert ours.encode("中[SEP]") == [ours.ids["中"], ours.end]


def test_a_token_on_two_lines_has_the_later_id(tmp_path):
    from transformers import BertTokenizer

    tokens = [*small_vocab(), "中", "##s"]
    reference = BertTokenizer(str(write(tmp_path, tokens)))
    ours = WordPiece(tokens)
    assert ours.encode("中 learns") == reference_ids(reference, "中 learns")
    assert ours.encode("中") == [len(tokens) - 2]


def test_a_special_token_that_holds_another_is_found_whole(tmp_path):
    from transformers import BertTokenizer

    tokens = [*small_vocab(), "<s>", "<s>>"]
    settings = {"cls_token": "<s>", "sep_token": "<s>>"}
    reference = BertTokenizer(str(write(tmp_path, tokens)), **settings)
    ours = WordPiece(tokens, **settings)
    for text in ["a<s>>b", "<s><s>>", "x <s> y"]:
        assert ours.encode(text) == reference_ids(reference, text), text
    assert ours.encode("<s>>") == [ours.end]


def test_outside_names_each_unknown_word_once():
    ours = wordpiece()
    text = "我们😀吃了龍，HI😀 龍 𠀀 hello"
    assert ours.outside(text) == ["😀", "龍", "hi😀", "𠀀"]
    assert ours.encode(text).count(ours.unknown) == 5
    assert ours.outside("床前明月光 Hello, world!") == []


def test_without_an_unknown_token_an_unknown_word_is_an_error_naming_it():
    toy = WordPiece([f"t{i}" for i in range(63)] + ["[CLS]"], do_lower_case=False)
    assert (toy.start, toy.end, toy.unknown) == (63, None, None)
    assert toy.encode("t5 t17 t3 t5") == [5, 17, 3, 5]
    assert toy.decode([5, 17, 3]) == "t5 t17 t3"
    assert toy.outside("t5 t99 x") == ["t99", "x"]
    with pytest.raises(PicoGPTError, match="'t99'"):
        toy.encode("t5 t99")


def test_decode_writes_text_as_a_reader_does():
    small = WordPiece(small_vocab(), do_lower_case=False)
    ids = small.ids

    def decode(*tokens):
        return small.decode([ids[token] for token in tokens])

    # no space between Chinese characters, nor around full-width punctuation
    assert decode(*"床前明月光，疑是地上霜。") == "床前明月光，疑是地上霜。"
    assert decode(*"他说：“你好！”") == "他说：“你好！”"
    # English words spaced; "##" pieces joined to the word before
    assert decode("learn", "##ing", "model", "##s") == "learning models"
    assert decode("t", "##h", "##e", "day", ",", "the", "year", ".") == "the day, the year."
    # marks written against a neighbour: ( ) after and before, ' - / between
    assert decode("the", "(", "model", ")", "!") == "the (model)!"
    assert decode("d", "##o", "##n", "'", "t", "state", "-", "of") == "don't state-of"
    assert decode("3", ".", "1", "##4", "1", ",", "0", "##0", "##0") == "3.14 1,000"
    # Chinese beside English or digits, and the start token before text
    assert decode("2", "##0", "年", "我", "们", "hello", "世", "界") == "20年我们hello世界"
    assert decode("[CLS]", "中", "文", "[SEP]") == "[CLS]中文[SEP]"
    assert decode("[CLS]", "hello", "[UNK]", "world") == "[CLS] hello [UNK] world"


def test_decode_of_more_ids_only_adds_text():
    ours = wordpiece()
    rng = random.Random(34)
    chinese = [i for token, i in ours.ids.items() if len(token) == 1]
    for _ in range(400):
        ids = [rng.choice(chinese) if rng.random() < 0.5 else rng.randrange(ours.n_vocab)
               for _ in range(rng.randint(0, 25))]
        texts = [ours.decode(ids[:n]) for n in range(len(ids) + 1)]
        for shorter, longer in zip(texts, texts[1:]):
            assert longer.startswith(shorter), (ids, shorter, longer)
        assert ours.decode_bytes(ids) == texts[-1].encode("utf-8")
    with pytest.raises(ValueError, match="21128"):
        ours.decode([21128])


def test_streamed_text_is_the_decoded_text_and_stops_at_stop():
    from picogpt.cli.terminal import stream_text

    ours = wordpiece((("do_lower_case", False),))
    ids = ours.encode("床前明月光， Hello world. the learning model 3.14")
    pieces = list(stream_text(ids, ours))
    assert "".join(pieces) == ours.decode(ids) == "床前明月光，Hello world. the learning model 3.14"
    assert pieces[:3] == ["床", "前", "明"]
    assert "".join(stream_text(ids, ours, stop="world.")) == "床前明月光，Hello "


def test_a_chinese_token_shows_as_its_character_not_bytes():
    from picogpt.show import characters, piece, shown

    ours = wordpiece()
    token = ours.ids["语"]
    assert piece(ours, token) == {"id": token, "text": "语"}
    assert shown(ours, ours.ids["##ing"]) == "ing"
    assert characters([ours.decode_bytes([i]) for i in ours.encode("语言模型")]) == []


@pytest.mark.genuine
def test_the_genuine_bert_base_chinese_vocab():
    from transformers import BertTokenizer

    path = Path(os.environ.get("PICOGPT_BERT_CHINESE_VOCAB", ""))
    if not path.is_file():
        pytest.fail("set PICOGPT_BERT_CHINESE_VOCAB to bert-base-chinese's vocab.txt (21,128 "
                    "lines; it is in every uer/gpt2-chinese-* model on the hub)")
    tokens = path.read_text(encoding="utf-8").split("\n")[:-1]
    ours = WordPiece(tokens)
    assert (ours.n_vocab, ours.start, ours.end, ours.unknown) == (21128, 101, 102, 100)
    for settings in SETTINGS:
        reference = BertTokenizer(str(path), **settings)
        ours = WordPiece(tokens, **settings)
        for name, text in CORPUS.items():
            assert ours.encode(text) == reference_ids(reference, text), (settings, name)
