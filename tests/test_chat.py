"""--chat against transformers: the conversation's ids equal apply_chat_template's for templates
kept in tests/data/chat, the reply equals transformers' greedy reply stopped at the folder's end
tokens, a conversation on a terminal reuses its KV cache, and a hostile template is one line."""

import json
import os
import pty
import select
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_openai import PICOGPT, picogpt

from picogpt import PicoGPTError, kvcache
from picogpt.files.chat_files import chat_ids, read_chat, render
from picogpt.files.hf import load_hf
from picogpt.kvcache import Conversation
from picogpt.sampling import Sampling
from scripts.fixtures.chat_tokenizers import llama3_tokenizer, qwen_tokenizer

TEMPLATES = Path(__file__).parent / "data" / "chat"
THINK = ("<think>", "</think>")
ONE = [{"role": "user", "content": "你好，请介绍一下自己。"}]
SYSTEM = [{"role": "system", "content": "你是一位诗人。"}, *ONE]
TWO = [*SYSTEM, {"role": "assistant", "content": "<think>\n想一想\n</think>\n\n我是一个模型。"},
       {"role": "user", "content": "写一句诗: 123 😀"}]


def template(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def reference_ids(tokenizer, messages, **options) -> list[int]:
    """transformers' apply_chat_template ids, with the generation prompt."""
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                              tokenize=True, return_dict=False, **options))


@pytest.mark.parametrize("name", ["qwen2.5", "qwen3", "llama3"])
def test_chat_ids_equal_apply_chat_templates(name, tmp_path):
    make = llama3_tokenizer if name == "llama3" else qwen_tokenizer
    tokenizer = make(tmp_path, template(name), **({"added": THINK} if name == "qwen3" else {}))
    encoder = load_encoder(tmp_path)
    chat = read_chat(tmp_path, encoder.n_vocab, encoder.end)
    assert chat["template"] == template(name)  # read from chat_template.jinja
    for messages in (ONE, SYSTEM, TWO):
        for thinking in (False, True):
            ids = chat_ids(encoder, chat["template"], messages, chat["tokens"],
                           enable_thinking=thinking)
            assert ids == reference_ids(tokenizer, messages, enable_thinking=thinking), messages
    if name == "qwen3":  # the flag reaches the template: off writes an empty <think> block
        assert render(chat["template"], ONE, {}, enable_thinking=False).endswith(
            "<think>\n\n</think>\n\n")
        assert render(chat["template"], ONE, {}, enable_thinking=True).endswith("assistant\n")
    if name == "llama3":  # the template writes the begin token, from the tokens it was given
        assert ids[0] == encoder.begin and ids.count(encoder.begin) == 1


def load_encoder(folder: Path):
    from picogpt.files.folder_vocab import read_vocab

    return read_vocab(folder, "save the tokenizer again")


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory) -> Path:
    """A small GPT-2 with a Qwen-style tokenizer, Qwen3's kind of template and end tokens
    [<|im_end|>, <|endoftext|>] in generation_config.json, saved by transformers."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("chat_gpt2")
    tokenizer = qwen_tokenizer(folder, template("qwen3"), added=THINK)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=64, n_layer=2,
                        n_head=4, initializer_range=0.3)  # lively weights: clear greedy margins
    model = GPT2LMHeadModel(config)
    model.save_pretrained(folder)
    ends = [tokenizer.convert_tokens_to_ids("<|im_end|>"),
            tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": ends}))
    return folder


def greedy_reply(folder: Path, ids: list[int], n_tokens: int) -> list[int]:
    """transformers' greedy reply to ids, stopped at generation_config.json's end tokens."""
    import torch
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(folder).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n_tokens, do_sample=False)
    reply = out[0, len(ids):].tolist()
    ends = json.loads((folder / "generation_config.json").read_text())["eos_token_id"]
    return reply[: next((i for i, t in enumerate(reply) if t in ends), len(reply))]


@pytest.mark.parametrize("messages", [ONE, SYSTEM], ids=["alone", "system"])
def test_a_chat_turn_prints_transformers_greedy_reply(chat_folder, messages):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    ids = reference_ids(tokenizer, messages, enable_thinking=False)
    expected = greedy_reply(chat_folder, ids, 24)
    system = ["--system", messages[0]["content"]] if len(messages) == 2 else []
    run = picogpt(messages[-1]["content"], "--hf", str(chat_folder), "--chat", "--n_tokens",
                  "24", *system)
    assert run.returncode == 0, run.stderr
    assert run.stdout == tokenizer.decode(expected) + "\n"


def test_a_conversation_reuses_its_cache_and_equals_a_fresh_run(chat_folder):
    """Turn two runs only the positions after what the cache holds, and its reply is the one a
    new conversation gives on the whole rendered conversation."""
    encoder, hparams, params = load_hf(str(chat_folder))
    chat = read_chat(chat_folder, encoder.n_vocab, encoder.end)
    fed = []

    class Counting:  # kvcache.py, counting the positions each prefill runs
        KVCache, decode_step = kvcache.KVCache, kvcache.decode_step

        @staticmethod
        def prefill(ids, *args, **kwargs):
            fed.append(np.shape(ids)[-1])
            return kvcache.prefill(ids, *args, **kwargs)

    def talk(conversation, messages):
        ids = chat_ids(encoder, chat["template"], messages, chat["tokens"],
                       enable_thinking=False)
        reply = list(conversation.reply(ids, 30, Sampling(), np.random.default_rng(0),
                                        chat["ends"]))
        return ids, reply

    talking = Conversation(params, hparams["n_head"], 512, Counting)
    first_ids, first = talk(talking, SYSTEM)
    assert talking.cache.layers[0].k.shape[-2] >= len(first_ids)  # it grew from 64 positions
    second = [*SYSTEM, {"role": "assistant", "content": encoder.decode(first)},
              {"role": "user", "content": "再说一遍"}]
    second_ids, reply = talk(talking, second)
    shared = next(i for i, (a, b) in enumerate(zip(second_ids, [*first_ids, *first])) if a != b)
    # the first turn's system and user turns are not run again (Qwen3's template writes the
    # earlier reply without its empty <think> block, so the prefix ends before the reply)
    assert fed == [len(first_ids), len(second_ids) - shared] and shared > 50
    fresh = Conversation(params, hparams["n_head"], 512)
    assert talk(fresh, second)[1] == reply == greedy_reply(chat_folder, second_ids, 30)


def test_a_conversation_on_a_terminal_answers_each_turn(chat_folder):
    """picogpt --chat with no message, on a pseudo-terminal: each reply is printed after its
    turn, the next prompt waited for (never a fixed sleep), Ctrl-D ends it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    main, child = pty.openpty()
    process = subprocess.Popen([str(PICOGPT), "--hf", str(chat_folder), "--chat", "--n_tokens",
                                "12"], stdin=child, stdout=child, stderr=subprocess.PIPE)
    os.close(child)
    seen = b""

    def until_prompt() -> bytes:
        nonlocal seen
        while not seen.endswith(b"> "):
            ready, _w, _x = select.select([main], [], [], 120)
            assert ready, seen
            seen += os.read(main, 4096)
        said, seen = seen, b""
        return said

    try:
        until_prompt()
        messages = []
        for text in ("你好", "再见"):
            os.write(main, text.encode() + b"\n")
            messages.append({"role": "user", "content": text})
            ids = reference_ids(tokenizer, messages, enable_thinking=False)
            reply = tokenizer.decode(greedy_reply(chat_folder, ids, 12))
            shown = until_prompt().decode().replace("\r\n", "\n")
            assert shown == f"{text}\n{reply}\n> ", shown  # the terminal echoes the turn
            messages.append({"role": "assistant", "content": reply})
        os.write(main, b"\x04")  # Ctrl-D
        assert process.wait(60) == 0, process.stderr.read()
    finally:
        process.kill()
        os.close(main)


HOSTILE = {
    "escape": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "changes a list": "{{ messages.append(messages) }}",
    "raises": "{{ raise_exception('no chat for you') }}",
    "huge output": "{% for i in range(100000) %}{% for j in range(100000) %}xx{% endfor %}"
                   "{% endfor %}",
    "huge string": "{{ 'x' * 10000000000 }}",
    "huge power": "{{ 9 ** 999999999 }}",
    "syntax": "{% for %}",
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_template_is_one_line(name, chat_folder, tmp_path):
    folder = tmp_path / "hostile"
    folder.mkdir()
    for file in chat_folder.iterdir():
        (folder / file.name).symlink_to(file)
    (folder / "chat_template.jinja").unlink()
    (folder / "chat_template.jinja").write_text(HOSTILE[name])
    run = picogpt("你好", "--hf", str(folder), "--chat")
    assert run.returncode == 1 and run.stdout == "", run.stderr
    assert run.stderr.startswith("picogpt: the chat template") and run.stderr.count("\n") == 1


def test_chat_needs_a_template_and_its_flags_are_checked_first(chat_folder, tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    for file in chat_folder.iterdir():
        if file.name != "chat_template.jinja":
            (folder / file.name).symlink_to(file)
    for args, said in (((str(folder), "--chat"), "has no chat template"),
                       ((str(chat_folder), "--system", "x"), "add --chat"),
                       ((str(chat_folder), "--chat", "--n_samples", "2"), "--n_samples does"),
                       ((str(chat_folder), "--chat", "--stop", "x"), "--stop does")):
        run = picogpt("你好", "--hf", *args)
        assert run.returncode == 1 and said in run.stderr and run.stderr.count("\n") == 1, \
            run.stderr
    run = picogpt("你好", "--chat")
    assert run.returncode == 1 and "add --hf" in run.stderr


def test_render_runs_in_the_sandbox():
    with pytest.raises(PicoGPTError, match="the chat template failed"):
        render(HOSTILE["escape"], ONE, {})
    assert render("{{ messages[0].content | tojson }}", ONE, {}) == '"你好，请介绍一下自己。"'


def test_a_reply_ends_at_any_of_the_folders_end_tokens(chat_folder, tmp_path):
    """generation_config.json's list (else config.json's number) names the end tokens, and a
    reply stops before the first it picks."""
    encoder, hparams, params = load_hf(str(chat_folder))
    chat = read_chat(chat_folder, encoder.n_vocab, encoder.end)
    ends = {encoder.encoder["<|im_end|>"], encoder.encoder["<|endoftext|>"]}
    assert chat["ends"] == ends
    folder = tmp_path / "config_only"
    folder.mkdir()
    for file in chat_folder.iterdir():
        if file.name not in ("generation_config.json", "config.json"):
            (folder / file.name).symlink_to(file)
    config = json.loads((chat_folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "eos_token_id": 7}))
    assert read_chat(folder, encoder.n_vocab, encoder.end)["ends"] == {7}
    ids = chat_ids(encoder, chat["template"], ONE, chat["tokens"], enable_thinking=False)

    def reply(ends):
        return list(Conversation(params, hparams["n_head"], 512).reply(
            ids, 12, Sampling(), np.random.default_rng(0), ends))
    free = reply(set())
    assert len(free) == 12 and reply({free[5], 10**6}) == free[: free.index(free[5])]


def test_a_think_block_is_shown_apart_from_the_answer(tmp_path, capsys):
    from picogpt.cli.chat import print_reply

    qwen_tokenizer(tmp_path, added=THINK)
    encoder = load_encoder(tmp_path)
    ids = encoder.encode("<think>\n先想一想 123\n</think>\n\n答案是42。")
    assert encoder.encoder["<think>"] in ids and encoder.encoder["</think>"] in ids
    kept = []
    print_reply(iter(ids), encoder, [], kept)
    shown = capsys.readouterr()
    assert (shown.out, shown.err) == ("答案是42。\n", "\n先想一想 123\n\n") and kept == ids


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "qwen3-thinking"])
def test_a_qwen_chat_turn_prints_transformers_greedy_reply(kind, tmp_path, monkeypatch):
    """A Qwen2 with Qwen2.5's kind of template and a Qwen3 with Qwen3's (thinking off, then
    on): the reply transformers' greedy decoding gives on apply_chat_template's ids."""
    from scripts.fixtures.llama import random_llama

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the converted store
    folder, thinking = tmp_path / kind, kind.endswith("thinking")
    qwen3 = kind.startswith("qwen3")
    tokenizer = qwen_tokenizer(folder, template("qwen3" if qwen3 else "qwen2.5"),
                               added=THINK if qwen3 else ())
    model = random_llama("qwen3" if qwen3 else "qwen2", vocab_size=len(tokenizer))
    model.save_pretrained(folder)
    ends = [tokenizer.convert_tokens_to_ids("<|im_end|>"),
            tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": ends}))
    ids = reference_ids(tokenizer, SYSTEM, enable_thinking=thinking)
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0]
    reply = out[len(ids):].tolist()
    reply = reply[: next((i for i, t in enumerate(reply) if t in ends), len(reply))]
    run = picogpt(ONE[0]["content"], "--hf", str(folder), "--chat", "--n_tokens", "16",
                  "--system", SYSTEM[0]["content"], *(["--thinking"] if thinking else []))
    assert run.returncode == 0, run.stderr
    think = [tokenizer.convert_tokens_to_ids(mark) for mark in THINK] if qwen3 else []
    answer = reply[reply.index(think[1]) + 1:] if think and think[1] in reply else reply
    assert run.stdout == tokenizer.decode([t for t in answer if t not in think]).lstrip("\n") \
        + "\n"


def test_a_conversation_past_the_context_is_one_line(chat_folder):
    encoder, hparams, params = load_hf(str(chat_folder))
    talking = Conversation(params, hparams["n_head"], 40)
    with pytest.raises(PicoGPTError, match="the conversation is 30 tokens; with n_tokens=20 it "
                                           "passes the model's limit of 40 tokens"):
        list(talking.reply(list(range(30)), 20, Sampling(), np.random.default_rng(0), set()))
    assert talking.ids == []  # nothing was run


def test_a_qwen_conversation_grows_its_grouped_cache_and_equals_transformers(tmp_path,
                                                                               monkeypatch):
    """Two turns through the LLaMA kind's cache (key/value heads only), grown past its first
    64 positions: turn two's reply is transformers' greedy reply on the whole conversation."""
    import torch

    from picogpt.kinds import kind_of
    from scripts.fixtures.llama import random_llama

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "qwen2"
    tokenizer = qwen_tokenizer(folder, template("qwen2.5"))
    model = random_llama("qwen2", vocab_size=len(tokenizer), max_position_embeddings=256)
    model.save_pretrained(folder)
    encoder, hparams, params = load_hf(str(folder))
    chat = read_chat(folder, encoder.n_vocab, encoder.end)
    kind = kind_of(hparams)  # the table's row, as a loaded model holds it
    talking = Conversation(params, kind.runs_with(hparams), 256, kind.engine)
    messages = [*SYSTEM]
    for turn in ("你好", "写一句诗"):
        messages.append({"role": "user", "content": turn})
        ids = chat_ids(encoder, chat["template"], messages, chat["tokens"])
        reply = list(talking.reply(ids, 12, Sampling(), np.random.default_rng(0),
                                   chat["ends"]))
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)[0]
        expected = out[len(ids):].tolist()
        expected = expected[: next((i for i, t in enumerate(expected) if t in chat["ends"]),
                                   len(expected))]
        assert reply == expected, turn
        messages.append({"role": "assistant", "content": encoder.decode(reply)})
    assert talking.cache.layers[0].k.shape[-3:] == (2, 128, 16)  # 2 key/value heads, grown
