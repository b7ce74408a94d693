"""The encoder-decoder's decode loop and a couplet's masks (transformer/decoding.py): the length,
and --distinct's 叠字 mask, judged here by counting characters, not by the mask's own code. The
loop against torch's greedy decoding is in test_transformer.py, against a trained model's answers
in test_couplet.py."""

import numpy as np
from test_openai import assert_one_line_error, picogpt

from picogpt.chars import Chars
from picogpt.sampling import Sampling
from picogpt.transformer import init_params
from picogpt.transformer.decoding import answer, couplet_allowed

ENCODER = Chars([*"年岁花相似人不同春风", "<|unknown|>", "<|start|>"])


def unasked_repeat(first: str, second: str) -> bool:
    """Whether second uses a character twice where first has two different characters."""
    return any(second[i] == second[j] and first[i] != first[j]
               for i in range(len(second)) for j in range(i))


def allowed_after(first: str, wrote: str, distinct: bool) -> set[str]:
    """The characters (and "end") the couplet's masks allow after wrote, for the 上句 first."""
    src = np.array([ENCODER.encode(first)])
    tgt = np.array([[ENCODER.start, *ENCODER.encode(wrote)]])
    ok = couplet_allowed(src, ENCODER.n_vocab, ENCODER.end, ENCODER.unknown, distinct)(tgt)[0]
    return {"end" if i == ENCODER.end else ENCODER.tokens[i] for i in np.flatnonzero(ok)}


def test_distinct_forbids_what_the_line_used_unless_the_shang_ju_repeats_there():
    """年年岁岁花相似 answered 岁岁年…: at place 3 the 上句 repeats its place 2 (岁), so 年 (the
    下句's place 2) may come again, and 岁 (places 0 and 1, under 年 and 年) may not; at place 1
    the 上句 repeats place 0, so 岁 may come again. Without --distinct every character may; at the
    上句's length, only the end."""
    first, chars = "年年岁岁花相似", set("年岁花相似人不同春风")
    assert allowed_after(first, "岁岁年", distinct=True) == chars - {"岁"}
    assert allowed_after(first, "岁", distinct=True) == chars
    assert allowed_after(first, "岁岁年年人", distinct=True) == chars - set("岁年人")
    assert allowed_after(first, "岁岁年年人", distinct=False) == chars
    assert allowed_after(first, "岁岁年年人不同", distinct=True) == {"end"}
    # a line the mask would not have written (年 twice where 春风 differ): the 上句 repeats 春
    # at place 2, so the 年 under its first 春 may come again all the same
    assert "年" in allowed_after("春风春花似", "年年", distinct=True)


def test_distinct_samples_never_repeat_unasked_and_the_others_do():
    """A random model of ten characters, top-k 8, 40 samples of a 上句 of seven different
    characters: with --distinct none repeats a character; without, most do."""
    hparams = {"n_vocab": ENCODER.n_vocab, "n_embd": 16, "n_head": 2, "n_layer": 1}
    params = init_params(hparams, np.random.default_rng(3))
    first = "春风花相似人不"
    free, distinct = (answer(first, params, hparams, ENCODER, Sampling(top_k=8), seed=4,
                             n_samples=40, distinct=flag) for flag in (False, True))
    assert all(len(line) == 7 for line in free + distinct)
    assert not any(unasked_repeat(first, line) for line in distinct), distinct
    assert sum(unasked_repeat(first, line) for line in free) > 20, free


def test_distinct_is_on_by_default_on_the_command_line_and_a_gpt2_refuses_it(tmp_path, tiny):
    """picogpt "上句" on a couplet model: no unasked 叠字 in 8 samples unless --distinct=False
    (then some); a GPT-2 refuses --distinct=false in one line."""
    from test_couplet_page import TOKENS, couplet_folder

    shape = {"n_embd": 16, "n_head": 2, "n_layer": 1, "n_dec_layer": 1}
    couplet_folder(tmp_path, "dui", shape, init_params({**shape, "n_vocab": len(TOKENS)},
                                                       np.random.default_rng(5)), random=True)
    first = "春风秋月山水花"
    model = ["--model_size", "dui", "--models_dir", str(tmp_path), "--top_k", "8", "--seed",
             "1", "--n_samples", "8"]
    said = {}
    for flags in ((), ("--distinct=false",)):
        ran = picogpt(first, *model, *flags)
        assert ran.returncode == 0, ran.stderr
        said[flags] = [line for line in ran.stdout.splitlines() if not line.startswith("=")]
        assert len(said[flags]) == 8
    assert not any(unasked_repeat(first, line) for line in said[()]), said[()]
    assert any(unasked_repeat(first, line) for line in said[("--distinct=false",)])
    assert_one_line_error(picogpt("Alan Turing", "--models_dir", str(tiny.models_dir),
                                  "--distinct=false"), "--distinct is for a couplet model")


def test_the_packages_decode_stays_the_decoders_forward_after_the_room_loads():
    """`from picogpt.transformer import decode` is model.py's decode whatever was imported
    before: loading the room decoding.py must not replace the package's name with the module."""
    import importlib

    import picogpt.transformer as package
    from picogpt.transformer import model

    room = importlib.import_module("picogpt.transformer.decoding")
    assert package.decode is model.decode and room.write is not None
    assert package.decoding is room
