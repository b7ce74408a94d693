"""fasttrain.py's training step against backward.py's readable one and torch's autograd."""

import numpy as np
import pytest
from test_train import SHAPES, batch, float64, random_params, torch_loss_and_grads

from picogpt import backward, fasttrain
from picogpt.files.params import flatten
from picogpt.model import future_mask
from picogpt.train import adamw, gpt2_step, learn, learning_rate
from scripts.fixtures.reference import hf_name


@pytest.mark.parametrize("shape", SHAPES)
def test_loss_and_every_gradient_equal_torch_autograd(shape):
    """float64 both sides, a batch of 2 (the second shape's 22 rows end in a partial slice of
    the fused softmax). Tolerance as backward.py's own test: 1e-4 of the largest entry."""
    hparams, n_seq = SHAPES[shape]
    params = random_params(hparams, seed=1)
    inputs, targets = batch(hparams, n_seq, seed=2)
    loss, grads = fasttrain.loss_and_grads(inputs, targets, float64(params), hparams["n_head"])
    their_loss, theirs = torch_loss_and_grads(hparams, params, inputs, targets)
    assert isinstance(loss, float) and abs(loss - their_loss) < 1e-10
    ours = flatten(grads)
    assert ours.keys() == flatten(params).keys()
    for name, ours_one in ours.items():
        theirs_one = theirs[hf_name(f"model/{name.replace('.', '/')}")]
        assert ours_one.shape == theirs_one.shape, name
        np.testing.assert_allclose(ours_one, theirs_one, rtol=0,
                                   atol=1e-4 * np.abs(theirs_one).max(), err_msg=name)


def masks(kind: str, n_batch: int, n_q: int, n_k: int, dtype):
    """None (the encoder's without padding), causal (a decoder's: a query sees the keys up to its
    place, the last query sees all), or padding (a source's pad ids hidden from every query)."""
    if kind == "causal":
        return future_mask(n_q, n_k, dtype)  # [n_q, n_k]
    if kind == "padding":
        hidden = np.zeros((n_batch, 1, n_k), dtype)
        hidden[0, 0, -2:] = hidden[1, 0, -4:] = -1e10  # [n_batch, 1, n_k]
        return hidden
    return None


@pytest.mark.parametrize("n_head, n_kv_head", [(4, 4), (4, 2), (6, 2), (4, 1)])
@pytest.mark.parametrize("mask", ["causal", "none", "padding"])
def test_attention_and_its_backward_equal_torch_sdpa(n_head, n_kv_head, mask):
    """The one attention every fast step runs (GPT-2's, the encoder-decoder's, the LLaMA
    block's), against torch's scaled_dot_product_attention with enable_gqa, in float64: the
    output, and dq, dk, dv by autograd, within 1e-10 of the largest entry. Query head h reads key
    and value head h // (n_head // n_kv_head), as Hugging Face's LLaMA and torch do."""
    import torch

    rng = np.random.default_rng(n_head * 10 + n_kv_head)
    n_batch, n_q, n_k, d_head = 2, 5, 7, 8  # n_q != n_k: cross-attention's shape
    q = rng.standard_normal((n_batch, n_head, n_q, d_head))
    k, v = rng.standard_normal((2, n_batch, n_kv_head, n_k, d_head))
    dz = rng.standard_normal((n_batch, n_head, n_q, d_head))
    added = masks(mask, n_batch, n_q, n_k, np.float64)
    z, pattern = fasttrain.attention(q, k, v, added)
    assert z.shape == q.shape and pattern.shape == (n_batch, n_head, n_q, n_k)
    grads = fasttrain.attention_backward(dz, q, k, v, pattern)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    theirs = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if added is None else torch.tensor(added).unsqueeze(-3),
        enable_gqa=True)
    (theirs * torch.tensor(dz)).sum().backward()
    np.testing.assert_allclose(z, theirs.detach().numpy(), rtol=0, atol=1e-10)
    for name, ours, their in zip("qkv", grads, (tq.grad, tk.grad, tv.grad)):
        assert ours.shape == their.shape, name
        np.testing.assert_allclose(ours, their.numpy(), rtol=0,
                                   atol=1e-10 * their.abs().max().item(), err_msg=name)


def test_attention_keeps_the_float32_order_of_gpt2s_step():
    """float32, bit for bit: attention's forward and backward are the operations GPT-2's step ran
    in this order before it shared them (written out here), so a figure trained before is
    trained again to the last bit. A reordered sum or a division for the multiplication by
    1 / sqrt(d_head) moves the last bits, and this fails."""
    rng = np.random.default_rng(12)
    q, k, v, dz = rng.standard_normal((4, 3, 4, 16, 8)).astype(np.float32)
    mask = future_mask(16, 16, np.float32)
    pattern = q @ k.swapaxes(-1, -2)  # the order fasttrain.block_forward had
    pattern *= 1 / q.shape[-1] ** 0.5
    pattern += mask
    pattern = np.exp(pattern - pattern.max(-1, keepdims=True))
    pattern /= pattern.sum(-1, keepdims=True)
    dv = pattern.swapaxes(-1, -2) @ dz  # and block_backward
    dscores = dz @ v.swapaxes(-1, -2)
    dscores -= np.sum(dscores * pattern, axis=-1, keepdims=True)
    dscores *= pattern
    dscores *= 1 / q.shape[-1] ** 0.5
    z, our_pattern = fasttrain.attention(q, k, v, mask)
    np.testing.assert_array_equal(our_pattern, pattern)
    np.testing.assert_array_equal(z, pattern @ v)
    for ours, theirs in zip(fasttrain.attention_backward(dz, q, k, v, our_pattern),
                            (dscores @ k, dscores.swapaxes(-1, -2) @ q, dv)):
        np.testing.assert_array_equal(ours, theirs)


POEMS = {"n_vocab": 6000, "n_ctx": 64, "n_embd": 128, "n_head": 4, "n_layer": 4}


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_float32_equals_backward_py_at_the_poems_shape(threads):
    """float32, 8 windows of 64 at the poems recipe's shape, any number of threads. The
    loss within 1e-6 relative and each gradient within 2e-5 of its largest entry: float32
    sums in another order (measured: 1e-7 and 1.2e-6)."""
    params = random_params(POEMS, seed=8)
    rng = np.random.default_rng(9)
    ids = rng.integers(0, POEMS["n_vocab"], (8, 65))
    ids[3, 10:20] = ids[0, 40:50]  # tokens seen twice add their embeddings' gradients
    kept = {name: array.copy() for name, array in flatten(params).items()}
    loss, grads = fasttrain.loss_and_grads(ids[:, :-1], ids[:, 1:], params, 4, threads)
    their_loss, theirs = backward.loss_and_grads(ids[:, :-1], ids[:, 1:], params, 4)
    assert abs(loss - their_loss) < 1e-6 * their_loss
    theirs = flatten(theirs)
    for name, ours in flatten(grads).items():
        assert ours.dtype == np.float32 and ours.shape == theirs[name].shape, name
        np.testing.assert_allclose(ours, theirs[name], rtol=0,
                                   atol=2e-5 * np.abs(theirs[name]).max(), err_msg=name)
    for name, array in flatten(params).items():  # the params are left as they were
        np.testing.assert_array_equal(array, kept[name], err_msg=name)


def test_the_training_loop_takes_the_readable_steps():
    """Three steps of train.learn equal three steps written here with backward.py and adamw.
    float64: the key bias's gradient is 0 but for round-off (a softmax ignores a shift), and in
    float32 Adam scales that round-off up to steps of lr / 10 in either direction."""
    hparams = {"n_vocab": 300, "n_ctx": 16, "n_embd": 32, "n_head": 4, "n_layer": 2}
    params = float64(random_params(hparams, seed=10))
    rng = np.random.default_rng(11)
    windows = [(ids[:, :-1], ids[:, 1:]) for ids in rng.integers(0, 300, (3, 4, 17))]
    learned, _ = learn(params, iter(windows), 3, 1e-2, 1, gpt2_step(4), {"loss": []}, 50)
    theirs, state = params, {"step": 0}
    for step, (inputs, targets) in enumerate(windows):
        _, grads = backward.loss_and_grads(inputs, targets, theirs, 4)
        theirs, state = adamw(theirs, grads, state, learning_rate(step, 3, 1e-2, 1))
    ours, theirs = flatten(learned), flatten(theirs)
    for name in theirs:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=1e-10, err_msg=name)
