"""The NumPy core against independent references: formulas, loops, torch, and HF's GPT-2."""

import functools
import math
import sys

import numpy as np
import pytest
import torch
from conftest import hf_model

from picogpt import attention, fast, gelu, generate, gpt2, layer_norm, softmax
from picogpt import model as model_module
from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.kvcache import KVCache, LayerCache, extend
from picogpt.model import future_mask


@pytest.fixture
def rng() -> np.random.Generator:
    """Each test draws from its own generator: its inputs do not depend on which tests ran."""
    return np.random.default_rng(1234)


@functools.cache
def load(models_dir):
    """picogpt's (hparams, params) for a converted checkpoint, loaded once per folder."""
    _, hparams, params = load_encoder_hparams_and_params("124M", str(models_dir))
    return hparams, params


@pytest.fixture(params=["tiny", "gpt2_124m"])
def checkpoint(request):
    """Each whole-model test runs on the tiny shape and on the 124M shape."""
    return request.getfixturevalue(request.param)


def prompt_ids(n: int, seed: int = 0) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).integers(0, 50257, n)]


def test_gelu_is_the_tanh_form_gpt2_was_trained_with():
    x = np.linspace(-6, 6, 2001, dtype=np.float32)
    tanh_form = np.array([0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
                          for v in x.tolist()])  # float64, one value at a time
    # 1e-6 is float32 rounding at |x| <= 6; the erf form differs from this by up to ~5e-4
    np.testing.assert_allclose(gelu(x), tanh_form, atol=1e-6, rtol=0)
    assert gelu(x).dtype == np.float32


def test_softmax_rows_sum_to_one_and_ignore_a_shift(rng):
    x = rng.standard_normal((5, 7)).astype(np.float32) * 10
    p = softmax(x)
    np.testing.assert_allclose(p.sum(axis=-1), 1, rtol=1e-6)
    np.testing.assert_allclose(softmax(x + 100), p, rtol=1e-5)
    assert np.all(np.argmax(p, axis=-1) == np.argmax(x, axis=-1))
    assert np.isfinite(softmax(np.array([1e4, 0], np.float32))).all()  # no overflow
    np.testing.assert_allclose(softmax(np.array([0, 1])), softmax(np.array([0.0, 1.0])))  # ints


def test_softmax_and_attention_leave_their_inputs_alone(rng):
    # both work in place, on arrays of their own only
    x = rng.standard_normal((4, 6)).astype(np.float32)
    q, k, v = (rng.standard_normal((2, 4, 8)).astype(np.float32) for _ in range(3))
    mask = (1 - np.tri(4, 4, dtype=np.float32)) * -1e10
    inputs = [x, q, k, v, mask]
    before = [a.copy() for a in inputs]
    softmax(x)
    attention(q, k, v, mask)
    for a, b in zip(inputs, before):
        np.testing.assert_array_equal(a, b)


def test_layer_norm_matches_torch(rng):
    x = rng.standard_normal((6, 32)).astype(np.float32) * 3 + 1
    g, b = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    expected = torch.nn.functional.layer_norm(torch.from_numpy(x), (32,), torch.from_numpy(g),
                                              torch.from_numpy(b), eps=1e-5).numpy()
    np.testing.assert_allclose(layer_norm(x, g, b), expected, atol=1e-5)


def loop_attention(q, k, v, n_past):
    """Causal attention for one head, one query and one key at a time."""
    out = np.zeros_like(q)
    for i in range(len(q)):
        visible = range(n_past + i + 1)  # query i sits at position n_past + i
        scores = [float(q[i] @ k[j]) / math.sqrt(q.shape[-1]) for j in visible]
        weights = np.exp(np.array(scores) - max(scores))
        weights /= weights.sum()
        out[i] = sum(w * v[j] for w, j in zip(weights, visible))
    return out


@pytest.mark.parametrize("n_new, n_past", [(5, 0), (1, 7), (3, 4)])
def test_attention_matches_a_loop_with_and_without_past(n_new, n_past, rng):
    n_head, d_head = 3, 8
    q = rng.standard_normal((n_head, n_new, d_head)).astype(np.float32)
    k, v = (rng.standard_normal((n_head, n_past + n_new, d_head)).astype(np.float32)
            for _ in range(2))
    n_all = n_past + n_new
    mask = (1 - np.tri(n_new, n_all, k=n_all - n_new, dtype=np.float32)) * -1e10
    out = attention(q, k, v, mask)
    assert out.shape == (n_head, n_new, d_head)
    for h in range(n_head):
        np.testing.assert_allclose(out[h], loop_attention(q[h], k[h], v[h], n_past), atol=1e-5)


def test_attention_after_a_shared_prompt_is_attention_on_the_joined_keys(rng):
    """A row's cache layer that reads a shared prompt attends as if the prompt's keys and values
    were copied in front of its own."""
    n_batch, n_head, n_prompt, n_own, n_new, d_head = 3, 2, 6, 4, 2, 8
    prompt = LayerCache((n_head, n_prompt, d_head), np.float32)
    k_prompt, v_prompt = (rng.standard_normal((n_head, n_prompt, d_head)).astype(np.float32)
                          for _ in range(2))
    prompt.attend(k_prompt[:, :1], k_prompt, v_prompt)  # stores them; its output is not used
    layer = LayerCache((n_batch, n_head, n_own, d_head), np.float32, prompt=prompt)
    k, v = (rng.standard_normal((n_batch, n_head, n_own, d_head)).astype(np.float32)
            for _ in range(2))
    q = rng.standard_normal((n_batch, n_head, n_new, d_head)).astype(np.float32)
    layer.attend(q[:, :, :1], k[:, :, : n_own - n_new], v[:, :, : n_own - n_new])
    out = layer.attend(q, k[:, :, n_own - n_new :], v[:, :, n_own - n_new :])
    assert out.shape == (n_batch, n_head, n_new, d_head)
    assert prompt.n_past == n_prompt and layer.n_past == n_own
    mask = future_mask(n_new, n_prompt + n_own, np.float32)
    for b in range(n_batch):  # each row: its own keys after a copy of the prompt's
        joined_k = np.concatenate([k_prompt, k[b]], axis=-2)
        joined_v = np.concatenate([v_prompt, v[b]], axis=-2)
        np.testing.assert_allclose(out[b], attention(q[b], joined_k, joined_v, mask), atol=1e-6)
        for h in range(n_head):
            np.testing.assert_allclose(out[b, h], loop_attention(q[b, h], joined_k[h], joined_v[h],
                                                                 n_prompt + n_own - n_new),
                                       atol=1e-5)


def test_a_token_never_changes_the_logits_before_it(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(12)
    changed = [*ids[:6], (ids[6] + 1) % 50257, *ids[7:]]
    a = gpt2(np.array(ids), **params, n_head=hparams["n_head"])
    b = gpt2(np.array(changed), **params, n_head=hparams["n_head"])
    np.testing.assert_array_equal(a[:6], b[:6])
    assert np.abs(a[6:] - b[6:]).max() > 1e-3  # and it does change the ones after it


def test_every_intermediate_is_float32(tiny):
    """Catch float64 creeping in (NumPy 2 promotes float32 by any float64 scalar or array)."""
    hparams, params = load(tiny.models_dir)
    seen = []

    def watch(frame, event, arg):  # at each return from model.py, look at its locals and result
        if event == "return" and frame.f_code.co_filename == model_module.__file__:
            for name, value in [*frame.f_locals.items(), ("<return>", arg)]:
                for array in value if isinstance(value, tuple | list) else [value]:
                    if isinstance(array, np.ndarray) and array.dtype.kind == "f":
                        seen.append((frame.f_code.co_name, name, array.dtype))
        return watch

    sys.setprofile(watch)
    try:
        cache = KVCache(params, hparams["n_head"], 6)  # the cached path runs model.py too
        extend(np.array(prompt_ids(5)), params, hparams["n_head"], cache)
        extend(np.array([7]), params, hparams["n_head"], cache)
        gpt2(np.array(prompt_ids(5)), **params, n_head=hparams["n_head"])
    finally:
        sys.setprofile(None)
    functions = {function for function, _, _ in seen}
    assert {"gelu", "softmax", "layer_norm", "attention", "causal_attention", "mha",
            "transformer_block", "gpt2"} <= functions
    assert [s for s in seen if s[2] != np.float32] == []


def float64(params):
    """The same params in float64: runs picogpt's math without float32 rounding."""
    if isinstance(params, dict):
        return {key: float64(value) for key, value in params.items()}
    if isinstance(params, list):
        return [float64(value) for value in params]
    return params.astype(np.float64)


def hf_logits(checkpoint, ids, float64=False) -> np.ndarray:  # [n_seq] -> [n_seq, n_vocab]
    with torch.no_grad():
        return hf_model(checkpoint, float64)(torch.tensor([ids])).logits[0].numpy()


def assert_close_to_reference(logits, checkpoint, ids):
    """picogpt's float32 logits are as near the float64 truth as PyTorch's float32 logits are.

    The sharp test weights push logits to ~12 and amplify float32 rounding: on the 124M shape
    both engines land ~5e-4 from float64 (at GPT-2's init scale, ~3e-6). So the bound is 1e-4 or
    1.5x PyTorch's own float32 error, whichever is larger; a real bug moves logits by ~1e-1.
    """
    truth = hf_logits(checkpoint, ids, float64=True)
    torch_error = np.abs(hf_logits(checkpoint, ids) - truth).max()
    assert np.abs(logits - truth).max() <= max(1e-4, 1.5 * torch_error)


def test_logits_match_transformers(checkpoint):
    hparams, params = load(checkpoint.models_dir)
    ids = prompt_ids(24)
    logits = gpt2(np.array(ids), **params, n_head=hparams["n_head"])
    assert logits.shape == (24, hparams["n_vocab"]) and logits.dtype == np.float32
    assert_close_to_reference(logits, checkpoint, ids)
    # without float32 rounding the two are the same function to the last digits
    exact = gpt2(np.array(ids), **float64(params), n_head=hparams["n_head"])
    np.testing.assert_allclose(exact, hf_logits(checkpoint, ids, float64=True), atol=1e-9, rtol=0)


def test_40_greedy_tokens_match_transformers(checkpoint):
    hparams, params = load(checkpoint.models_dir)
    ids = prompt_ids(8)
    with torch.no_grad():
        out = hf_model(checkpoint).generate(
            torch.tensor([ids]), max_new_tokens=40, do_sample=False, use_cache=True,
            output_logits=True, return_dict_in_generate=True, pad_token_id=50256)
    expected = out.sequences[0, 8:].tolist()
    top2 = np.sort(torch.cat(out.logits).numpy(), axis=-1)[:, -2:]  # [40, 2]
    sequence = out.sequences[0].tolist()
    noise = np.abs(hf_logits(checkpoint, sequence) - hf_logits(checkpoint, sequence, True)).max()
    # the comparison means something only if greedy is never a near-tie within float32 noise
    # and the output is not one token repeated, which a broken cache or position could match
    assert (top2[:, 1] - top2[:, 0]).min() > 10 * noise, "pick another seed in conftest.SEEDS"
    assert len(set(expected)) >= 10, "pick another seed in conftest.SEEDS"
    assert list(generate(ids, params, hparams["n_head"], 40)) == expected


def step_by_step(ids, params, hparams) -> np.ndarray:  # [n_seq] -> [n_seq, n_vocab]
    """Feed ids one at a time through a KV cache, checking what it holds on the way."""
    cache, steps = KVCache(params, hparams["n_head"], len(ids)), []
    d_head = hparams["n_embd"] // hparams["n_head"]
    for i, token in enumerate(ids):
        logits = extend(np.array([token]), params, hparams["n_head"], cache)
        assert logits.shape == (hparams["n_vocab"],)
        assert len(cache.layers) == hparams["n_layer"] and cache.n_past == i + 1
        k, v = cache.layers[0].filled()
        assert k.shape == v.shape == (hparams["n_head"], i + 1, d_head)
        steps.append(logits)
    return np.array(steps)


def test_cache_one_token_at_a_time_gives_the_full_pass_logits(checkpoint):
    hparams, params = load(checkpoint.models_dir)
    ids = prompt_ids(20, seed=5)
    # exact math: cached float64 steps are HF's float64 logits, position by position
    steps64 = step_by_step(ids, float64(params), hparams)
    np.testing.assert_allclose(steps64, hf_logits(checkpoint, ids, float64=True), atol=1e-9,
                               rtol=0)
    # float32: the cache only changes the order of rounding
    steps = step_by_step(ids, params, hparams)
    assert steps.dtype == np.float32
    assert_close_to_reference(steps, checkpoint, ids)
    full = gpt2(np.array(ids), **params, n_head=hparams["n_head"])
    np.testing.assert_allclose(steps, full, atol=2 * np.abs(full - steps64).max(), rtol=0)


def test_the_cache_holds_the_keys_and_values_of_a_full_pass(tiny):
    """What the cache stores is c_attn's k and v of every position, split into heads: the
    values transformers' own cache holds."""
    hparams, params = load(tiny.models_dir)
    ids, n_head = prompt_ids(9, seed=8), hparams["n_head"]
    cache = KVCache(params, n_head, 12)
    extend(np.array(ids), params, n_head, cache)
    model = hf_model(tiny)
    with torch.no_grad():
        past = model(torch.tensor([ids]), use_cache=True).past_key_values
    for i, layer in enumerate(cache.layers):
        k, v = layer.filled()
        hf_k, hf_v = (a[0].numpy() for a in (past.layers[i].keys, past.layers[i].values))
        np.testing.assert_allclose(k, hf_k, atol=1e-5)
        np.testing.assert_allclose(v, hf_v, atol=1e-5)


def test_a_pass_runs_the_last_blocks_mlp_on_the_last_position_alone(tiny, monkeypatch):
    """Only the last position's logits are read, so the last block owes only that position's
    output (the test above holds its cache to every position's keys and values)."""
    hparams, params = load(tiny.models_dir)
    rows, gelu_ = [], fast.gelu_
    monkeypatch.setattr(fast, "gelu_", lambda x: rows.append(x.shape[-2]) or gelu_(x))
    extend(np.array(prompt_ids(9, seed=8)), params, hparams["n_head"],
           KVCache(params, hparams["n_head"], 12))
    assert rows == [9] * (hparams["n_layer"] - 1) + [1]


def test_prefill_then_steps_match_the_full_pass(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(16, seed=9)
    full = gpt2(np.array(ids), **params, n_head=hparams["n_head"])
    cache = KVCache(params, hparams["n_head"], 16)
    logits = extend(np.array(ids[:10]), params, hparams["n_head"], cache)
    np.testing.assert_allclose(logits, full[9], atol=2e-5)
    logits = extend(np.array(ids[10:]), params, hparams["n_head"], cache)
    np.testing.assert_allclose(logits, full[-1], atol=2e-5)
    assert cache.n_past == 16
    # past the room it was made with (a conversation goes on), the cache grows and stays right
    longer = gpt2(np.array([*ids, 1]), **params, n_head=hparams["n_head"])
    logits = extend(np.array([1]), params, hparams["n_head"], cache)
    np.testing.assert_allclose(logits, longer[-1], atol=2e-5)
    assert cache.n_past == 17 and cache.layers[0].k.shape[-2] >= 17


def test_every_row_of_a_batch_equals_the_same_row_alone(checkpoint):
    hparams, params = load(checkpoint.models_dir)
    n_head = hparams["n_head"]
    rows = np.array([prompt_ids(10, seed=s) for s in range(4)])  # [4, 10]
    batch = gpt2(rows, **params, n_head=n_head)
    assert batch.shape == (4, 10, hparams["n_vocab"])
    alone = [gpt2(row, **params, n_head=n_head) for row in rows]
    # the tolerance is the float32 noise of one row computed two ways (batched matrix products
    # round in another order), measured here against the float64 truth
    noise = np.abs(alone[0] - gpt2(rows[0], **float64(params), n_head=n_head)).max()
    for row, logits in zip(batch, alone):
        np.testing.assert_allclose(row, logits, atol=max(1e-5, 2 * noise), rtol=0)


@pytest.mark.parametrize("shared", [False, True], ids=["cache", "shared_prompt"])
def test_cached_decode_of_four_samples_equals_each_sample_alone(checkpoint, shared):
    """Four samples continue one prompt, whose cache every row extends, or which every row
    reads from a shared prompt cache while its own cache holds only its own positions. Two
    samples are then dropped, as generate drops finished ones, and the others go on."""
    hparams, params = load(checkpoint.models_dir)
    n_head = hparams["n_head"]
    prompt = prompt_ids(7, seed=11)
    continuations = np.array([prompt_ids(5, seed=20 + s) for s in range(4)])  # [4, 5]
    before = []  # the shared prompt's keys and values, to check they are never written
    if shared:
        prompt_cache = KVCache(params, n_head, 7)
        extend(np.array(prompt), params, n_head, prompt_cache)
        before = [tuple(a.copy() for a in layer.filled()) for layer in prompt_cache.layers]
        cache = KVCache(params, n_head, 5, batch=(4,), prompt=prompt_cache)
    else:
        cache = KVCache(params, n_head, 12, batch=(4,))
        extend(np.array([prompt] * 4), params, n_head, cache)
    steps, rows = [], [0, 1, 2, 3]
    for j, column in enumerate(continuations.T):  # one token for each sample per step
        if j == 3:
            rows = [1, 3]  # samples 0 and 2 end here
            cache.keep(rows)
        logits = extend(column[rows, None], params, n_head, cache)
        assert logits.shape == (len(rows), hparams["n_vocab"])
        steps.append(dict(zip(rows, logits)))
    assert cache.n_past == 12
    assert cache.layers[0].filled()[0].shape[:2] == (2, n_head)
    for layer, (k0, v0) in zip(prompt_cache.layers if shared else [], before):
        assert all(np.array_equal(a, b) for a, b in zip(layer.filled(), (k0, v0)))
    params64 = float64(params)  # once: a float64 copy of the 124M shape is ~1 GB
    for s, row in enumerate(continuations):
        sample = np.array([step[s] for step in steps if s in step])
        full = gpt2(np.array([*prompt, *row]), **params, n_head=n_head)[7 : 7 + len(sample)]
        exact = gpt2(np.array([*prompt, *row]), **params64, n_head=n_head)[7:]
        noise = np.abs(full - exact[: len(sample)]).max()
        # against the float64 truth: a few rows are multiplied row by row (fast.product), which
        # sums in another order than the full pass and rounds up to ~2.5x as far from the truth
        # (124M shape: 1.6e-4 against 6.6e-5); a wrong row or position is off by far more
        np.testing.assert_allclose(sample, exact[: len(sample)], atol=max(1e-5, 4 * noise),
                                   rtol=0)


# ---- model.py is the tutorial's core -------------------------------------------------------

def walkthrough_functions():
    """transformer_block and gpt2 as seed 001's walk-through of "GPT in 60 lines" writes them
    (docstrings and comments left out), on picogpt.model's mha, ffn and layer_norm."""
    from picogpt.model import ffn, layer_norm, mha

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

    return transformer_block, gpt2


def test_the_walkthroughs_code_runs_unchanged_on_picogpts_functions(checkpoint):
    hparams, params = load(checkpoint.models_dir)
    ids = prompt_ids(16, seed=6)
    _, walkthrough_gpt2 = walkthrough_functions()
    logits = walkthrough_gpt2(ids, **params, n_head=hparams["n_head"])
    assert logits.shape == (16, hparams["n_vocab"]) and logits.dtype == np.float32
    # the same functions in the same order: the same bits as picogpt's own gpt2
    assert np.array_equal(logits, gpt2(np.array(ids), **params, n_head=hparams["n_head"]))
    assert_close_to_reference(logits, checkpoint, ids)


def test_no_function_in_model_py_takes_or_returns_a_cache():
    import ast
    import inspect

    source = inspect.getsource(model_module)
    tree = ast.parse(source)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert {"gelu", "softmax", "layer_norm", "linear", "ffn", "attention", "mha",
            "transformer_block", "gpt2"} <= {f.name for f in functions}
    for function in functions:
        assert function.args.vararg is None and function.args.kwarg is None, function.name
        names = [a.arg for a in function.args.args + function.args.kwonlyargs]
        cache_like = [name for name in names
                      if any(word in name.lower() for word in ("cache", "kv", "past", "prompt"))]
        assert cache_like == [], f"{function.name} takes {cache_like}"
        assert not any(isinstance(node, ast.Tuple) for ret in ast.walk(function)
                       if isinstance(ret, ast.Return) for node in [ret.value]), function.name
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert [alias.name for node in imports for alias in node.names] == ["numpy"]
    assert len(source.splitlines()) <= 120


def test_tutorial_signatures_return_arrays(tiny, rng):
    """mha and transformer_block return [n_seq, n_embd] arrays, so `x = x + mha(...)` works."""
    from picogpt.model import ffn, linear, mha, transformer_block

    hparams, params = load(tiny.models_dir)
    block, n_head = params["blocks"][0], hparams["n_head"]
    x = rng.standard_normal((2, 5, hparams["n_embd"])).astype(np.float32)
    for out in (mha(x[0], **block["attn"], n_head=n_head),
                transformer_block(x[0], **block, n_head=n_head), ffn(x[0], **block["mlp"]),
                linear(x[0], **block["attn"]["c_proj"])):
        assert isinstance(out, np.ndarray) and out.shape == (5, hparams["n_embd"])
    batched = mha(x, **block["attn"], n_head=n_head)  # leading batch dimensions pass through
    assert batched.shape == (2, 5, hparams["n_embd"])
    np.testing.assert_allclose(batched[1], mha(x[1], **block["attn"], n_head=n_head), atol=1e-6)
