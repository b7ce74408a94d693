"""The 2017 Transformer against PyTorch's own torch.nn modules, plus its defining properties.

The converter from torch.nn weights to picogpt.transformer's dicts lives here, because the
package must not import torch.
"""

import math

import numpy as np
import pytest
import torch

from picogpt.transformer import (
    causal_mask,
    decode,
    decoder_layer,
    encode,
    encoder_layer,
    logits,
    multi_head_attention,
    padding_mask,
    sinusoidal_positions,
)
from picogpt.transformer.decoding import write

D_MODEL, N_HEAD, D_FF, N_VOCAB, PAD, BOS, EOS = 32, 4, 64, 24, 0, 1, 2


# ---- torch.nn weights -> picogpt.transformer params ------------------------------------------

def array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().numpy().astype(np.float32)


def linear_params(module: torch.nn.Linear) -> dict:  # torch keeps w as [n_out, n_in]
    return {"w": array(module.weight.T), "b": array(module.bias)}


def norm_params(module: torch.nn.LayerNorm) -> dict:
    return {"g": array(module.weight), "b": array(module.bias)}


def attention_params(module: torch.nn.MultiheadAttention) -> dict:
    """in_proj_weight stacks the query, key and value maps as [3 * d_model, d_model]."""
    w, b = module.in_proj_weight, module.in_proj_bias
    q, k, v = ({"w": array(w_part.T), "b": array(b_part)}
               for w_part, b_part in zip(w.chunk(3), b.chunk(3)))
    return {"q": q, "k": k, "v": v, "c_proj": linear_params(module.out_proj)}


def encoder_layer_params(layer: torch.nn.TransformerEncoderLayer) -> dict:
    return {"attn": attention_params(layer.self_attn), "ln_1": norm_params(layer.norm1),
            "ln_2": norm_params(layer.norm2),
            "mlp": {"c_fc": linear_params(layer.linear1), "c_proj": linear_params(layer.linear2)}}


def decoder_layer_params(layer: torch.nn.TransformerDecoderLayer) -> dict:
    return {"attn": attention_params(layer.self_attn),
            "cross_attn": attention_params(layer.multihead_attn),
            "ln_1": norm_params(layer.norm1), "ln_2": norm_params(layer.norm2),
            "ln_3": norm_params(layer.norm3),
            "mlp": {"c_fc": linear_params(layer.linear1), "c_proj": linear_params(layer.linear2)}}


def transformer_params(model: torch.nn.Transformer, embedding: torch.nn.Embedding) -> dict:
    return {"embed": array(embedding.weight),
            "encoder": {"blocks": [encoder_layer_params(layer) for layer in model.encoder.layers],
                        "ln_f": norm_params(model.encoder.norm)},
            "decoder": {"blocks": [decoder_layer_params(layer) for layer in model.decoder.layers],
                        "ln_f": norm_params(model.decoder.norm)}}


# ---- references built in the tests ----------------------------------------------------------

def randomize(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every weight random, layer-norm gains near 1 and biases non-zero (torch starts at 1, 0)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            is_gain = "norm" in name and name.endswith("weight")
            param.copy_(1 + 0.2 * noise if is_gain else 0.3 * noise)
    return module.eval()


def torch_transformer(norm_first: bool, seed: int = 0):
    model = torch.nn.Transformer(D_MODEL, N_HEAD, num_encoder_layers=2, num_decoder_layers=2,
                                 dim_feedforward=D_FF, dropout=0.0, activation="relu",
                                 batch_first=True, norm_first=norm_first)
    return randomize(model, seed), randomize(torch.nn.Embedding(N_VOCAB, D_MODEL), seed + 1)


def positions64(n_pos: int, d_model: int) -> np.ndarray:
    """The paper's formula, one element at a time in float64."""
    return np.array([[math.sin(pos / 10000 ** (i / d_model)) if i % 2 == 0 else
                      math.cos(pos / 10000 ** ((i - 1) / d_model)) for i in range(d_model)]
                     for pos in range(n_pos)])


def torch_embed(embedding: torch.nn.Embedding, ids: np.ndarray) -> torch.Tensor:
    """What the paper feeds the stacks: embedding * sqrt(d_model) + positions."""
    pe = torch.tensor(positions64(ids.shape[-1], D_MODEL), dtype=torch.float32)
    return embedding(torch.from_numpy(ids)) * math.sqrt(D_MODEL) + pe


def padded_ids(rng, lengths: list[int], n: int) -> np.ndarray:  # -> [len(lengths), n]
    ids = rng.integers(3, N_VOCAB, (len(lengths), n))
    for row, length in zip(ids, lengths):
        row[length:] = PAD
    return ids


def real(ids: np.ndarray) -> np.ndarray:
    return ids != PAD


# ---- tests ----------------------------------------------------------------------------------

def test_the_base_keyword_reproduces_a_table_with_base_100():
    """happy-llm's (seed 000) PositionEncoding(seq_len=4, d_model=4, n=100) table, computed
    here from the formula with math.sin and math.cos."""
    expected = [[f(pos / 100 ** (2 * i / 4)) for i in range(2) for f in (math.sin, math.cos)]
                for pos in range(4)]
    pe = sinusoidal_positions(4, 4, base=100.0)
    np.testing.assert_allclose(pe, expected, atol=1e-6)  # float32
    np.testing.assert_allclose(pe[1], [0.84147098, 0.54030231, 0.09983342, 0.99500417],
                               atol=1e-6)  # the row the seed prints for pos 1
    assert not np.allclose(sinusoidal_positions(4, 4), pe)  # the default is the paper's 10000


@pytest.mark.parametrize("n_pos, d_model", [(1, 2), (17, 6), (60, 32), (300, 128)])
def test_sinusoidal_positions_follow_the_formula_and_depend_on_distance_only(n_pos, d_model):
    pe = sinusoidal_positions(n_pos, d_model)
    assert pe.shape == (n_pos, d_model) and pe.dtype == np.float32
    np.testing.assert_allclose(pe, positions64(n_pos, d_model), atol=1e-6, rtol=0)
    assert np.abs(pe).max() <= 1  # bounded, unit-free
    np.testing.assert_allclose(np.sum(pe * pe, axis=-1), d_model / 2, rtol=1e-5)  # sin2 + cos2
    dots = pe @ pe.T  # [n_pos, n_pos]: each diagonal (one distance) holds one value
    for shift in range(min(n_pos, 8)):
        np.testing.assert_allclose(np.diagonal(dots, shift), dots[0, shift], atol=2e-4)


def test_masks_are_float32_and_combine_by_adding():
    ids = np.array([[5, 6, PAD], [7, PAD, PAD]])
    pad = padding_mask(ids, PAD)
    assert pad.shape == (2, 1, 3) and pad.dtype == np.float32
    assert np.array_equal(pad[:, 0] < 0, ids == PAD)
    both = pad + causal_mask(3)  # [2, 3, 3]
    assert both.dtype == np.float32 and both.shape == (2, 3, 3)
    allowed = both == 0
    assert np.array_equal(allowed[0], [[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    assert np.array_equal(allowed[1], [[1, 0, 0], [1, 0, 0], [1, 0, 0]])


def torch_causal_mask(n: int) -> torch.Tensor:  # [n, n], -inf above the diagonal
    """torch's own causal mask for its Transformer, independent of picogpt's causal_mask."""
    return torch.nn.Transformer.generate_square_subsequent_mask(n)


def test_causal_mask_hides_what_torchs_mask_hides():
    for n in (1, 2, 7):
        np.testing.assert_array_equal(causal_mask(n) < 0, torch_causal_mask(n).numpy() < 0)
        assert causal_mask(n).dtype == np.float32


@pytest.mark.parametrize("n_q, n_k, causal", [(6, 6, True), (4, 7, False)])
def test_multi_head_attention_equals_torch(n_q, n_k, causal):
    rng = np.random.default_rng(0)
    module = randomize(torch.nn.MultiheadAttention(D_MODEL, N_HEAD, batch_first=True), 3)
    x = rng.standard_normal((3, n_q, D_MODEL)).astype(np.float32)
    memory = x if causal else rng.standard_normal((3, n_k, D_MODEL)).astype(np.float32)
    key_ids = padded_ids(rng, [n_k, n_k - 2, 3], n_k)
    attn_mask = (causal_mask(n_q) if causal else  # cross: a fixed pattern, key 0 always open
                 np.where(rng.random((n_q, n_k)) < 0.3, np.float32(-1e10), np.float32(0)))
    attn_mask[:, 0] = 0
    # torch's own causal mask, not one made from picogpt's
    torch_mask = (torch_causal_mask(n_q) if causal else torch.from_numpy(attn_mask < 0))
    with torch.no_grad():
        expected, _ = module(torch.from_numpy(x), torch.from_numpy(memory),
                             torch.from_numpy(memory), key_padding_mask=torch.from_numpy(
                                 ~real(key_ids)), attn_mask=torch_mask)
    got = multi_head_attention(x, memory, **attention_params(module), n_head=N_HEAD,
                               mask=padding_mask(key_ids, PAD) + attn_mask)
    assert got.shape == (3, n_q, D_MODEL) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_decoder_layers_equal_torch(norm_first):
    rng = np.random.default_rng(1)
    src, tgt = padded_ids(rng, [9, 5, 7], 9), padded_ids(rng, [6, 6, 3], 6)
    x = rng.standard_normal((3, 9, D_MODEL)).astype(np.float32)
    y = rng.standard_normal((3, 6, D_MODEL)).astype(np.float32)
    settings = {"d_model": D_MODEL, "nhead": N_HEAD, "dim_feedforward": D_FF, "dropout": 0.0,
                "activation": "relu", "batch_first": True, "norm_first": norm_first}
    enc = randomize(torch.nn.TransformerEncoderLayer(**settings), 4)
    dec = randomize(torch.nn.TransformerDecoderLayer(**settings), 5)
    with torch.no_grad():
        memory = enc(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(~real(src)))
        out = dec(torch.from_numpy(y), memory, tgt_mask=torch_causal_mask(6),
                  tgt_key_padding_mask=torch.from_numpy(~real(tgt)),
                  memory_key_padding_mask=torch.from_numpy(~real(src)))
    got_memory = encoder_layer(x, **encoder_layer_params(enc), n_head=N_HEAD,
                               mask=padding_mask(src, PAD), norm_first=norm_first)
    # only real positions: torch's encoder fast path writes 0 at padded ones
    np.testing.assert_allclose(got_memory[real(src)], memory.numpy()[real(src)], atol=1e-4)
    got = decoder_layer(y, memory.numpy(), **decoder_layer_params(dec), n_head=N_HEAD,
                        mask=padding_mask(tgt, PAD) + causal_mask(6),
                        memory_mask=padding_mask(src, PAD), norm_first=norm_first)
    np.testing.assert_allclose(got[real(tgt)], out.numpy()[real(tgt)], atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_two_layer_transformer_equals_torch_end_to_end(norm_first):
    rng = np.random.default_rng(2)
    model, embedding = torch_transformer(norm_first)
    src, tgt = padded_ids(rng, [8, 4, 6, 2], 8), padded_ids(rng, [5, 5, 2, 4], 5)
    tgt[:, 0] = BOS
    with torch.no_grad():
        expected = model(torch_embed(embedding, src), torch_embed(embedding, tgt),
                         tgt_mask=torch_causal_mask(5),
                         src_key_padding_mask=torch.from_numpy(~real(src)),
                         tgt_key_padding_mask=torch.from_numpy(~real(tgt)),
                         memory_key_padding_mask=torch.from_numpy(~real(src)))
    params = transformer_params(model, embedding)
    memory = encode(src, params, N_HEAD, PAD, norm_first)
    got = decode(tgt, memory, params, N_HEAD, PAD, padding_mask(src, PAD), norm_first)
    assert got.shape == (4, 5, D_MODEL) and got.dtype == np.float32
    np.testing.assert_allclose(got[real(tgt)], expected.numpy()[real(tgt)], atol=1e-4)


def test_padding_is_inert():
    rng = np.random.default_rng(3)
    model, embedding = torch_transformer(False, seed=6)
    params = transformer_params(model, embedding)
    src, tgt = padded_ids(rng, [7, 3], 7), padded_ids(rng, [5, 2], 5)

    def run(params, src, tgt):
        memory = encode(src, params, N_HEAD, PAD)
        return memory, decode(tgt, memory, params, N_HEAD, PAD, padding_mask(src, PAD))

    memory, out = run(params, src, tgt)
    changed = {**params, "embed": params["embed"].copy()}
    changed["embed"][PAD] = 5.0  # what padded positions hold
    memory2, out2 = run(changed, src, tgt)
    np.testing.assert_allclose(memory2[real(src)], memory[real(src)], atol=1e-6)
    np.testing.assert_allclose(out2[real(tgt)], out[real(tgt)], atol=1e-6)
    assert np.abs(memory2[~real(src)] - memory[~real(src)]).max() > 1e-2  # it did change those
    longer_src, longer_tgt = np.pad(src, ((0, 0), (0, 4))), np.pad(tgt, ((0, 0), (0, 3)))
    memory3, out3 = run(params, longer_src, longer_tgt)
    np.testing.assert_allclose(memory3[:, :7][real(src)], memory[real(src)], atol=1e-5)
    np.testing.assert_allclose(out3[:, :5][real(tgt)], out[real(tgt)], atol=1e-5)


def test_the_decoder_is_causal():
    rng = np.random.default_rng(4)
    model, embedding = torch_transformer(True, seed=7)
    params = transformer_params(model, embedding)
    src, tgt = padded_ids(rng, [6], 6), padded_ids(rng, [8], 8)
    memory = encode(src, params, N_HEAD, PAD, True)
    out = decode(tgt, memory, params, N_HEAD, PAD, padding_mask(src, PAD), True)
    for t in range(8):
        changed = tgt.copy()
        changed[0, t] = 3 + (tgt[0, t] - 3 + 1) % (N_VOCAB - 3)  # another real token
        out2 = decode(changed, memory, params, N_HEAD, PAD, padding_mask(src, PAD), True)
        np.testing.assert_array_equal(out2[:, :t], out[:, :t])
        assert np.abs(out2[:, t] - out[:, t]).max() > 1e-3


def torch_greedy(model, embedding, src: np.ndarray, n_tokens: int) -> np.ndarray:
    """Greedy decoding as a plain loop over torch.nn.Transformer's encoder and decoder."""
    with torch.no_grad():
        memory = model.encoder(torch_embed(embedding, src),
                               src_key_padding_mask=torch.from_numpy(~real(src)))
        tgt = np.full((len(src), 1), BOS)
        for _ in range(n_tokens):
            out = model.decoder(torch_embed(embedding, tgt), memory,
                                tgt_mask=torch_causal_mask(tgt.shape[1]),
                                tgt_key_padding_mask=torch.from_numpy(~real(tgt)),
                                memory_key_padding_mask=torch.from_numpy(~real(src)))
            next_ids = (out[:, -1] @ embedding.weight.T).argmax(-1).numpy()
            done = (tgt == EOS).any(axis=1)
            tgt = np.concatenate([tgt, np.where(done, PAD, next_ids)[:, None]], axis=1)
            if (done | (next_ids == EOS)).all():
                break
    return tgt[:, 1:]


@pytest.mark.parametrize("norm_first", [False, True])
def test_greedy_decoding_gives_torchs_ids(norm_first):
    rng = np.random.default_rng(5)
    model, embedding = torch_transformer(norm_first, seed=8)
    src = padded_ids(rng, [9, 4, 7, 2, 9], 9)
    expected = torch_greedy(model, embedding, src, 12)
    params = transformer_params(model, embedding)
    got = write(src, params, N_HEAD, 12, BOS, EOS, pad_id=PAD, norm_first=norm_first).ids
    assert np.array_equal(got, expected)
    # A random 2-layer model with tied embeddings tends to repeat a row's first token, which a
    # position or mask bug could match too; so the logits at every position of the targets
    # must match as well (teacher-forced: position t sees targets up to t only).
    tgt = np.concatenate([np.full((len(src), 1), BOS), expected], axis=1)
    with torch.no_grad():
        memory = model.encoder(torch_embed(embedding, src),
                               src_key_padding_mask=torch.from_numpy(~real(src)))
        out = model.decoder(torch_embed(embedding, tgt), memory,
                            tgt_mask=torch_causal_mask(tgt.shape[1]),
                            tgt_key_padding_mask=torch.from_numpy(~real(tgt)),
                            memory_key_padding_mask=torch.from_numpy(~real(src)))
        torch_logits = (out @ embedding.weight.T).numpy()
    memory = encode(src, params, N_HEAD, PAD, norm_first)
    logits = decode(tgt, memory, params, N_HEAD, PAD, padding_mask(src, PAD),
                    norm_first) @ params["embed"].T
    np.testing.assert_allclose(logits[real(tgt)], torch_logits[real(tgt)], atol=1e-4)
    assert np.abs(np.diff(logits[0, :6], axis=0)).max() > 0.1  # positions differ


# seed 004's Transformer: a source and a target vocabulary of their own sizes, a pad id for
# each (its TokenEmbedding pads with 1), and an output layer with a bias (its fc)
N_SRC, N_TGT, SRC_PAD, TGT_PAD = 11, 17, 1, 3


def two_vocabulary_ids(rng, lengths: list[int], n: int, n_vocab: int, pad: int) -> np.ndarray:
    ids = rng.integers(0, n_vocab, (len(lengths), n))
    ids[ids == pad] = (pad + 1) % n_vocab  # pad only where a row has ended
    for row, length in zip(ids, lengths):
        row[length:] = pad
    return ids


@pytest.mark.parametrize("norm_first", [False, True])
def test_separate_source_and_target_vocabularies_and_pad_ids_equal_torch(norm_first):
    """Logits at every real target position and greedy ids, against torch.nn.Transformer with
    two nn.Embedding tables and an nn.Linear output layer."""
    rng = np.random.default_rng(9)
    model, _ = torch_transformer(norm_first, seed=10)
    src_embedding = randomize(torch.nn.Embedding(N_SRC, D_MODEL), 11)
    tgt_embedding = randomize(torch.nn.Embedding(N_TGT, D_MODEL), 12)
    out = randomize(torch.nn.Linear(D_MODEL, N_TGT), 13)
    src = two_vocabulary_ids(rng, [7, 3, 5], 7, N_SRC, SRC_PAD)
    tgt = two_vocabulary_ids(rng, [6, 2, 4], 6, N_TGT, TGT_PAD)
    tgt[:, 0] = BOS
    tgt_real = tgt != TGT_PAD

    def torch_logits(src, tgt):
        with torch.no_grad():
            x = model(torch_embed(src_embedding, src), torch_embed(tgt_embedding, tgt),
                      tgt_mask=torch_causal_mask(tgt.shape[1]),
                      src_key_padding_mask=torch.from_numpy(src == SRC_PAD),
                      tgt_key_padding_mask=torch.from_numpy(tgt == TGT_PAD),
                      memory_key_padding_mask=torch.from_numpy(src == SRC_PAD))
            return out(x).numpy()

    params = {**transformer_params(model, src_embedding), "src_embed": array(src_embedding.weight),
              "tgt_embed": array(tgt_embedding.weight), "out": linear_params(out)}
    del params["embed"]
    memory = encode(src, params, N_HEAD, SRC_PAD, norm_first)
    got = logits(decode(tgt, memory, params, N_HEAD, TGT_PAD, padding_mask(src, SRC_PAD),
                        norm_first), params)
    assert got.shape == (3, 6, N_TGT)
    np.testing.assert_allclose(got[tgt_real], torch_logits(src, tgt)[tgt_real], atol=1e-4)
    # greedy, one token at a time, against the same loop on torch's logits
    ids = write(src, params, N_HEAD, 5, BOS, EOS, pad_id=TGT_PAD, src_pad_id=SRC_PAD,
                norm_first=norm_first).ids
    expected = np.full((3, 1), BOS)
    for _ in range(ids.shape[1]):
        next_ids = torch_logits(src, expected)[:, -1].argmax(-1)
        done = (expected == EOS).any(axis=1)
        expected = np.concatenate([expected, np.where(done, TGT_PAD, next_ids)[:, None]], 1)
    np.testing.assert_array_equal(ids, expected[:, 1:])  # random weights: often one token
    # repeated, so the logits at every real position above carry the check of masks and tables
