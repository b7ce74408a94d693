"""The picogpt command as a user runs it: its output and its exit code.

Most runs call cli.main in this process (test_openai.picogpt); what only a process shows (python
-m, a closed pipe) runs the installed command in a child."""

import inspect
import json
import os
import re

import numpy as np
import pytest
from test_model import load
from test_openai import assert_one_line_error, picogpt, picogpt_child

from picogpt import generate
from picogpt.cli.generate import generate_text, score_text
from picogpt.files.openai import read_encoder


@pytest.mark.parametrize("args, message", [
    (["hi", "--model_size", "125M"], "unknown model size '125M'; choose one of 124M, 355M"),
    (["hi", "--top_k", "0"], "top_k=0 is not a whole number from 1 up"),
    (["hi", "--top_k", "60000"], "top_k=60000 is not a whole number from 1 to 50257"),
    (["hi", "--top_k", "5", "--temperature", "0"], "temperature=0 must be a number above 0"),
    (["hi", "--temperature", "warm"], "temperature='warm' must be a number above 0"),
    (["hi", "--top_p", "1.5"], "top_p=1.5 must be a number above 0 and at most 1"),
    (["hi", "--repetition_penalty", "-1"], "repetition_penalty=-1 must be a number above 0"),
    (["hi", "--n_samples", "0"], "n_samples=0 is not a whole number from 1 up"),
    (["hi", "--n_tokens", "-3"], "n_tokens=-3 is not a whole number from 0 up"),
    (["hi", "--n_tokens", "many"], "n_tokens='many' is not a whole number from 0 up"),
    (["hi", "--n_tokens", "200"], "prompt is 1 tokens; with n_tokens=200 that passes the "
                                  "model's limit of 128 tokens. Shorten the prompt or lower "
                                  "n_tokens."),
    (["a\udcff"], "the prompt holds '\\udcff' at character 1, which is not valid Unicode"),
    (["hi", "there"], "picogpt takes one prompt, but got 2 words: 'hi' 'there'. Quote the"),
    (["hi", "--n_tokens"], "--n_tokens needs a value"),
    (["--prompt_file", "/no/such/file"], "cannot read --prompt_file /no/such/file: No such"),
    (["hi", "--prompt_file", "/etc/hostname"], "give the prompt as text or with --prompt_file"),
    (["hi", "--stop", ""], "stop='' is not a non-empty text"),
    (["hi", "--candidates", "3", "--n_samples", "2"], "--candidates and --explain show one "
                                                      "sample; drop --n_samples."),
    (["hi", "--explain", "x.html", "--n_samples", "2"], "--candidates and --explain show one "
                                                        "sample; drop --n_samples."),
    (["hi", "--json"], "--json works with --score; add --score to score text."),
    (["hi", "--stride", "64"], "--stride works with --score; add --score to score text."),
    (["hi", "--score", "--top", "-1"], "top=-1 is not a whole number from 0 up."),
    (["hi", "--score", "--top", "50258"], "top=50258 is not a whole number from 0 to 50257."),
    (["hi", "--generate"], "picogpt generates text when no mode is given; drop --generate"),
    (["hi", "--score", "--generate"], "drop --generate"),
    (["hi", "--score", "--json=maybe"], "--json=maybe is not true or false; write --json or "
                                        "--json=true to turn it on, --json=false"),
    (["hi", "--ignore_end=2"], "--ignore_end=2 is not true or false"),
    (["hi", "--ignore_end="], "--ignore_end= is not true or false"),
    (["hi", "--score=maybe"], "--score=maybe is not true or false"),
    (["hi", "--ignore_end", "false"], "--ignore_end takes its value after an equals sign, as in "
                                      "--ignore_end=false; 'false' after it reads as a second "
                                      "prompt."),
])
def test_bad_input_is_one_line_and_exit_code_1(tiny, args, message):
    done = picogpt(*args, "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, message)
    assert done.stdout == ""


def continuation(checkpoint, vocab_dir, prompt: str, n_tokens: int, **settings) -> str:
    """What the library generates for prompt, decoded: what the CLI must print."""
    hparams, params = load(checkpoint.models_dir)
    encoder = read_encoder(vocab_dir)
    ids = generate(encoder.encode(prompt), params, hparams["n_head"], n_tokens,
                   encoder=encoder, **settings)
    return encoder.decode(list(ids))


@pytest.mark.parametrize("args, prompt", [
    (["hello, world"], "hello, world"), (["123"], "123"), (["None"], "None"),
    (["[1, 2]"], "[1, 2]"), (["-5"], "-5"), (["--", "--5, x"], "--5, x"),
    (["--prompt", "{'a': 1}"], "{'a': 1}"), (["1e3"], "1e3"), (["True"], "True"),
])
def test_the_prompt_reaches_the_encoder_exactly_as_typed(tiny, vocab_dir, args, prompt):
    done = picogpt("--n_tokens", "6", "--models_dir", str(tiny.models_dir), *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == continuation(tiny, vocab_dir, prompt, 6) + "\n"


def long_text(n_bytes: int) -> str:
    """English-like text of n_bytes, varied enough to give thousands of different tokens."""
    words = [w for w in inspect.getsource(np.linalg).split() if w.isalpha()]
    rng = np.random.default_rng(0)
    text = " ".join(rng.choice(words, n_bytes // 4))
    return text[:n_bytes]


def test_a_15_kb_prompt_from_a_file_or_stdin(tiny_end, vocab_dir, tmp_path):
    text = long_text(15_000)
    expected = continuation(tiny_end, vocab_dir, text + "\n", 3) + "\n"  # one newline dropped
    path = tmp_path / "prompt.txt"
    path.write_text(text + "\n\n", encoding="utf-8")
    args = ["--n_tokens", "3", "--models_dir", str(tiny_end.models_dir)]
    from_file = picogpt("--prompt_file", str(path), *args)
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == expected
    from_stdin = picogpt("--prompt_file", "-", *args, input=text + "\n\n")
    assert from_stdin.stdout == expected


def test_a_100_kb_prompt_gets_the_context_error_not_a_crash(tiny, tmp_path):
    done = picogpt(long_text(100_000), "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, "passes the model's limit of 128 tokens. Shorten the prompt")
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\u00e9".encode("latin-1"))
    done = picogpt("--prompt_file", str(path), "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, "is not UTF-8 text (byte 3 is 0xe9); save it as UTF-8.")


@pytest.mark.parametrize("flag, value, guess", [
    ("--n_token", "5", "--n_tokens"), ("--temprature", "0.7", "--temperature"),
    ("--top-p", "0.9", "--top_p"), ("--foo", "1", None),
])
def test_a_misspelt_flag_is_refused_before_anything_loads(flag, value, guess, tmp_path):
    models_dir = tmp_path / "never"  # loading would create it and try to download
    done = picogpt("hi", flag, value, "--models_dir", str(models_dir),
                   env={"PICOGPT_BASE_URL": "http://127.0.0.1:9"})
    assert_one_line_error(done, f"unknown flag {flag}; " + (
        f"did you mean {guess}?" if guess else "see picogpt --help."))
    assert not models_dir.exists()


def test_a_word_with_one_dash_is_text_and_help_lists_no_short_flag(tiny, vocab_dir):
    """Flags are spelled whole: "-c", which fire would read as --candidates, is a prompt, and
    --help lists no short form; -h stays help."""
    for mode in ([], ["--score"]):
        done = picogpt(*mode, "--help", env={"PAGER": "cat"})
        assert done.returncode == 0 and "FLAGS" in done.stdout
        assert re.findall(r"^\s+-\w\b.*", done.stdout + done.stderr, re.M) == []
    help_ = picogpt("-h", env={"PAGER": "cat"})
    assert help_.returncode == 0 and "FLAGS" in help_.stdout
    for prompt in ["-c", "-i", "-r", "-e", "-a", "-l", "-b", "-5", "hi", "ri"]:  # fire's
        assert picogpt(prompt, "--n_tokens", "3", "--models_dir", str(tiny.models_dir)).stdout \
            == continuation(tiny, vocab_dir, prompt, 3) + "\n", prompt
    encoder = read_encoder(vocab_dir)
    for prompt in ["-j", "-s", "-t"]:
        done = picogpt(prompt, "--score", "--json", "--models_dir", str(tiny.models_dir))
        assert [token["id"] for token in json.loads(done.stdout)["tokens"]] == \
            encoder.encode(prompt), prompt


@pytest.mark.parametrize("value, on", [
    *[(value, True) for value in ["true", "True", "TRUE", "1", "yes", "Yes", None]],
    *[(value, False) for value in ["false", "False", "FALSE", "0", "no", "NO"]],
])
def test_true_or_false_flags_mean_what_they_say(tiny, tiny_end, vocab_dir, value, on):
    """--json=false prints no JSON, --ignore_end=false stops at the end: each spelling of a
    true-or-false flag is read in one place, the same for every command."""
    def flag(name: str) -> str:
        return f"--{name}" if value is None else f"--{name}={value}"

    text = ["Alan Turing", "--score", "--models_dir", str(tiny.models_dir)]
    scored, plain, as_json = picogpt(*text, flag("json")), picogpt(*text), picogpt(*text, "--json")
    assert scored.returncode == 0, scored.stderr
    assert scored.stdout == (as_json if on else plain).stdout and plain.stdout != as_json.stdout
    prompt = read_encoder(vocab_dir).decode(tiny_end.prompt_ids)
    args = [prompt, "--n_tokens", "12", "--models_dir", str(tiny_end.models_dir)]
    assert picogpt(*args, flag("ignore_end")).stdout == continuation(
        tiny_end, vocab_dir, prompt, 12, stop_at_end=not on) + "\n"
    mode = picogpt("Alan Turing", flag("score"), "--models_dir", str(tiny.models_dir))
    assert mode.stdout == (plain.stdout if on else picogpt(
        "Alan Turing", "--models_dir", str(tiny.models_dir)).stdout)


def test_every_command_reads_a_true_or_false_flag_alike(capsys):
    """run_command, which picogpt and python -m picogpt.train (and its --task forms) go
    through, on a function of the test's own: what the function receives for each spelling."""
    from picogpt.cli.command import run_command

    def command(text_file: str = "", resume: bool = False, steps: int = 1):
        return text_file, resume, steps

    for words, expected in [(["--resume"], True), (["--resume=TRUE"], True),
                            (["--resume=yes"], True), (["--resume=1"], True), ([], False),
                            (["--resume=False"], False), (["--resume=no"], False),
                            (["--resume=0"], False)]:
        assert run_command(command, ["a.txt", *words, "--steps", "3"], "prog", "text_file") == \
            ("a.txt", expected, 3), words
    with pytest.raises(SystemExit) as ended:
        run_command(command, ["a.txt", "--resume=later"], "prog", "text_file")
    assert ended.value.code == 1
    assert capsys.readouterr().err == ("picogpt: --resume=later is not true or false; write "
                                       "--resume or --resume=true to turn it on, --resume=false "
                                       "to leave it off (1/0 and yes/no work too).\n")


def test_no_browser_false_opens_the_browser(tiny, monkeypatch):
    import contextlib

    from picogpt.web import browser, server

    opened = []
    monkeypatch.setattr(browser, "browser_opened", lambda url: opened.append(url)
                        or contextlib.nullcontext())
    monkeypatch.setattr(server.ExploreServer, "serve_forever", lambda self, poll: None)
    for value, opens in [("--no_browser=false", True), ("--no_browser=0", True),
                         ("--no_browser", False), ("--no_browser=yes", False)]:
        opened.clear()
        done = picogpt("hi", "--explore", value, "--models_dir", str(tiny.models_dir))
        assert done.returncode == 0, done.stderr
        assert opened == ([done.stdout.strip()] if opens else []), value


def test_score_stride_reaches_the_windows_on_a_text_longer_than_the_context(tiny, vocab_dir):
    from picogpt import score

    encoder = read_encoder(vocab_dir)
    text = long_text(2_000)
    ids = encoder.encode(text)
    hparams, params = load(tiny.models_dir)
    assert len(ids) > 2 * hparams["n_ctx"]  # several windows
    results = {}
    for stride in (32, 128):
        done = picogpt(text, "--score", "--json", "--stride", str(stride), "--models_dir",
                       str(tiny.models_dir))
        assert done.returncode == 0, done.stderr
        results[stride] = [token["logprob"] for token in json.loads(done.stdout)["tokens"]]
        np.testing.assert_allclose(results[stride], score(ids, params, hparams["n_head"],
                                                          stride=stride), atol=1e-6)
    assert not np.allclose(results[32], results[128])  # the stride changed the contexts


def test_end_of_text_ends_the_output_unless_ignore_end(tiny_end, vocab_dir):
    prompt = read_encoder(vocab_dir).decode(tiny_end.prompt_ids)
    args = [prompt, "--n_tokens", "12", "--models_dir", str(tiny_end.models_dir)]
    ended, went_on = picogpt(*args), picogpt(*args, "--ignore_end")
    assert ended.stdout == continuation(tiny_end, vocab_dir, prompt, 12) + "\n"
    assert went_on.stdout == continuation(tiny_end, vocab_dir, prompt, 12,
                                          stop_at_end=False) + "\n"
    assert went_on.stdout.startswith(ended.stdout[:-1] + "<|endoftext|>")


def test_stop_text_is_not_printed_and_works_across_tokens(tiny_end, vocab_dir):
    encoder = read_encoder(vocab_dir)
    prompt = encoder.decode(tiny_end.prompt_ids)
    full = continuation(tiny_end, vocab_dir, prompt, 12, stop_at_end=False)
    hparams, params = load(tiny_end.models_dir)
    out = list(generate(tiny_end.prompt_ids, params, hparams["n_head"], 3))
    cut = len(encoder.decode(out[:2]))
    stop = full[cut - 2 : cut + 2]  # the end of token 1 and the start of token 2
    done = picogpt(prompt, "--stop", stop, "--n_tokens", "12", "--ignore_end", "--models_dir",
                   str(tiny_end.models_dir))
    assert done.stdout == full[: full.index(stop)] + "\n"
    many = picogpt(prompt, "--stop", stop, "--n_tokens", "12", "--ignore_end", "--n_samples",
                   "2", "--models_dir", str(tiny_end.models_dir))
    assert many.stdout == "".join(f"{'=' * 20} sample {i} of 2 {'=' * 20}\n"
                                  f"{full[: full.index(stop)]}\n" for i in (1, 2))


def test_unicode_prompts_reach_the_encoder_and_the_text_is_the_librarys(tiny, vocab_dir):
    for prompt in ["日本語 😀 עברית", "\x07bell\x1b[0m", "\u202eright-to-left override"]:
        done = picogpt(prompt, "--n_tokens", "4", "--models_dir", str(tiny.models_dir))
        assert done.returncode == 0, done.stderr
        assert done.stdout == continuation(tiny, vocab_dir, prompt, 4) + "\n"


@pytest.mark.parametrize("flags, settings", [
    (["--top_k", "20", "--temperature", "0.5"], {"top_k": 20, "temperature": 0.5}),
    (["--top_p", "0.7"], {"top_p": 0.7}),
    (["--top_k", "40", "--repetition_penalty", "3"], {"top_k": 40, "repetition_penalty": 3.0}),
], ids=["temperature", "top_p", "repetition_penalty"])
def test_sampling_flags_reach_the_engine(tiny, vocab_dir, flags, settings):
    """The CLI's text is the library's with the same settings, and not the text without the
    flag under test (so a flag that was dropped on the way would show)."""
    prompt, args = "Alan Turing", ["--n_tokens", "12", "--seed", "4", "--models_dir",
                                   str(tiny.models_dir)]
    done = picogpt(prompt, *flags, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == continuation(tiny, vocab_dir, prompt, 12, seed=4, **settings) + "\n"
    tested = next(name for name in ("temperature", "top_p", "repetition_penalty")
                  if name in settings)
    others = {key: value for key, value in settings.items() if key != tested}
    if tested == "top_p":
        others = {"top_k": 50257}  # sampling from every token: top_p=1
    without = continuation(tiny, vocab_dir, prompt, 12, seed=4, **others)
    assert done.stdout != without + "\n"


def test_n_samples_with_sampling_prints_each_librarys_sample(tiny, vocab_dir):
    from test_generate import draw

    done = picogpt("Alan Turing", "--n_samples", "3", "--top_k", "30", "--seed", "7",
                   "--n_tokens", "8", "--models_dir", str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny.models_dir)
    samples = draw(encoder.encode("Alan Turing"), params, hparams["n_head"], 8, top_k=30,
                   seed=7, n_samples=3)
    assert len({tuple(sample) for sample in samples}) == 3  # sampling: three different texts
    assert done.stdout == "".join(f"{'=' * 20} sample {i + 1} of 3 {'=' * 20}\n"
                                  f"{encoder.decode(sample)}\n"
                                  for i, sample in enumerate(samples))


@pytest.mark.parametrize("mode, function", [([], generate_text), (["--score"], score_text)])
def test_help_shows_every_flag_with_its_default_and_what_it_does(mode, function):
    done = picogpt(*mode, "--help", env={"PAGER": "cat"})
    text = done.stdout + done.stderr  # fire writes help to stderr when it is not a terminal
    assert done.returncode == 0
    flags = text[text.index("FLAGS"):]
    for name, param in inspect.signature(function).parameters.items():
        block = flags[flags.index(f"--{name}="):].split("\n    -")[0]
        assert f"Default: {param.default!r}" in block, name
        assert len(block.splitlines()) >= 4, name  # and a line that says what it does
    if not mode:
        assert "repetition penalty, temperature, top-k, top-p" in text  # the filters' order


def args_in(doc: str) -> dict[str, str]:
    """Each entry of a docstring's Args: section, its wrapped lines joined: a loop of the
    test's own, beside fire's reader."""
    entries, inside = {}, False
    for line in doc.splitlines():
        if line.strip() == "Args:":
            inside = True
        elif inside and re.match(r"^        \w+: ", line):
            name, _, said = line.strip().partition(": ")
            entries[name] = said
        elif inside and line.startswith("            "):
            entries[name] += " " + line.strip()
        # a blank line: cli/generate.py adds the model's flags after one
        elif inside and line.strip():
            break
    return entries


@pytest.mark.parametrize("command", [["-m", "picogpt"], ["-m", "picogpt", "--score"]])
def test_help_says_each_flag_whole_and_opens_with_the_command(command):
    """Every sentence of each flag's Args: entry is in --help, whole: fire's docstring reader
    cut an entry at a wrapped line with a colon. The page opens with NAME, not fire's INFO."""
    import subprocess
    import sys

    from picogpt.cli import generate

    function = {("picogpt",): generate.generate_text,
                ("picogpt", "--score"): generate.score_text}[tuple(command[1:])]
    done = subprocess.run([sys.executable, *command, "--help"], capture_output=True, text=True,
                          env={**os.environ, "PAGER": "cat"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("NAME\n")
    shown = " ".join(done.stdout.split())
    entries = args_in(function.__doc__)
    assert len(entries) == len(inspect.signature(function).parameters)
    for name, said in entries.items():
        assert f"{name.upper()}" in shown and " ".join(said.split()) in shown, name


@pytest.mark.parametrize("argv", [["--help"], ["--task", "poems", "-h"], ["book.txt", "--help"]])
def test_the_train_commands_help_shows_the_shared_flags_once_and_each_tasks_own(argv):
    """python -m picogpt.train --help: NAME first; each shared flag once, with its sentence
    whole; then every task of the table, its defaults and its own flags, each with its
    sentence; a flag two tasks share (n_vocab) under each of them."""
    import subprocess
    import sys
    from dataclasses import fields

    from picogpt.cli.train import SHARED_FLAGS, TASKS

    done = subprocess.run([sys.executable, "-m", "picogpt.train", *argv], capture_output=True,
                          text=True, env={**os.environ, "PAGER": "cat"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("NAME\n")
    shown = " ".join(done.stdout.split())
    for name, (_kind, said) in SHARED_FLAGS.items():
        assert shown.count(f"--{name}={name.upper()} ") == 1 and said in shown, name
    sections = shown.split(" TASK ")[1:]
    assert [section.split(":")[0] for section in sections] == list(TASKS)
    for section, (task, _reader) in zip(sections, TASKS.values()):
        assert f"--name {task.model_name}" in section
        for f in fields(task.options):
            assert f"--{f.name}={f.name.upper()} (default {f.default})" in section
            assert " ".join(f.metadata["help"].split()) in section, f.name


def test_streamed_text_is_the_decoded_text_with_split_characters_held_back(vocab_dir):
    from picogpt.cli.terminal import stream_text
    from picogpt.files.openai import read_encoder

    encoder = read_encoder(vocab_dir)
    byte_token = {b: i for i, b in encoder.token_bytes.items() if len(b) == 1}
    euro = [byte_token[bytes([b])] for b in "€".encode()]  # one character, three tokens
    assert list(stream_text(euro, encoder)) == ["", "", "€", ""]
    # text that may begin the stop text waits; the stop text and what follows never show
    pieces = list(stream_text(encoder.encode("ab\n\ncd\n\n"), encoder, stop="\n\nc"))
    assert "".join(pieces) == "ab"
    rng = np.random.default_rng(0)
    partial = [i for b, i in byte_token.items() if b[0] >= 0x80]  # pieces of characters
    for _ in range(300):
        ids = [int(rng.choice(partial)) if rng.random() < 0.5 else int(rng.integers(50257))
               for _ in range(rng.integers(0, 30))]
        pieces = list(stream_text(ids, encoder))
        assert "".join(pieces) == encoder.decode(ids)


def test_python_dash_m_picogpt_is_the_command(tiny):
    import subprocess
    import sys

    args = ["Alan Turing", "--n_tokens", "5", "--models_dir", str(tiny.models_dir)]
    module = subprocess.run([sys.executable, "-m", "picogpt", *args], capture_output=True,
                            text=True, timeout=300)
    assert module.returncode == 0, module.stderr
    assert module.stdout == picogpt_child(*args).stdout


def test_a_reader_that_leaves_early_ends_picogpt_quietly(tiny):
    """`picogpt ... | head -1`: once the pipe closes, no traceback, exit code 141 (SIGPIPE)."""
    import subprocess

    from test_openai import PICOGPT

    process = subprocess.Popen([str(PICOGPT), "hi", "--n_tokens", "100", "--candidates", "3",
                                "--models_dir", str(tiny.models_dir)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.readline()  # the header line, then the reader goes away
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 141 and stderr == b""


def test_temperature_without_sampling_says_it_changes_nothing(tiny, vocab_dir):
    args = ["Alan Turing", "--n_tokens", "6", "--models_dir", str(tiny.models_dir)]
    warm, plain = picogpt(*args, "--temperature", "0.7"), picogpt(*args)
    assert warm.returncode == 0 and warm.stdout == plain.stdout  # greedy either way
    assert warm.stderr == ("picogpt: --temperature 0.7 has no effect on greedy decoding (each "
                           "token is the most likely one); add --top_k 40 or --top_p 0.9 to "
                           "sample.\n")
    sampled = picogpt(*args, "--temperature", "0.7", "--top_k", "40", "--seed", "1")
    assert sampled.returncode == 0 and sampled.stderr == ""


@pytest.mark.parametrize("path, message", [
    ("/no/such/dir/page.html", "--explain /no/such/dir/page.html is in /no/such/dir, which does "
                               "not exist; give a file name in a folder you can write to."),
    ("{tmp}", "--explain {tmp} is a folder; give a file name"),
])
def test_a_page_that_cannot_be_written_is_refused_before_any_work(tiny, tmp_path, monkeypatch,
                                                                   path, message):
    from picogpt.cli import generate as cli

    def never(*args):
        raise AssertionError("the model was loaded before the page's path was checked")

    monkeypatch.setattr(cli, "load_model", never)
    path, message = path.format(tmp=tmp_path), message.format(tmp=tmp_path)
    done = picogpt("hi", "--explain", path, "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, message)


@pytest.mark.parametrize("flag, value", [
    ("--explain", "x.html"), ("--candidates", "3"), ("--n_samples", "2"), ("--top_k", "5"),
    ("--top_p", "0.9"), ("--stop", "x"), ("--seed", "1"), ("--temperature", "0.5"),
    ("--n_tokens", "5"), ("--repetition_penalty", "1.2"), ("--ignore_end", None),
])
def test_score_refuses_the_flags_of_generation_instead_of_ignoring_them(tiny, flag, value):
    done = picogpt("hi", "--score", flag, *([value] if value else []), "--models_dir",
                   str(tiny.models_dir))
    assert_one_line_error(done, f"{flag} does not work with --score, which scores the text as "
                                f"it is; drop {flag}.")
