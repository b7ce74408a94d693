"""The decode loop, the sampling filters and the samplers."""

import importlib
import inspect

import numpy as np
import pytest
import torch
from conftest import hf_model
from test_model import float64, load, prompt_ids
from transformers.generation.logits_process import (
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from picogpt import PicoGPTError, generate, gpt2, softmax
from picogpt.encoder import END_OF_TEXT
from picogpt.generate import decode_samples, generate_samples, generate_steps
from picogpt.kvcache import CHUNK, FIRST_CHUNK, KVCache, prefill
from picogpt.sampling import (
    Sampling,
    greedy,
    keep_top_k,
    keep_top_p,
    kth_largest,
    penalize_repeats,
    sample_rngs,
)


def hf_filter(warpers, logits, ids=None) -> np.ndarray:  # [n_vocab] -> [n_vocab]
    """Hugging Face's logits processors applied in order to one row, as generate() does."""
    scores = torch.from_numpy(logits[None].copy())
    ids = torch.tensor([ids if ids is not None else [0]])
    for warper in warpers:
        scores = warper(ids, scores)
    return scores[0].numpy()


def random_logits(rng, n: int) -> np.ndarray:
    """Random logits; half of them rounded so that many values tie exactly."""
    logits = rng.standard_normal(n).astype(np.float32) * rng.uniform(0.5, 4)
    return np.round(logits * 2) / 2 if rng.random() < 0.5 else logits


def assert_keeps_what_transformers_keeps(filtered, expected, values) -> bool:
    """picogpt keeps transformers' set; where the cut splits equal values, the whole tie.

    transformers keeps the part of a tie its unstable sort happened to put last; picogpt keeps
    all of it, as top-k does. `values` are the logits the cut was made on. Returns whether the
    cut split a tie.
    """
    kept, hf_kept = np.isfinite(filtered), np.isfinite(expected)
    tie = values == values[hf_kept].min()
    split_tie = not np.all(hf_kept[tie])
    assert np.array_equal(kept, hf_kept | tie if split_tie else hf_kept), (values, expected)
    return split_tie


def assert_top_p_matches_transformers(logits: np.ndarray, p: float) -> bool:
    expected = hf_filter([TopPLogitsWarper(p)], logits)
    return assert_keeps_what_transformers_keeps(keep_top_p(logits, p), expected, logits)


def test_top_p_keeps_the_tokens_transformers_keeps_on_random_logits():
    rng = np.random.default_rng(0)
    n_split_ties = 0
    for _ in range(1500):
        logits = random_logits(rng, int(rng.integers(2, 400)))
        # half the p values sit 1e-5 either side of a cut: 1 - the mass of the j least likely
        # tokens. Nearer than that, float32 rounding (which differs between NumPy and torch)
        # decides; exact cuts are tested below with probabilities both compute exactly.
        tail = np.cumsum(softmax(np.sort(logits).astype(np.float64)))
        p = 1 - tail[rng.integers(len(tail))] + rng.choice([-1e-5, 1e-5])
        p = p if rng.random() < 0.5 and 0 < p <= 1 else rng.uniform(0.01, 1)
        n_split_ties += assert_top_p_matches_transformers(logits, p)
    assert n_split_ties > 10  # ties at the cut were among the cases


def test_top_p_on_an_exact_boundary_keeps_the_token_that_reaches_p():
    # logits 0, -ln 2, -2 ln 2, ...: probabilities 1/2, 1/4, 1/8 ... that NumPy and torch both
    # compute exactly, so p can sit exactly on each cut. The last two share 1/2**n.
    rng = np.random.default_rng(4)
    for n in range(2, 10):
        levels = np.array([*range(n), n - 1])  # exponents; exp sum is 2 exactly
        logits = (-levels * np.log(2)).astype(np.float32)
        probs = 0.5 ** (levels + 1)
        assert np.array_equal(softmax(logits), probs)  # the premise: exact in both
        assert np.array_equal(torch.from_numpy(logits).softmax(-1).numpy(), probs)
        order = rng.permutation(n + 1)
        for m in range(1, n):  # p = the mass of the m most likely tokens, exactly
            p = float(np.sum(probs[:m]))
            assert not assert_top_p_matches_transformers(logits[order], p)
            assert np.isfinite(keep_top_p(logits[order], p)).sum() == m  # not m + 1
            just_above = np.isfinite(keep_top_p(logits[order], p + 1e-7)).sum()
            assert just_above == (m + 1 if m + 1 < n else n + 1)  # the last two are a tie


def test_temperature_top_k_top_p_chained_match_transformers_warpers():
    rng = np.random.default_rng(1)
    for _ in range(300):
        logits = random_logits(rng, int(rng.integers(5, 300)))
        t, k, p = rng.uniform(0.3, 2.0), int(rng.integers(1, len(logits) + 1)), rng.uniform()
        expected = hf_filter([TemperatureLogitsWarper(t), TopKLogitsWarper(k),
                              TopPLogitsWarper(p)], logits)
        filtered = Sampling(top_k=k, top_p=p, temperature=t).filter(logits, None)
        assert_keeps_what_transformers_keeps(filtered, expected, logits / np.float32(t))
        both = np.isfinite(filtered) & np.isfinite(expected)  # the values kept: same scaling
        np.testing.assert_allclose(filtered[both], expected[both], rtol=1e-6)


def chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    return float(np.sum((counts - probs * counts.sum()) ** 2 / (probs * counts.sum())))


def chi_square_limit(df: int, z: float = 3.29) -> float:
    """Wilson-Hilferty: the chi-square value a fit passes with probability ~0.9995."""
    return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


def test_sampled_frequencies_follow_the_filtered_distribution():
    # 40 logits whose top tokens are well apart, so one token more or less moves a lot of mass
    logits = np.linspace(3, -5, 40).astype(np.float32)
    sampling = Sampling(top_k=10, top_p=0.8, temperature=0.9)
    filtered = sampling.filter(logits, None)
    kept = np.flatnonzero(np.isfinite(filtered))
    rng = np.random.default_rng(2)
    draws = np.array([sampling.pick(filtered, rng) for _ in range(20000)])
    assert set(draws) <= set(kept)
    counts = np.array([np.sum(draws == i) for i in kept])
    probs = softmax(filtered[kept].astype(np.float64))
    assert chi_square(counts, probs) < chi_square_limit(len(kept) - 1)
    # the same draws reject a filter that keeps one token fewer (one more would be drawn)
    fewer = softmax(filtered[kept[:-1]].astype(np.float64))
    assert chi_square(counts[:-1], fewer) > chi_square_limit(len(kept) - 2) or counts[-1] > 0
    assert counts[-1] > 100


def test_repetition_penalty_matches_transformers():
    rng = np.random.default_rng(3)
    for penalty in (0.5, 1.2, 2.0):
        for _ in range(50):
            logits = rng.standard_normal(500).astype(np.float32) * 3
            history = rng.integers(0, 500, rng.integers(1, 40)).tolist()  # with repeats
            seen = np.zeros(500, bool)
            seen[history] = True
            expected = hf_filter([RepetitionPenaltyLogitsProcessor(penalty)], logits, history)
            np.testing.assert_array_equal(penalize_repeats(logits, seen, penalty), expected)


def test_the_kth_largest_found_among_a_sample_of_the_row_is_partitions():
    """kth_largest looks for the k-th largest logit among those at or above a floor taken from
    every STRIDE-th one: on vocabulary-sized rows, with ties at the cut, -inf (a constraint's
    mask), rows sorted so the sample holds the smallest values, and k up to the row's length,
    it is the value np.partition finds, and top-k keeps what that value keeps."""
    rng = np.random.default_rng(4)
    rows = [np.round(rng.standard_normal((3, 50257)) * 2).astype(np.float32),  # many ties
            rng.standard_normal((2, 1, 50257)).astype(np.float32) * 4,
            np.sort(rng.standard_normal(50257).astype(np.float32)),  # ascending
            np.where(rng.random(50257) < 0.999, -np.inf, 1).astype(np.float32)]  # ~50 left
    for values in rows:
        for k in (1, 2, 40, 50, 783, 3000, 50257):
            expected = np.partition(values, -k, axis=-1)[..., -k, None]
            np.testing.assert_array_equal(kth_largest(values, k), expected)
            kept = np.where(values < expected, -np.inf, values)
            np.testing.assert_array_equal(keep_top_k(values, k), kept)


def test_greedy_picks_as_torch_argmax_does_among_ties():
    """Logits rounded so that the top value is often tied: the first of them, as
    transformers' greedy search (torch.argmax) picks; without a tie, top_k=1 sampling picks the
    same (with one, top-k keeps every tied token, as the filter documents)."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        logits = np.round(rng.standard_normal(int(rng.integers(2, 400))) * 1.5).astype(np.float32)
        expected = int(torch.argmax(torch.from_numpy(logits)))
        assert greedy(logits) == expected
        if np.sum(logits == logits.max()) == 1:
            top_1 = Sampling(top_k=1)
            assert top_1.pick(top_1.filter(logits, None), rng) == expected


def test_each_sample_has_its_own_generator_made_from_the_seed_and_its_number():
    """Sample i draws from numpy's generator seeded with [seed, i] (what the README promises,
    so a sample is the same in a batch of any size); no seed means fresh entropy each run."""
    for seed in (0, 3, 2**40):
        for n in (1, 2, 5):
            for i, rng in enumerate(sample_rngs(seed, n)):
                assert np.array_equal(rng.random(8), np.random.default_rng([seed, i]).random(8))
    first, second = sample_rngs(None, 2), sample_rngs(None, 2)
    assert not np.array_equal(first[0].random(8), second[0].random(8))
    assert not np.array_equal(first[1].random(8), second[1].random(8))


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
    (100, {"n_tokens": 29}, "prompt is 100 tokens; with n_tokens=29 that passes the model's limit "
                            "of 128 tokens"),
    (5, {"n_tokens": -1}, "n_tokens=-1 is not a whole number from 0 up"),
    (5, {"n_tokens": 2.5}, "n_tokens=2.5"),
    (5, {"top_k": 0}, "top_k=0"),
    (5, {"top_k": 50258}, "top_k=50258"),
    (5, {"top_k": 3, "temperature": 0}, "temperature=0"),
    (5, {"temperature": -1.0}, "temperature=-1.0"),
    (5, {"temperature": "hot"}, "temperature='hot'"),
    (5, {"top_p": 0}, "top_p=0 must be a number above 0 and at most 1"),
    (5, {"top_p": 1.5}, "top_p=1.5"),
    (5, {"repetition_penalty": 0}, "repetition_penalty=0 must be a number above 0"),
    # float32 of 1e-300 is 0: the logits would become inf and the probabilities NaN
    (5, {"top_k": 3, "temperature": 1e-300}, "temperature=1e-300 is too small: below 1e-06"),
    (5, {"repetition_penalty": 1e-300}, "repetition_penalty=1e-300 is too small"),
    (5, {"top_k": 3, "temperature": 1e300}, "temperature=1e+300 must be a number above 0 and at "
                                            "most 1e+06"),
    (5, {"n_samples": 0}, "n_samples=0 is not a whole number from 1 up"),
    (5, {"stop": ""}, "stop='' is not a non-empty text"),
    (5, {"stop": "x"}, "stop needs encoder="),
    (5, {"candidates": -2}, "candidates=-2 is not a whole number from 1 up"),
])
def test_settings_the_model_cannot_honour_are_refused(tiny, n_prompt, settings, message):
    hparams, params = load(tiny.models_dir)
    settings = {"n_tokens": 3, **settings}
    function = (generate_samples if "n_samples" in settings else
                generate_steps if "candidates" in settings else generate)
    with pytest.raises(PicoGPTError) as error:  # at the call, before any token is asked for
        function(prompt_ids(n_prompt), params, hparams["n_head"], **settings)
    assert message in str(error.value)


def test_feeding_a_prompt_in_chunks_is_the_same_as_one_pass(tiny):
    hparams, params = load(tiny.models_dir)
    params64 = float64(params)  # exact arithmetic: chunking changes only the rounding order
    ids = prompt_ids(23)
    full = gpt2(np.array(ids), **params64, n_head=hparams["n_head"])
    for chunk in (1, 5, 23, 128):
        cache = KVCache(params64, hparams["n_head"], 23)
        logits = prefill(ids, params64, hparams["n_head"], cache, chunk=chunk)
        np.testing.assert_allclose(logits, full[-1], atol=1e-9, rtol=0)
        assert cache.n_past == 23


def test_the_first_chunk_is_larger_and_the_passes_give_one_pass_logits(tiny_end, monkeypatch):
    hparams, params = load(tiny_end.models_dir)  # n_ctx 4096: room for several chunks
    params64 = float64(params)
    ids = prompt_ids(FIRST_CHUNK + 2 * CHUNK + 9, seed=5)
    kvcache = importlib.import_module("picogpt.kvcache")
    passes = []  # (position, positions) of each pass prefill makes
    real_extend = kvcache.extend
    def recording_extend(inputs, params, n_head, cache):
        passes.append((cache.n_past, inputs.shape[-1]))
        return real_extend(inputs, params, n_head, cache)

    monkeypatch.setattr(kvcache, "extend", recording_extend)
    cache = KVCache(params64, hparams["n_head"], len(ids))
    logits = prefill(ids, params64, hparams["n_head"], cache)
    assert passes == [(0, FIRST_CHUNK), (FIRST_CHUNK, CHUNK), (FIRST_CHUNK + CHUNK, CHUNK),
                      (FIRST_CHUNK + 2 * CHUNK, 9)]
    full = gpt2(np.array(ids), **params64, n_head=hparams["n_head"])
    np.testing.assert_allclose(logits, full[-1], atol=1e-9, rtol=0)
    assert cache.n_past == len(ids)


def test_a_prompt_longer_than_a_chunk_gives_transformers_greedy_tokens(gpt2_124m):
    hparams, params = load(gpt2_124m.models_dir)
    n_prompt = FIRST_CHUNK + CHUNK + 44  # three passes, of two sizes
    ids = prompt_ids(n_prompt, seed=4)
    with torch.no_grad():
        out = hf_model(gpt2_124m).generate(torch.tensor([ids]), max_new_tokens=12,
                                           do_sample=False, pad_token_id=50256)
    assert list(generate(ids, params, hparams["n_head"], 12)) == out[0, n_prompt:].tolist()


def test_the_context_can_be_filled_exactly(tiny):
    hparams, params = load(tiny.models_dir)
    out = list(generate(prompt_ids(120), params, hparams["n_head"], 8))  # 128 = n_ctx
    assert len(out) == 8


def draw(ids, params, n_head, n_tokens, **settings) -> list[list[int]]:
    """Each sample's ids from generate_samples."""
    samples = [[] for _ in range(settings["n_samples"])]
    for i, token in generate_samples(ids, params, n_head, n_tokens, **settings):
        samples[i].append(token)
    return samples


def test_samples_drawn_in_a_batch_equal_the_same_samples_drawn_alone(tiny):
    hparams, params = load(tiny.models_dir)
    ids, n_head = prompt_ids(6), hparams["n_head"]
    settings = {"top_k": 200, "top_p": 0.95, "seed": 3, "repetition_penalty": 1.3}
    batch = draw(ids, params, n_head, 16, n_samples=4, **settings)
    assert len({tuple(s) for s in batch}) == 4 and all(len(s) == 16 for s in batch)
    assert draw(ids, params, n_head, 16, n_samples=2, **settings) == batch[:2]
    assert list(generate(ids, params, n_head, 16, **settings)) == batch[0]
    sampling = Sampling(200, 0.95, 1.0, 1.3)
    for i in range(4):  # sample i alone: its own generator, from (seed, i)
        alone = decode_samples(ids, params, n_head, 16, sampling, [sample_rngs(3, 4)[i]])
        assert [token for _, token in alone] == batch[i]
    assert draw(ids, params, n_head, 16, n_samples=4, **settings) == batch  # every run


def test_a_sample_ends_at_end_of_text_unless_told_to_go_on(tiny_end):
    hparams, params = load(tiny_end.models_dir)
    ids, step = tiny_end.prompt_ids, tiny_end.end_step
    on = list(generate(ids, params, hparams["n_head"], 12, stop_at_end=False))
    assert len(on) == 12 and on[step] == END_OF_TEXT and END_OF_TEXT not in on[:step]
    assert list(generate(ids, params, hparams["n_head"], 12)) == on[:step]
    # the swap changed nothing before the end: the original weights give the same tokens
    _, original = load_original(tiny_end)
    before = list(generate(ids, original, hparams["n_head"], step + 1, stop_at_end=False))
    assert before == [*on[:step], tiny_end.replaced]


def load_original(tiny_end):
    """The tiny_end weights before the swap, from the arrays the checkpoint was made from."""
    from picogpt.files.openai import nest

    arrays = dict(np.load(tiny_end.reference))
    wte = arrays["model/wte"].copy()
    pair = [tiny_end.replaced, END_OF_TEXT]
    wte[pair] = wte[pair[::-1]]
    arrays["model/wte"] = wte
    return None, nest({name.removeprefix("model/").replace("/", "."): a[0] if a.ndim == 3 else a
                       for name, a in arrays.items()})


def test_finished_samples_leave_the_batch(tiny_end, monkeypatch):
    hparams, params = load(tiny_end.models_dir)
    batch_sizes = []

    generate_module = importlib.import_module("picogpt.kvcache")  # GPT-2's engine's step
    real_step = generate_module.decode_step

    def counting_step(inputs, *args):  # the decode steps' passes (the prompt goes by prefill)
        batch_sizes.append(np.shape(inputs)[0])
        return real_step(inputs, *args)

    monkeypatch.setattr(generate_module, "decode_step", counting_step)
    samples = draw(tiny_end.prompt_ids, params, hparams["n_head"], 12, n_samples=6, top_k=3,
                   seed=0)
    lengths = [len(sample) for sample in samples]
    assert min(lengths) < 12 and max(lengths) == 12  # some ended at <|endoftext|>, some not
    # the pass after step j computes step j + 1 for exactly the samples that are still running
    assert batch_sizes == [sum(n > j for n in lengths) for j in range(11)]


@pytest.mark.parametrize("penalty", [1.0, 1.3])
def test_samples_that_outlive_others_equal_themselves_drawn_alone(tiny_end, penalty):
    """When samples end and leave the batch, the rows kept (cache, penalty memory, generator)
    are those of the samples still running: each one equals the same sample drawn alone."""
    hparams, params = load(tiny_end.models_dir)
    ids, n_head = tiny_end.prompt_ids, hparams["n_head"]
    # top-k 5, seed 0: samples end after 1, 3, 5 and 7 tokens, among survivors whose
    # histories differ, so a row of another sample kept by mistake changes what follows
    settings = {"top_k": 5, "seed": 0, "repetition_penalty": penalty}
    batch = draw(ids, params, n_head, 12, n_samples=6, **settings)
    lengths = [len(sample) for sample in batch]
    assert len({n for n in lengths if n < 12}) >= 3 and max(lengths) == 12
    sampling = Sampling(5, None, 1.0, penalty)
    for i, sample in enumerate(batch):  # sample i alone: its own generator, from (seed, i)
        alone = decode_samples(ids, params, n_head, 12, sampling, [sample_rngs(0, 6)[i]])
        assert [token for _, token in alone] == sample


def test_stop_text_across_two_tokens_ends_the_sample(tiny_end, vocab_dir):
    from picogpt.files.openai import read_encoder

    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny_end.models_dir)
    ids = tiny_end.prompt_ids
    out = list(generate(ids, params, hparams["n_head"], 12, stop_at_end=False))
    first, second = encoder.decode(out[1:2]), encoder.decode(out[2:3])
    stop = first[-2:] + second[:2]  # spans the boundary between tokens 1 and 2
    assert stop not in encoder.decode(out[:2]) and stop in encoder.decode(out[:3])
    got = list(generate(ids, params, hparams["n_head"], 12, stop=stop, encoder=encoder))
    assert got == out[:3]  # the token that completes the stop text is the last one


@pytest.mark.parametrize("n_samples", [1, 3])
def test_generation_allocates_each_cache_once(tiny_end, monkeypatch, n_samples):
    """The caches are made with room for the whole run, so neither feeding a prompt longer
    than a chunk nor decoding ever allocates keys and values again (a second buffer would hold
    two caches at once: the peak memory after a long prompt)."""
    hparams, params = load(tiny_end.models_dir)  # n_ctx 4096
    kvcache = importlib.import_module("picogpt.kvcache")
    made = []
    real_init = kvcache.KVCache.__init__
    def recording_init(self, params, n_head, n_positions, batch=(), prompt=None):
        made.append((n_positions, batch, prompt is not None))
        real_init(self, params, n_head, n_positions, batch, prompt)

    monkeypatch.setattr(kvcache.KVCache, "__init__", recording_init)
    ids = prompt_ids(2 * CHUNK + 5, seed=4)
    out = list(generate_samples(ids, params, hparams["n_head"], 6, n_samples=n_samples,
                                top_k=5, seed=1, stop_at_end=False))
    assert len(out) == 6 * n_samples
    if n_samples == 1:  # one cache with room for the prompt and every new token
        assert made == [(len(ids) + 6, (1,), False)]
    else:  # the prompt's, then one row per sample for the new tokens only
        assert made == [(len(ids), (), False), (6, (n_samples,), True)]


def test_each_samples_stop_text_is_found_in_its_own_text_after_others_end(tiny_end, vocab_dir):
    """Samples that diverge and end at different steps, each at the first token whose text
    completes the stop text: checked on each sample's own decoded text, and against the same
    sample drawn alone. A stop buffer read through the wrong batch row after a sample leaves
    would end the others at the wrong token."""
    from picogpt.files.openai import read_encoder

    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny_end.models_dir)
    ids, stop = tiny_end.prompt_ids, "er"
    settings = {"top_k": 20, "seed": 1, "stop": stop, "encoder": encoder, "stop_at_end": False}
    batch = draw(ids, params, hparams["n_head"], 12, n_samples=6, **settings)
    lengths = [len(sample) for sample in batch]
    assert len({n for n in lengths if n < 12}) >= 3 and max(lengths) == 12, lengths
    for sample in batch:
        text = encoder.decode(sample)
        assert stop not in encoder.decode(sample[:-1])  # it ran no further than its stop
        assert stop in text or len(sample) == 12  # and ended there, unless it ran out
    sampling = Sampling(20, None, 1.0, 1.0)
    for i, sample in enumerate(batch):
        alone = decode_samples(ids, params, hparams["n_head"], 12, sampling,
                               [sample_rngs(1, 6)[i]], False, stop.encode(), encoder)
        assert [token for _, token in alone] == sample


def test_repetition_penalty_over_many_steps_equals_transformers_greedy_and_sampled(tiny):
    """The penalty with greedy decoding (no top_k: a penalty only applied when sampling would
    pass every other test) gives transformers' 40 tokens; when sampling, every step's filtered
    distribution equals the one transformers' processors make from its own logits of the same
    text."""
    hparams, params = load(tiny.models_dir)
    model, ids = hf_model(tiny), prompt_ids(6, seed=8)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False,
                             repetition_penalty=1.3, pad_token_id=50256, output_logits=True,
                             return_dict_in_generate=True)
    top2 = np.sort(torch.cat(out.logits).numpy(), axis=-1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0]).min() > 1e-3  # no near-tie for float32 noise to flip
    expected = out.sequences[0, len(ids):].tolist()
    assert len(set(expected)) >= 20  # the penalty is at work: few repeats
    assert list(generate(ids, params, hparams["n_head"], 40, repetition_penalty=1.3,
                         stop_at_end=False)) == expected
    plain = list(generate(ids, params, hparams["n_head"], 40, stop_at_end=False))
    assert plain != expected  # and it changes the text
    steps = list(generate_steps(ids, params, hparams["n_head"], 20, top_k=50, seed=4,
                                repetition_penalty=1.3, stop_at_end=False, candidates=50))
    text = list(ids)
    for step in steps:
        with torch.no_grad():
            logits = model(torch.tensor([text])).logits[0, -1].numpy()
        processors = [RepetitionPenaltyLogitsProcessor(1.3), TopKLogitsWarper(50)]
        probs = softmax(hf_filter(processors, logits, text).astype(np.float64))
        np.testing.assert_allclose(step.after, probs[step.ids], atol=1e-5)
        text.append(step.token)


def test_a_stop_text_with_a_wordpiece_space_ends_each_of_several_samples(tiny):
    """WordPiece puts the space between two words itself: a stop text that holds one ("w12
    w7") must be found in the sample's text as decode spells it, not in its tokens run
    together ("w12w7")."""
    from picogpt.wordpiece import WordPiece

    hparams, params = load(tiny.models_dir)
    encoder = WordPiece([*(f"w{i}" for i in range(hparams["n_vocab"] - 1)), "[CLS]"])
    ids, settings = prompt_ids(6), {"top_k": 50, "seed": 4, "n_samples": 2}
    free = draw(ids, params, hparams["n_head"], 8, **settings)
    stop = encoder.decode(free[0][2:4])
    assert " " in stop and stop not in encoder.decode(free[0][:3])  # it is new at token 4
    ended = draw(ids, params, hparams["n_head"], 8, stop=stop, encoder=encoder, **settings)
    assert ended[0] == free[0][:4]  # the token that completes the stop text is the last


def test_a_model_that_is_not_gpt2s_size_is_asked_for_its_own_start_and_end_tokens():
    """A 64-token model has no id 50256: generate with no prompt and no encoder, and score with
    no start id, ask for the model's own tokens in one PicoGPTError (they used to index 50256,
    an IndexError); with a prompt and stop_at_end=False, or with the encoder, they run and never
    give an id outside wte. GPT-2's 50,257 rows keep <|endoftext|> as before."""
    from picogpt import score
    from picogpt.train import init_params
    from picogpt.wordpiece import WordPiece

    hparams = {"n_vocab": 64, "n_ctx": 16, "n_embd": 16, "n_head": 2, "n_layer": 1}
    params = init_params(hparams, np.random.default_rng(0))
    for call in (lambda: list(generate([], params, 2, 3)),
                 lambda: list(generate([1, 2], params, 2, 3)),  # it would wait for 50256
                 lambda: score([1, 2, 3], params, 2)):
        with pytest.raises(PicoGPTError, match="has 64 tokens, not GPT-2's 50257") as error:
            call()
        assert "\n" not in str(error.value)
    encoder = WordPiece([*(f"t{i}" for i in range(63)), "[CLS]"])
    made = list(generate([], params, 2, 3, encoder=encoder, top_k=5, seed=0))
    assert all(0 <= i < 64 for i in made)
    assert len(list(generate([1, 2], params, 2, 3, stop_at_end=False))) == 3
    assert score([1, 2, 3], params, 2, start_id=encoder.start).shape == (3,)
    with pytest.raises(PicoGPTError, match="id 64 is not one of the model's 64"):
        score([1, 2, 64], params, 2, start_id=63)
    gpt2_sized = init_params({**hparams, "n_vocab": 50257}, np.random.default_rng(0))
    assert len(score([1, 2, 3], gpt2_sized, 2)) == 3  # after <|endoftext|>, as before


def test_a_wordpiece_stop_text_counts_the_space_the_prompts_last_word_puts_before_it(tiny):
    """The prompt "w3" and the stop text " wN", where wN is the first word generated: WordPiece
    spaces two words apart, so the text after the prompt is " wN" at once and the sample ends
    after one token (generate began without the prompt's last token and wrote "wN", so it went
    on: two tokens or more where one is right). The terminal counts the same way."""
    from picogpt.cli.terminal import stream_text
    from picogpt.wordpiece import WordPiece

    hparams, params = load(tiny.models_dir)
    encoder = WordPiece([*(f"w{i}" for i in range(hparams["n_vocab"] - 1)), "[CLS]"])
    prompt = encoder.encode("w3")
    free = list(generate(prompt, params, hparams["n_head"], 4, stop_at_end=False))
    stop = " " + encoder.decode(free[:1])
    assert "".join(stream_text(free, encoder, after=prompt)).startswith(stop)
    ended = list(generate(prompt, params, hparams["n_head"], 4, stop=stop, encoder=encoder,
                          stop_at_end=False))
    assert ended == free[:1]
