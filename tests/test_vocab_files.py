"""read_wordpiece: a WordPiece vocabulary and its settings from a model folder, and its errors."""

import json

import pytest

from picogpt import PicoGPTError
from picogpt.files.folder_vocab import read_vocab
from picogpt.files.vocab_files import read_wordpiece
from scripts.fixtures.bert_vocab import small_vocab, write

FIX = "download the model again"


def one_line_error(folder, naming: str) -> str:
    """The error read_wordpiece raises for folder: one line, naming a file and the fix."""
    with pytest.raises(PicoGPTError) as caught:
        read_wordpiece(folder, FIX)
    message = str(caught.value)
    assert "\n" not in message and naming in message and FIX in message, message
    return message


def test_the_settings_of_a_folder_saved_by_transformers(tmp_path):
    from transformers import BertTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    settings = {"do_lower_case": False, "strip_accents": True, "never_split": ["Café"]}
    BertTokenizerLegacy(str(write(tmp_path / "v", small_vocab())), **settings).save_pretrained(
        tmp_path / "saved")
    ours = read_vocab(tmp_path / "saved", FIX)
    reference = BertTokenizer(str(tmp_path / "v" / "vocab.txt"), do_lower_case=False,
                              strip_accents=True)
    text = "Hello World, Éclair 你好！[SEP]"
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False)
    assert ours.encode("Café") == [ours.unknown]  # never_split: looked up whole
    assert (ours.start, ours.end, ours.unknown) == (3, 4, 2)


def test_defaults_are_bert_tokenizers_and_special_tokens_map_names_the_tokens(tmp_path):
    tokens = small_vocab()
    write(tmp_path, [*tokens, "<s>", "</s>", "<unk>"])
    ours = read_wordpiece(tmp_path, FIX)
    assert (ours.lower, ours.strip, ours.chinese, ours.start) == (True, True, True, 3)
    # where the two files disagree, special_tokens_map.json wins, as in from_pretrained
    (tmp_path / "tokenizer_config.json").write_text('{"cls_token": "[CLS]"}')
    (tmp_path / "special_tokens_map.json").write_text(json.dumps(
        {"cls_token": "<s>", "sep_token": {"content": "</s>", "lstrip": False},
         "unk_token": "<unk>"}))
    ours = read_wordpiece(tmp_path, FIX)
    assert (ours.start, ours.end, ours.unknown) == (len(tokens), len(tokens) + 1,
                                                   len(tokens) + 2)
    assert ours.encode("你<s>好</s>") == [ours.ids["你"], len(tokens), ours.ids["好"],
                                         len(tokens) + 1]


def test_lines_end_with_newlines_of_either_kind(tmp_path):
    (tmp_path / "vocab.txt").write_bytes(b"[PAD]\r\n[UNK]\r\n[CLS]\r\na\r\n##b\n")
    ours = read_wordpiece(tmp_path, FIX)
    assert (ours.tokens, ours.encode("ab")) == (["[PAD]", "[UNK]", "[CLS]", "a", "##b"], [3, 4])


def test_bad_files_are_one_line_naming_the_file_and_the_fix(tmp_path):
    one_line_error(tmp_path, "vocab.txt")  # missing
    (tmp_path / "vocab.txt").write_bytes(b"[CLS]\n\xff\xfe\n")
    assert "not UTF-8" in one_line_error(tmp_path, "vocab.txt")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    assert "[CLS]" in one_line_error(tmp_path, "vocab.txt")
    write(tmp_path, small_vocab())
    config = tmp_path / "tokenizer_config.json"
    for text, said in [("{not json", "not a JSON object"), ("[1, 2]", "not a JSON object"),
                       ('{"do_lower_case": "no"}', "do_lower_case"),
                       ('{"strip_accents": 1}', "strip_accents"),
                       ('{"never_split": ["a", 3]}', "never_split"),
                       ('{"cls_token": 5}', "cls_token"),
                       ('{"do_basic_tokenize": false}', "do_basic_tokenize")]:
        config.write_text(text)
        assert said in one_line_error(tmp_path, "tokenizer_config.json"), text
    config.write_text('{"do_lower_case": false, "strip_accents": null, "never_split": null}')
    assert read_wordpiece(tmp_path, FIX).lower is False
    (tmp_path / "special_tokens_map.json").write_text('{"unk_token": ["[UNK]"]}')
    one_line_error(tmp_path, "special_tokens_map.json")


def test_a_character_vocabulary_nested_too_deeply_is_one_line(tmp_path):
    """chars.json of 100,000 '[': deeper than Python's JSON reader goes, so unreadable."""
    (tmp_path / "chars.json").write_text("[" * 100_000)
    with pytest.raises(PicoGPTError, match="chars.json is not a character vocabulary"):
        read_vocab(tmp_path, FIX)
