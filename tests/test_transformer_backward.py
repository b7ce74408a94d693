"""transformer_backward.py against torch's autograd on torch.nn.Transformer, against finite
differences of transformer.py's forward, and by training: a tiny copy task learned with AdamW."""

import math

import numpy as np
import pytest
import torch
from test_transformer import positions64

from picogpt.model import softmax
from picogpt.train import adamw, tree_map
from picogpt.transformer import decode, encode, init_params, logits, padding_mask
from picogpt.transformer.backward import loss_and_grads
from picogpt.transformer.decoding import write

D_MODEL, N_HEAD, D_FF, BOS, EOS = 32, 4, 64, 1, 2
N_VOCAB, PAD = 24, 0  # one vocabulary: source, target and output share a table
N_SRC, N_TGT, SRC_PAD, TGT_PAD = 11, 17, 1, 3  # two, as seed 004's Transformer


def flat(tree, name: str = "") -> dict[str, np.ndarray]:
    """Nested dicts and lists of arrays -> {"encoder.blocks.0.attn.q.w": array, ...}."""
    if isinstance(tree, dict | list):
        items = tree.items() if isinstance(tree, dict) else enumerate(tree)
        return {k: v for key, child in items
                for k, v in flat(child, f"{name}.{key}" if name else str(key)).items()}
    return {name: tree}


def random_params(seed: int, tables: str, n_layer: int = 2, n_dec_layer: int = 2) -> dict:
    """float64 weights with every part random (gains and biases too), so that no gradient is
    0 or symmetric by construction, and attention patterns far from uniform. tables: "shared"
    (one "embed"), "separate" (src_embed, tgt_embed, tied output) or "separate+out"."""
    rng = np.random.default_rng(seed)
    hparams = {"n_vocab": N_VOCAB, "n_ctx": 16, "n_embd": D_MODEL, "n_head": N_HEAD,
               "n_layer": n_layer, "n_dec_layer": n_dec_layer, "d_ff": D_FF}
    params = init_params(hparams, rng)
    if tables != "shared":
        del params["embed"]
        params["src_embed"] = np.zeros((N_SRC, D_MODEL), np.float32)
        params["tgt_embed"] = np.zeros((N_TGT, D_MODEL), np.float32)
    if tables == "separate+out":
        params["out"] = {"w": np.zeros((D_MODEL, N_TGT), np.float32),
                         "b": np.zeros(N_TGT, np.float32)}

    return shaken(params, rng)


def shaken(tree, rng, name: str = ""):
    """A float64 copy of tree with noise on every array: gains near 1, the rest moved."""
    if isinstance(tree, dict):
        return {key: shaken(child, rng, key) for key, child in tree.items()}
    if isinstance(tree, list):
        return [shaken(child, rng) for child in tree]
    if name == "g":
        return 1 + 0.2 * rng.standard_normal(tree.shape)
    return tree + rng.normal(0, 0.1 if tree.ndim == 1 else 0.2, tree.shape)


def padded(rng, lengths: list[int], n: int, n_vocab: int, pad: int, low: int = 0) -> np.ndarray:
    """[len(lengths), n] ids in low..n_vocab - 1, never pad before a row's length, pad after."""
    ids = rng.integers(low, n_vocab, (len(lengths), n))
    ids[ids == pad] = (pad + 1) % n_vocab if low == 0 else low + 1
    for row, length in zip(ids, lengths):
        row[length:] = pad
    return ids


def batch(seed: int, tables: str):
    """Three sources of different lengths, and their targets: tgt_in opens with the start id,
    tgt_out is the same shifted by one and closed by the end id, both padded."""
    rng = np.random.default_rng(seed)
    n_src, n_tgt_vocab, src_pad, tgt_pad = ((N_VOCAB, N_VOCAB, PAD, PAD) if tables == "shared"
                                            else (N_SRC, N_TGT, SRC_PAD, TGT_PAD))
    src = padded(rng, [7, 3, 5], 7, n_src, src_pad)
    body = padded(rng, [5, 2, 3], 6, n_tgt_vocab, tgt_pad, low=4)  # no start or end inside
    lengths = (body != tgt_pad).sum(1)
    tgt_in = np.concatenate([np.full((3, 1), BOS), body], 1)  # [3, 7]
    tgt_out = np.concatenate([body, np.full((3, 1), tgt_pad)], 1)
    tgt_out[np.arange(3), lengths] = EOS
    src[0, 4] = src[0, 1] = src[2, 0]  # one id three times: its row sums three gradients
    return src, tgt_in, tgt_out, src_pad, tgt_pad


# ---- the same model in torch.nn, its weights copied from the NumPy params -------------------

RENAMES = {"blocks": "layers", "attn": "self_attn", "cross_attn": "multihead_attn",
           "c_fc": "linear1", "ln_1": "norm1", "ln_2": "norm2", "ln_3": "norm3", "ln_f": "norm",
           "w": "weight", "g": "weight", "b": "bias"}


def torch_name(name: str) -> tuple[str, int | None]:
    """A NumPy weight's torch parameter, and which third of in_proj it is (q, k, v) if any."""
    if name in ("embed", "src_embed", "tgt_embed"):
        return f"{name}.weight", None
    parts = name.replace("mlp.c_proj", "linear2").replace("mlp.", "").replace(
        "c_proj", "out_proj").split(".")
    third = None
    if parts[-2] in ("q", "k", "v"):  # torch stacks the three maps in one in_proj
        third, parts = "qkv".index(parts[-2]), [*parts[:-2], f"in_proj_{RENAMES[parts[-1]]}"]
    parts = [RENAMES.get(part, part) for part in parts]
    return ".".join(["transformer", *parts] if parts[0] in ("encoder", "decoder") else parts), third


def torch_view(module: torch.nn.Module, name: str, grad: bool = False) -> torch.Tensor:
    """The torch tensor (or its gradient) that holds NumPy's weight `name`, in NumPy's shape."""
    theirs, third = torch_name(name)
    tensor = module.get_parameter(theirs)
    tensor = tensor.grad if grad else tensor
    if third is not None:
        tensor = tensor.chunk(3)[third]
    is_table = theirs.endswith("embed.weight")
    return tensor.T if tensor.ndim == 2 and not is_table else tensor  # torch's [n_out, n_in]


def torch_model(params: dict, norm_first: bool) -> torch.nn.ModuleDict:
    n_layer, n_dec_layer = (len(params[part]["blocks"]) for part in ("encoder", "decoder"))
    module = torch.nn.ModuleDict({"transformer": torch.nn.Transformer(
        D_MODEL, N_HEAD, n_layer, n_dec_layer, D_FF, dropout=0.0, activation="relu",
        batch_first=True, norm_first=norm_first)})
    for name in ("embed", "src_embed", "tgt_embed"):
        if name in params:
            module[name] = torch.nn.Embedding(*params[name].shape)
    if "out" in params:
        module["out"] = torch.nn.Linear(*params["out"]["w"].shape)
    module = module.double().train()  # dropout is 0; training mode keeps torch's slow path
    with torch.no_grad():
        for name, array in flat(params).items():
            torch_view(module, name).copy_(torch.from_numpy(array))
    return module


def torch_loss_and_grads(params, norm_first, src, tgt_in, tgt_out, src_pad, tgt_pad):
    """The paper's embedding (table * sqrt(d_model) + the formula's positions), nn.Transformer
    with its key padding masks and a causal mask, the output layer or the tied table, and
    cross-entropy ignoring the target's padding: its loss and every gradient, by NumPy name."""
    module = torch_model(params, norm_first)
    src_table = module["embed"] if "embed" in module else module["src_embed"]
    tgt_table = module["embed"] if "embed" in module else module["tgt_embed"]

    def embedded(table, ids):  # the constants rounded to float32, as picogpt keeps them
        positions = positions64(ids.shape[1], D_MODEL).astype(np.float32).astype(np.float64)
        scale = float(np.float32(math.sqrt(D_MODEL)))
        return table(torch.from_numpy(ids)) * scale + torch.from_numpy(positions)

    n_tgt = tgt_in.shape[1]
    causal = torch.ones(n_tgt, n_tgt, dtype=torch.bool).triu(1)  # True: may not look
    x = module["transformer"](embedded(src_table, src), embedded(tgt_table, tgt_in),
                              tgt_mask=causal,
                              src_key_padding_mask=torch.from_numpy(src == src_pad),
                              tgt_key_padding_mask=torch.from_numpy(tgt_in == tgt_pad),
                              memory_key_padding_mask=torch.from_numpy(src == src_pad))
    scores = module["out"](x) if "out" in module else x @ tgt_table.weight.T
    loss = torch.nn.functional.cross_entropy(scores.reshape(-1, scores.shape[-1]),
                                             torch.from_numpy(tgt_out).reshape(-1),
                                             ignore_index=tgt_pad)
    loss.backward()
    return loss.item(), {name: torch_view(module, name, grad=True).numpy()
                         for name in flat(params)}


# ---- tests ----------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's note on nested tensors
@pytest.mark.parametrize("tables", ["shared", "separate", "separate+out"])
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_loss_and_every_gradient_equal_torch_autograd(norm_first, tables):
    """float64 both sides, padding in sources and targets, 2 encoder and 3 decoder layers. Each
    gradient within 1e-4 of the largest entry of torch's, as backward.py's own test."""
    params = random_params(1, tables, n_layer=2, n_dec_layer=3)
    src, tgt_in, tgt_out, src_pad, tgt_pad = batch(2, tables)
    loss, grads = loss_and_grads(src, tgt_in, tgt_out, params, N_HEAD, tgt_pad, norm_first,
                                 src_pad_id=src_pad)
    their_loss, theirs = torch_loss_and_grads(params, norm_first, src, tgt_in, tgt_out,
                                              src_pad, tgt_pad)
    assert isinstance(loss, float) and abs(loss - their_loss) < 1e-10
    ours = flat(grads)
    assert ours.keys() == theirs.keys()
    for name, ours_one in ours.items():
        theirs_one = theirs[name]
        assert ours_one.dtype == np.float64 and ours_one.shape == theirs_one.shape, name
        if name.endswith("attn.k.b"):  # adds q . b_k to every score of a row, which the
            assert np.abs(ours_one).max() < 1e-12, name  # softmax ignores: 0 but round-off
            continue
        scale = np.abs(theirs_one).max()
        assert scale > 1e-6, name
        np.testing.assert_allclose(ours_one, theirs_one, rtol=0, atol=1e-4 * scale,
                                   err_msg=name)


def forward_loss(params, norm_first, src, tgt_in, tgt_out, src_pad, tgt_pad) -> float:
    """The same loss from transformer.py's forward, the one the model runs at inference."""
    memory = encode(src, params, N_HEAD, src_pad, norm_first)
    out = decode(tgt_in, memory, params, N_HEAD, tgt_pad, padding_mask(src, src_pad), norm_first)
    probs = softmax(logits(out, params))  # [n_batch, n_tgt, n_tgt_vocab]
    picked = np.take_along_axis(probs, tgt_out[..., None], axis=-1)[..., 0]
    return float(-np.mean(np.log(picked[tgt_out != tgt_pad])))


@pytest.mark.parametrize("norm_first, tables", [(True, "shared"), (False, "separate+out")])
def test_a_finite_difference_check_of_two_entries_of_every_array(norm_first, tables):
    """Independent of torch: (loss(w + h) - loss(w - h)) / 2h with transformer.py's forward,
    float64, at each array's largest gradient and at a random entry."""
    params = random_params(3, tables, n_layer=1, n_dec_layer=2)
    data = batch(4, tables)
    loss, grads = loss_and_grads(*data[:3], params, N_HEAD, data[4], norm_first,
                                 src_pad_id=data[3])
    assert abs(loss - forward_loss(params, norm_first, *data)) < 1e-12
    rng = np.random.default_rng(5)
    arrays, ours = flat(params), flat(grads)
    for name, array in arrays.items():
        for index in (np.unravel_index(np.argmax(np.abs(ours[name])), array.shape),
                      tuple(rng.integers(0, n) for n in array.shape)):
            kept, h = array[index], 1e-6
            array[index] = kept + h
            up = forward_loss(params, norm_first, *data)
            array[index] = kept - h
            down = forward_loss(params, norm_first, *data)
            array[index] = kept
            # central differences err by ~h^2 times the third derivative, plus round-off
            # ~1e-16 / h
            assert abs((up - down) / (2 * h) - ours[name][index]) < 1e-8, (name, index)


def test_float32_in_float32_out_and_the_params_are_left_as_they_were():
    """float32 gives float32 gradients, within 2e-5 of each float64 gradient's largest entry
    (float32 keeps ~7 digits; the largest gap measured was 1.6e-6)."""
    params = random_params(6, "shared")
    params32 = tree_map(lambda a: a.astype(np.float32), params)
    kept = {name: array.copy() for name, array in flat(params32).items()}
    data = batch(7, "shared")
    loss, grads = loss_and_grads(*data[:3], params32, N_HEAD, PAD, True)
    loss64, grads64 = loss_and_grads(*data[:3], params, N_HEAD, PAD, True)
    assert abs(loss - loss64) < 1e-5 * loss64
    grads64 = flat(grads64)
    for name, ours in flat(grads).items():
        assert ours.dtype == np.float32, name
        if name.endswith("attn.k.b"):  # 0 but round-off, as above
            assert np.abs(ours).max() < 1e-6, name
            continue
        np.testing.assert_allclose(ours, grads64[name], rtol=0,
                                   atol=2e-5 * np.abs(grads64[name]).max(), err_msg=name)
    for name, array in flat(params32).items():
        np.testing.assert_array_equal(array, kept[name], err_msg=name)


def copy_batch(rng, n: int = 32, n_src: int = 6, n_vocab: int = 16):
    """Sources of 2 to 6 random ids (3 and up), padded with PAD; the target is the source."""
    src = rng.integers(3, n_vocab, (n, n_src))
    lengths = rng.integers(2, n_src + 1, n)
    src[np.arange(n_src) >= lengths[:, None]] = PAD
    tgt_in = np.concatenate([np.full((n, 1), BOS), src], 1)  # [n, n_src + 1]
    tgt_out = np.concatenate([src, np.full((n, 1), PAD)], 1)
    tgt_out[np.arange(n), lengths] = EOS
    return src, tgt_in, tgt_out


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_adamw_steps_from_init_params_learn_to_copy_the_source(norm_first):
    """300 AdamW steps (lr 1e-2 falling linearly to 0) on a copy task with 13 ids: the loss of
    the last 20 steps falls near 0 (measured over 3 seeds: 0.007-0.009) and greedy decoding
    copies unseen sources exactly, each closed by the end id."""
    rng = np.random.default_rng(0)
    hparams = {"n_vocab": 16, "n_ctx": 8, "n_embd": 32, "n_head": 2, "n_layer": 1}
    params, state, losses = init_params(hparams, rng), {"step": 0}, []
    for step in range(300):
        loss, grads = loss_and_grads(*copy_batch(rng), params, 2, PAD, norm_first)
        params, state = adamw(params, grads, state, 1e-2 * (1 - step / 300))
        losses.append(loss)
    assert losses[0] > 2 and np.mean(losses[-20:]) < 0.03
    src, _, tgt_out = copy_batch(np.random.default_rng(1), n=20)
    copied = write(src, params, 2, 7, BOS, EOS, pad_id=PAD, norm_first=norm_first).ids  # [20, <= 7]
    np.testing.assert_array_equal(copied, tgt_out[:, :copied.shape[1]])
