"""The picogpt command as a user runs it: a subprocess, its output and its exit code."""

import numpy as np
import pytest
from test_load import assert_one_line_error, picogpt


@pytest.mark.parametrize("args, message", [
    (["hello, world"], "reached picogpt as tuple ('hello', 'world'), not text; quote it twice"),
    (["42"], "reached picogpt as int 42, not text"),
    (["hi", "--model_size", "125M"], "unknown model size '125M'; choose one of 124M, 355M"),
    (["hi", "--top_k", "0"], "top_k=0 is not a whole number from 1 to 50257"),
    (["hi", "--top_k", "60000"], "top_k=60000 is not a whole number from 1 to 50257"),
    (["hi", "--top_k", "5", "--temperature", "0"], "temperature=0 must be a number above 0"),
    (["hi", "--temperature", "warm"], "temperature='warm' must be a number above 0"),
    (["hi", "--n_tokens", "-3"], "n_tokens=-3 is not a count of tokens"),
    (["hi", "--n_tokens", "many"], "n_tokens='many' is not a count of tokens"),
    (["hi", "--n_tokens", "200"], "prompt is 1 tokens; with n_tokens=200 that passes GPT-2's "
                                  "limit of 128. Shorten the prompt or lower n_tokens."),
    (["a\udcff"], "the prompt holds '\\udcff' at character 1, which is not valid Unicode"),
])
def test_bad_input_is_one_line_and_exit_code_1(tiny, args, message):
    done = picogpt(*args, "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, message)
    assert done.stdout == ""


def test_unicode_prompts_work(tiny):
    for prompt in ["日本語 😀 עברית", "\x07bell\x1b[0m", "\u202eright-to-left override"]:
        done = picogpt(prompt, "--n_tokens", "4", "--models_dir", str(tiny.models_dir))
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith("\n")


def test_help_explains_every_flag():
    done = picogpt("--help", env={"PAGER": "cat"})
    text = done.stdout + done.stderr  # fire writes help to stderr when it is not a terminal
    assert done.returncode == 0
    for flag in ["--n_tokens", "--model_size", "--models_dir", "--top_k", "--temperature",
                 "--seed", "--base_url"]:
        assert flag in text
    assert "Sample among the k most likely tokens" in text


def test_streamed_text_is_the_decoded_text_with_split_characters_held_back(vocab_dir):
    from picogpt.cli import stream_text
    from picogpt.load import read_encoder

    encoder = read_encoder(vocab_dir)
    byte_token = {b: i for i, b in encoder.token_bytes.items() if len(b) == 1}
    euro = [byte_token[bytes([b])] for b in "€".encode()]  # one character, three tokens
    assert list(stream_text(euro, encoder)) == ["", "", "€", ""]
    rng = np.random.default_rng(0)
    partial = [i for b, i in byte_token.items() if b[0] >= 0x80]  # pieces of characters
    for _ in range(300):
        ids = [int(rng.choice(partial)) if rng.random() < 0.5 else int(rng.integers(50257))
               for _ in range(rng.integers(0, 30))]
        pieces = list(stream_text(ids, encoder))
        assert "".join(pieces) == encoder.decode(ids)
