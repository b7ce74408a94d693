"""The decode loop and the samplers."""

import inspect

import numpy as np
import pytest
import torch
from conftest import hf_model
from test_model import float64, load, prompt_ids

from picogpt import PicoGPTError, generate, gpt2, softmax
from picogpt.encoder import END_OF_TEXT
from picogpt.generate import feed, greedy, top_k


def test_top_k_draws_only_the_k_best_in_proportion_to_their_probability():
    logits = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    best = np.argsort(logits)[-5:]
    rng = np.random.default_rng(1)
    draws = np.array([top_k(logits, 5, rng) for _ in range(20000)])
    assert set(draws) == set(best.tolist())
    frequency = np.array([np.mean(draws == i) for i in best])
    # 20000 draws: each frequency has a standard error below 0.004
    np.testing.assert_allclose(frequency, softmax(logits[best]), atol=0.015)


def test_top_k_of_one_is_greedy_and_a_seed_repeats():
    logits = np.random.default_rng(2).standard_normal(50257).astype(np.float32)
    assert top_k(logits, 1, np.random.default_rng(3)) == greedy(logits) == int(np.argmax(logits))
    a = [top_k(logits, 40, np.random.default_rng(7)) for _ in range(3)]
    assert len(set(a)) == 1


def test_generate_is_lazy_and_leaves_its_input_alone(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(6)
    kept = list(ids)
    stream = generate(ids, params, hparams["n_head"], 5)
    assert inspect.isgenerator(stream)
    out = list(stream)
    assert len(out) == 5 and all(isinstance(i, int) for i in out)
    assert ids == kept
    assert list(generate(tuple(ids), params, hparams["n_head"], 5)) == out


def test_greedy_generation_follows_the_models_argmax(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(6)
    out = list(generate(ids, params, hparams["n_head"], 8))
    for i, token in enumerate(out):  # each token is the argmax of a plain forward pass
        logits = gpt2(np.array(ids + out[:i]), **params, n_head=hparams["n_head"])
        assert token == int(np.argmax(logits[-1]))


def test_sampling_is_reproducible_with_a_seed_and_varies_without(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(6)

    def sample(seed, **settings):
        return list(generate(ids, params, hparams["n_head"], 20, top_k=50, seed=seed,
                             **settings))

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)
    greedy_ids = list(generate(ids, params, hparams["n_head"], 20))
    assert sample(1) != greedy_ids
    assert sample(1, temperature=1e-4) == greedy_ids  # a tiny temperature leaves only the top


def test_an_empty_prompt_starts_from_end_of_text(tiny):
    hparams, params = load(tiny.models_dir)
    assert (list(generate([], params, hparams["n_head"], 6))
            == list(generate([END_OF_TEXT], params, hparams["n_head"], 6)))


@pytest.mark.parametrize("n_prompt, settings, message", [
    (100, {"n_tokens": 29}, "prompt is 100 tokens; with n_tokens=29 that passes GPT-2's limit "
                            "of 128"),
    (5, {"n_tokens": -1}, "n_tokens=-1"),
    (5, {"n_tokens": 2.5}, "n_tokens=2.5"),
    (5, {"top_k": 0}, "top_k=0"),
    (5, {"top_k": 50258}, "top_k=50258"),
    (5, {"top_k": 3, "temperature": 0}, "temperature=0"),
    (5, {"temperature": -1.0}, "temperature=-1.0"),
    (5, {"temperature": "hot"}, "temperature='hot'"),
])
def test_settings_the_model_cannot_honour_are_refused(tiny, n_prompt, settings, message):
    hparams, params = load(tiny.models_dir)
    settings = {"n_tokens": 3, **settings}
    with pytest.raises(PicoGPTError) as error:  # at the call, before any token is asked for
        generate(prompt_ids(n_prompt), params, hparams["n_head"], **settings)
    assert message in str(error.value)


def test_feeding_a_prompt_in_chunks_is_the_same_as_one_pass(tiny):
    hparams, params = load(tiny.models_dir)
    params64 = float64(params)  # exact arithmetic: chunking changes only the rounding order
    ids = prompt_ids(23)
    full = gpt2(np.array(ids), **params64, n_head=hparams["n_head"])
    for chunk in (1, 5, 23, 128):
        logits, cache = feed(ids, params64, hparams["n_head"], [], chunk=chunk)
        np.testing.assert_allclose(logits, full[-1], atol=1e-9, rtol=0)
        assert cache[0][0].shape == (23, hparams["n_embd"])


def test_a_prompt_longer_than_a_chunk_gives_transformers_greedy_tokens(gpt2_124m):
    hparams, params = load(gpt2_124m.models_dir)
    ids = prompt_ids(300, seed=4)  # three chunks of prefill
    with torch.no_grad():
        out = hf_model(gpt2_124m).generate(torch.tensor([ids]), max_new_tokens=12,
                                           do_sample=False, pad_token_id=50256)
    assert list(generate(ids, params, hparams["n_head"], 12)) == out[0, 300:].tolist()


def test_the_context_can_be_filled_exactly(tiny):
    hparams, params = load(tiny.models_dir)
    out = list(generate(prompt_ids(120), params, hparams["n_head"], 8))  # 128 = n_ctx
    assert len(out) == 8
