"""The character vocabulary (chars.py): which characters are tokens, ids against a count made
in the test, round trips of any text it covers (English, Chinese, spaces, line breaks), and the
model folder's chars.json read back by files/vocab_files.py as every picogpt mode reads it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from picogpt.chars import START, UNKNOWN, Chars, count_chars
from picogpt.errors import PicoGPTError
from picogpt.files.folder_vocab import read_vocab

TEXT = ("床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n\n"
        "It was the best of times,  it was the worst of times.\n\tTabs,\tand  spaces \r\n\r"
        "床前 moon 光 🌙🌙 é é\n")


def test_each_character_seen_twice_is_a_token_and_the_rest_one_unknown_token():
    tokens = count_chars(TEXT)
    counts = {}
    for char in TEXT:  # the definition, counted here
        counts[char] = counts.get(char, 0) + 1
    assert set(tokens) == {c for c, n in counts.items() if n >= 2} | {START, UNKNOWN}
    assert "\n" in tokens and " " in tokens and "🌙" in tokens
    assert tokens[-2:] == [UNKNOWN, START] and len(tokens) == len(set(tokens))
    chars = Chars(tokens)
    assert chars.encode(TEXT) == [tokens.index(c) if counts[c] >= 2 else chars.unknown
                                  for c in TEXT]
    assert chars.outside("疑疑霜x") == ["疑", "霜", "x"]


@pytest.mark.parametrize("text", ["", "\n", "  \n\n ", "明月光，\n明月。", "it was the best of "
                                  "times,  it was\n\tthe worst", "🌙 é\r\n", "<|start|>"])
def test_any_text_it_covers_round_trips_exactly(text):
    chars = Chars(count_chars(TEXT + "<|start|>" * 2))
    assert not chars.outside(text)
    assert chars.decode(chars.encode(text)) == text
    assert chars.decode_bytes(chars.encode(text)) == text.encode("utf-8")
    assert len(chars.encode(text)) == len(text)  # one token a character: never the specials
    assert chars.prompt_ids(text) == [chars.start, *chars.encode(text)]


def test_the_start_token_also_ends_a_poem_and_bad_ids_are_refused():
    chars = Chars(count_chars(TEXT))
    assert chars.start == chars.end == chars.n_vocab - 1
    with pytest.raises(ValueError, match="not one of"):
        chars.decode([chars.n_vocab])


def test_a_model_folders_chars_json_is_read_as_the_same_vocabulary(tmp_path):
    tokens = count_chars(TEXT)
    (tmp_path / "chars.json").write_text(json.dumps(tokens), encoding="utf-8")
    read = read_vocab(tmp_path, "train it again")
    assert isinstance(read, Chars) and read.tokens == tokens
    assert read.decode(read.encode("明月光，\n")) == "明月光，\n"
    with pytest.raises(PicoGPTError, match="not GPT-2's"):
        read_vocab(tmp_path, "train it again", gpt2=True)
    (tmp_path / "chars.json").write_text(json.dumps(["ab", START, UNKNOWN]), encoding="utf-8")
    with pytest.raises(PicoGPTError, match="not a character vocabulary"):
        read_vocab(tmp_path, "train it again")
    (tmp_path / "vocab.txt").write_text("[CLS]\n", encoding="utf-8")
    with pytest.raises(PicoGPTError, match="two kinds of vocabulary"):
        read_vocab(tmp_path, "train it again")


def test_the_train_command_writes_a_character_model_every_picogpt_mode_reads(tmp_path):
    text = tmp_path / "book.txt"
    text.write_text("\n\n".join(f"It was the best of times, {i % 7} times.\n"
                                "床前明月光，疑是地上霜。" for i in range(60)), encoding="utf-8")
    models = tmp_path / "models"
    done = subprocess.run([sys.executable, "-m", "picogpt.train", str(text), "--vocab", "chars",
                           "--name", "c", "--models_dir", str(models), "--steps", "3",
                           "--n_layer", "1", "--n_embd", "16", "--n_head", "2", "--n_ctx", "16",
                           "--curve_every", "3"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tokens = json.loads((models / "c" / "chars.json").read_text(encoding="utf-8"))
    assert "\n" in tokens and "月" in tokens and tokens[-2:] == [UNKNOWN, START]
    picogpt = Path(sys.executable).parent / "picogpt"
    scored = subprocess.run([str(picogpt), "床前明月光，\nIt was", "--model_size", "c",
                             "--models_dir", str(models), "--score"], capture_output=True,
                            text=True)
    assert scored.returncode == 0, scored.stderr
    assert "13 tokens" in scored.stdout + scored.stderr  # one a character, after <|start|>
