"""The encoder-decoder's inside view (transformer_inside.py): trace_seq2seq against
transformer.py's forward bit for bit and against torch.nn.Transformer's own per-head attention
weights, its masks, and the 对位 score against its definition (fractions written here, a loop
written here, and heads built into a model's weights)."""

from fractions import Fraction

import numpy as np
import pytest
import torch
from test_transformer import (
    BOS,
    N_HEAD,
    PAD,
    padded_ids,
    real,
    torch_causal_mask,
    torch_embed,
    torch_transformer,
    transformer_params,
)

from picogpt.transformer import decode, encode, init_params, logits, padding_mask
from picogpt.transformer.inside import same_position_job, same_position_score, trace_seq2seq


@pytest.mark.parametrize("norm_first", [True, False])
def test_the_trace_is_the_forward_bit_for_bit_with_its_masks_respected(norm_first):
    """Its logits, the decoder's output and the encoder's (the memory) equal transformer.py's;
    every pattern's rows sum to 1; a padded key, and in the decoder a later one, get weight 0
    exactly; the named parts add up as the blocks add them."""
    rng = np.random.default_rng(0)
    model, embedding = torch_transformer(norm_first, seed=3)
    params = transformer_params(model, embedding)
    src, tgt = padded_ids(rng, [5], 8)[0], padded_ids(rng, [4], 6)[0]  # each padded at its end
    tgt[0] = BOS
    hparams = {"n_head": N_HEAD, "norm_first": norm_first}
    got, values = trace_seq2seq(src, tgt, params, hparams, pad_id=PAD)
    memory = encode(src, params, N_HEAD, PAD, norm_first)
    out = decode(tgt, memory, params, N_HEAD, PAD, padding_mask(src, PAD), norm_first)
    np.testing.assert_array_equal(values["encoder.ln_final"], memory)
    np.testing.assert_array_equal(values["decoder.ln_final"], out)
    np.testing.assert_array_equal(got, logits(out, params))
    assert got.shape == (6, len(params["embed"]))
    n_src, n_tgt, d_head = 8, 6, params["embed"].shape[1] // N_HEAD
    for i in range(2):
        enc, dec = f"encoder.blocks.{i}.", f"decoder.blocks.{i}."
        shapes = {f"{enc}attn.pattern": (N_HEAD, n_src, n_src),
                  f"{dec}attn.pattern": (N_HEAD, n_tgt, n_tgt),
                  f"{dec}cross_attn.pattern": (N_HEAD, n_tgt, n_src),
                  f"{dec}cross_attn.q": (N_HEAD, n_tgt, d_head),
                  f"{dec}cross_attn.k": (N_HEAD, n_src, d_head),
                  f"{dec}cross_attn.z": (N_HEAD, n_tgt, d_head)}
        for name, shape in shapes.items():
            assert values[name].shape == shape, name
        for name in (f"{enc}attn.pattern", f"{dec}attn.pattern", f"{dec}cross_attn.pattern"):
            np.testing.assert_allclose(values[name].sum(-1), 1, rtol=1e-6)
        hidden_src = np.broadcast_to(~real(src), (N_HEAD, n_src, n_src))
        assert np.all(values[f"{enc}attn.pattern"][hidden_src] == 0)
        assert np.all(values[f"{dec}cross_attn.pattern"][
            np.broadcast_to(~real(src), (N_HEAD, n_tgt, n_src))] == 0)
        later = np.triu(np.ones((n_tgt, n_tgt), bool), 1) | ~real(tgt)  # later or padded keys
        assert np.all(values[f"{dec}attn.pattern"][:, later] == 0)
        assert np.all(values[f"{dec}attn.pattern"][:, ~later] > 0)
        if norm_first:  # pre-norm: each sublayer's output is added to the stream as it is
            for before, part, after in (("resid_pre", "attn_out", "resid_mid"),
                                        ("resid_mid", "cross_attn_out", "resid_mid_cross"),
                                        ("resid_mid_cross", "mlp_out", "resid_post")):
                np.testing.assert_array_equal(values[dec + before] + values[dec + part],
                                              values[dec + after])
            np.testing.assert_array_equal(values[f"{enc}resid_mid"] + values[f"{enc}mlp_out"],
                                          values[f"{enc}resid_post"])
    for side in ("encoder", "decoder"):
        np.testing.assert_array_equal(values[f"{side}.embed"] + values[f"{side}.pos_embed"],
                                      values[f"{side}.blocks.0.resid_pre"])
    kept = trace_seq2seq(src, tgt, params, hparams, pad_id=PAD,
                         names={"decoder.blocks.1.cross_attn.pattern"})[1]
    assert list(kept) == ["decoder.blocks.1.cross_attn.pattern"]


def torch_attention_weights(model, embedding, src: np.ndarray, tgt: np.ndarray) -> dict:
    """Each attention module of torch.nn.Transformer called again on the inputs and masks the
    model gave it, for its weights per head (the model's own calls ask for none): {name: [n_head,
    n_q, n_k]} under trace_seq2seq's names, and the decoder's output."""
    calls, hooks = {}, []
    layers = ([(f"encoder.blocks.{i}.attn", layer.self_attn)
               for i, layer in enumerate(model.encoder.layers)]
              + [(f"decoder.blocks.{i}.{name}", module)
                 for i, layer in enumerate(model.decoder.layers)
                 for name, module in (("attn", layer.self_attn),
                                      ("cross_attn", layer.multihead_attn))])
    for name, module in layers:
        def seen(module, args, kwargs, name=name):
            calls[name] = (module, args, kwargs)
        hooks.append(module.register_forward_pre_hook(seen, with_kwargs=True))
    try:  # gradients on: torch's inference fast path would skip the modules' own forward
        out = model(torch_embed(embedding, src[None]), torch_embed(embedding, tgt[None]),
                    tgt_mask=torch_causal_mask(len(tgt)),
                    src_key_padding_mask=torch.from_numpy(~real(src[None])),
                    tgt_key_padding_mask=torch.from_numpy(~real(tgt[None])),
                    memory_key_padding_mask=torch.from_numpy(~real(src[None])))
    finally:
        for hook in hooks:
            hook.remove()
    weights = {}
    with torch.no_grad():
        for name, (module, args, kwargs) in calls.items():
            _, weight = module(*args, **{**kwargs, "need_weights": True,
                                         "average_attn_weights": False})
            weights[f"{name}.pattern"] = weight[0].numpy()
    return weights, out[0].detach().numpy()


@pytest.mark.parametrize("norm_first", [True, False])
def test_the_traced_patterns_are_torchs_attention_weights(norm_first):
    """Every pattern of both stacks, head by head, as torch.nn.MultiheadAttention computes it
    inside torch.nn.Transformer on the same weights, ids and masks."""
    rng = np.random.default_rng(1)
    model, embedding = torch_transformer(norm_first, seed=4)
    src, tgt = padded_ids(rng, [6], 7)[0], padded_ids(rng, [5], 5)[0]
    tgt[0] = BOS
    expected, out = torch_attention_weights(model, embedding, src, tgt)
    assert len(expected) == 6  # 2 encoder blocks, 2 decoder blocks with 2 attentions each
    _, values = trace_seq2seq(src, tgt, transformer_params(model, embedding),
                              {"n_head": N_HEAD, "norm_first": norm_first}, pad_id=PAD)
    for name, weight in expected.items():
        assert values[name].shape == weight.shape, name
        np.testing.assert_allclose(values[name], weight, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(values["decoder.ln_final"], out, atol=1e-4)


# ---- 对位 -------------------------------------------------------------------------------------

def test_same_position_is_exact_on_patterns_written_by_hand():
    """Three 上句 characters, so four decoder rows (start, three characters): rows 0 to 2 are
    counted, the end's row 3 is not."""
    aligned = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]], float)  # the end looks last
    halves = np.array([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1, 0]])
    mirror = aligned[[2, 1, 0, 0]]  # row i looks at 2 - i: row 1 alone is on its diagonal
    values = {"decoder.blocks.0.cross_attn.pattern": np.stack([aligned, halves]),
              "decoder.blocks.1.cross_attn.pattern": np.stack([mirror, aligned[[3, 0, 1, 2]]])}
    expected = [[1, float((Fraction(1) + Fraction(1, 2) + Fraction(1, 3)) / 3)], [1 / 3, 0]]
    np.testing.assert_allclose(same_position_score(values), expected, rtol=1e-12)
    assert same_position_score(values).shape == (2, 2)
    values["decoder.blocks.0.cross_attn.pattern"][:, 3] = [[1, 0, 0], [0, 0, 1]]  # the end's row
    np.testing.assert_allclose(same_position_score(values), expected, rtol=1e-12)
    keys, queries = same_position_job(3, 4)
    assert keys.shape == (4, 3) and queries.tolist() == [True, True, True, False]
    with pytest.raises(ValueError, match="one position at least"):
        same_position_job(0, 1)


def test_same_position_equals_a_loop_over_its_definition():
    """Random cross-attention patterns, 上句 of 5 and of 7 characters: row i's weight on column
    i for each row i < n_src, averaged, per block and head, in a loop written here."""
    rng = np.random.default_rng(2)
    for n_src in (5, 7):
        n_tgt = n_src + 1  # the start token and the 下句
        weights = rng.random((3, 4, n_tgt, n_src)) ** 4
        weights /= weights.sum(-1, keepdims=True)
        values = {f"decoder.blocks.{i}.cross_attn.pattern": weights[i] for i in range(3)}
        expected = np.zeros((3, 4))
        for layer in range(3):
            for head in range(4):
                expected[layer, head] = sum(weights[layer, head, i, i]
                                            for i in range(n_src)) / n_src
        np.testing.assert_allclose(same_position_score(values), expected, rtol=1e-12)


def aligned_and_mirror_heads(n_src: int, d_model: int = 32, sharp: float = 60.0) -> dict:
    """A 1 + 1 layer model of two heads whose only work is its cross-attention: token rows of
    zero, so each position is its sinusoid alone, and every other sublayer's output zero. Head 0
    matches query i to key i (sharp times the positions' dot product, largest at the same
    position); head 1 to key n_src - 1 - i (the 上句 backwards: the sinusoid of n_src - 1 - i is
    the sinusoid of i turned by a fixed matrix, each sine and cosine pair reflected), near it
    where the layer norm's centring moves the largest product by a position."""
    hparams = {"n_vocab": 12, "n_embd": d_model, "n_head": 2, "n_layer": 1, "n_dec_layer": 1}
    params = init_params(hparams, np.random.default_rng(0))
    params["embed"][:] = 0
    for block in params["encoder"]["blocks"] + params["decoder"]["blocks"]:
        block["attn"]["c_proj"]["w"][:] = 0
        block["mlp"]["c_proj"]["w"][:] = 0
    d_head = d_model // 2
    first = np.eye(d_model, d_head, dtype=np.float32)  # the fastest d_head / 2 sinusoid pairs
    mirror = np.zeros((d_model, d_model), np.float32)  # sinusoid(i) @ mirror = sinusoid(n - 1 - i)
    for pair in range(d_model // 2):
        angle = (n_src - 1) / 10000 ** (2 * pair / d_model)
        s, c = np.sin(angle), np.cos(angle)
        mirror[2 * pair : 2 * pair + 2, 2 * pair : 2 * pair + 2] = [[-c, s], [s, c]]
    cross = params["decoder"]["blocks"][0]["cross_attn"]
    cross["q"]["w"][:] = np.concatenate([sharp * first, sharp * mirror @ first], axis=1)
    cross["k"]["w"][:] = np.concatenate([first, first], axis=1)
    return hparams, params


def test_a_head_built_to_align_scores_one_and_a_head_built_to_mirror_scores_near_zero():
    n_src = 6
    hparams, params = aligned_and_mirror_heads(n_src)
    _, values = trace_seq2seq(np.arange(n_src), np.arange(n_src + 1), params, hparams)
    pattern = values["decoder.blocks.0.cross_attn.pattern"]
    assert pattern[0, :n_src].argmax(-1).tolist() == list(range(n_src))
    looks_at = pattern[1, :n_src].argmax(-1)  # [5, 5, 3, 2, 1, 0]: backwards, never at i
    assert np.all(looks_at != np.arange(n_src)) and np.all(np.diff(looks_at) <= 0)
    score = same_position_score(values)
    assert score.shape == (1, 2)
    assert score[0, 0] > 0.99 and score[0, 1] < 0.05, score


def test_a_batch_of_pairs_traces_and_scores_each_pair_as_alone():
    """Pairs of one length as a leading dimension (scripts/benchmarks/couplet_heads.py runs
    them so): each row's patterns and 对位 scores are the ones it has alone."""
    hparams = {"n_vocab": 12, "n_embd": 16, "n_head": 2, "n_layer": 1, "n_dec_layer": 2}
    params = init_params(hparams, np.random.default_rng(5))
    rng = np.random.default_rng(6)
    src, tgt = rng.integers(0, 11, (3, 5)), rng.integers(0, 11, (3, 6))
    _, together = trace_seq2seq(src, tgt, params, hparams)
    scores = same_position_score(together)
    assert scores.shape == (2, 3, 2)  # [n_dec_layer, n_pairs, n_head]
    for row in range(3):
        _, alone = trace_seq2seq(src[row], tgt[row], params, hparams)
        for name in ("encoder.blocks.0.attn.pattern", "decoder.blocks.1.cross_attn.pattern"):
            np.testing.assert_allclose(together[name][row], alone[name], atol=1e-6)
        np.testing.assert_allclose(scores[:, row], same_position_score(alone), atol=1e-6)
