"""llama/backward.py's gradients against torch's autograd, on models transformers builds."""

import numpy as np
import pytest

from picogpt.files.llama_hf import nest_llama
from picogpt.files.params import flatten
from picogpt.llama import backward, fasttrain
from scripts.fixtures.llama import random_llama, state_arrays

# Every option once: shared key/value heads in all three (4 query heads over 2), an untied head
# in LlamaForCausalLM, q/k/v biases in Qwen2, q/k norms and a d_head that is not n_embd / n_head
# in Qwen3 (tied, as Qwen3-0.6B); scripts/fixtures/llama.py's small shape and lively weights
KINDS = {"llama": False, "qwen2": True, "qwen3": True}  # kind -> tied


def hf_model(kind: str):
    """transformers' model of the kind, float64."""
    return random_llama(kind, tied=KINDS[kind], seed=3).double()


def params_of(model) -> dict:
    """The model's weights as picogpt's llama params, float64."""
    arrays = {name: array.astype(np.float64) for name, array in state_arrays(model).items()}
    return nest_llama(arrays)


def hparams_of(model) -> dict:
    """The hparams llama/model.py's forward reads (its HPARAMS), from transformers' config."""
    config = model.config
    return {"n_head": config.num_attention_heads, "n_kv_head": config.num_key_value_heads,
            "d_head": getattr(config, "head_dim", None)
            or config.hidden_size // config.num_attention_heads,
            "rope_theta": config.rope_parameters["rope_theta"], "norm_eps": config.rms_norm_eps}


def batch(n_vocab: int, n_seq: int = 12, seed: int = 1):
    """Two rows of ids and targets; a token repeated within and across rows."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, n_vocab, (2, n_seq + 1))
    ids[0, 5] = ids[1, 2] = ids[0, 1]  # its embedding row sums three gradients
    return ids[:, :-1], ids[:, 1:]


def torch_loss_and_grads(model, inputs, targets) -> tuple[float, dict]:
    """transformers' loss (mean cross-entropy, nats) and autograd's gradient of each weight,
    by picogpt's flat name."""
    import torch

    model.zero_grad()
    logits = model(torch.from_numpy(inputs)).logits  # [n_batch, n_seq, n_vocab]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             torch.from_numpy(targets).reshape(-1))
    loss.backward()
    grads = {}
    for name, p in model.named_parameters():
        name = name.removeprefix("model.")
        if name.startswith("layers."):
            _layers, i, rest = name.split(".", 2)
            name = f"h{i}.{rest}"
        grads[name] = p.grad.numpy()
    return loss.item(), grads


@pytest.mark.parametrize("kind", KINDS)
def test_loss_and_every_gradient_equal_torch_autograd(kind):
    """float64 both sides. The loss within 1e-7 of itself: transformers computes the rotary
    angles in float32 even in a float64 model, as llama/model.py does (measured: 8e-9 apart).
    Each gradient within 1e-4 of the largest entry of torch's, the issue's bar."""
    model = hf_model(kind)
    params = params_of(model)
    inputs, targets = batch(model.config.vocab_size)
    loss, grads = backward.loss_and_grads(inputs, targets, params, **hparams_of(model))
    their_loss, theirs = torch_loss_and_grads(model, inputs, targets)
    assert isinstance(loss, float) and abs(loss - their_loss) < 1e-7 * their_loss
    ours = flatten(grads)
    assert ours.keys() == flatten(params).keys() == theirs.keys()
    for name, ours_one in ours.items():
        assert ours_one.shape == theirs[name].shape, name
        np.testing.assert_allclose(ours_one, theirs[name], rtol=0,
                                   atol=1e-4 * np.abs(theirs[name]).max(), err_msg=name)


def torch_grads_of(f, *arrays):
    """autograd's gradient of sum(f(*arrays) * dout) for each array, with a fixed dout."""
    import torch

    tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = f(*tensors)
    dout = torch.from_numpy(np.random.default_rng(5).normal(size=tuple(out.shape)))
    (out * dout).sum().backward()
    return dout.numpy(), [t.grad.numpy() for t in tensors]


def test_rope_backward_turns_the_gradient_back():
    """rope_backward equals autograd through transformers' own apply_rotary_pos_emb."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from picogpt.llama.model import rope_angles

    rng = np.random.default_rng(3)
    q = rng.normal(size=(2, 4, 7, 8))  # [n_batch, n_head, n_seq, d_head]
    cos, sin = (a.astype(np.float64) for a in rope_angles(0, 7, 8, 100.0))
    import torch

    c, s = torch.from_numpy(cos)[None], torch.from_numpy(sin)[None]  # [1, n_seq, d_head]
    dout, (dq,) = torch_grads_of(lambda q: apply_rotary_pos_emb(q, q, c, s)[0], q)
    np.testing.assert_allclose(backward.rope_backward(dout, cos, sin), dq, rtol=0, atol=1e-12)


def test_attention_backward_sums_a_shared_heads_gradients():
    """Four query heads on two key/value heads, against autograd through transformers'
    repeat_kv and a causal softmax attention written here in torch."""
    import torch
    from transformers.models.llama.modeling_llama import repeat_kv

    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(2, 4, 6, 8)), rng.normal(size=(2, 2, 6, 8)), rng.normal(
        size=(2, 2, 6, 8))
    mask = torch.triu(torch.full((6, 6), float("-inf"), dtype=torch.float64), 1)

    def attend(q, k, v):
        scores = q @ repeat_kv(k, 2).transpose(-1, -2) / 8**0.5 + mask
        return torch.softmax(scores, -1) @ repeat_kv(v, 2)

    dout, theirs = torch_grads_of(attend, q, k, v)
    scores = q @ np.repeat(k, 2, axis=1).swapaxes(-1, -2) / 8**0.5 + mask.numpy()
    pattern = np.exp(scores - scores.max(-1, keepdims=True))
    pattern /= pattern.sum(-1, keepdims=True)
    ours = backward.attention_backward(dout, q, k, v, pattern)
    for name, one, theirs_one in zip("qkv", ours, theirs):
        assert one.shape == theirs_one.shape, name
        np.testing.assert_allclose(one, theirs_one, rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_the_fast_step_equals_the_readable_one(kind):
    """llama/fasttrain.py against llama/backward.py in float64, every option (shared heads,
    biases, q/k norms, tied and untied heads): the same sums in other orders, 1e-10 apart."""
    model = hf_model(kind)
    params = params_of(model)
    inputs, targets = batch(model.config.vocab_size)
    kept = {name: array.copy() for name, array in flatten(params).items()}
    loss, grads = fasttrain.loss_and_grads(inputs, targets, params, **hparams_of(model))
    their_loss, theirs = backward.loss_and_grads(inputs, targets, params, **hparams_of(model))
    assert isinstance(loss, float) and abs(loss - their_loss) < 1e-10 * their_loss
    ours, theirs = flatten(grads), flatten(theirs)
    assert ours.keys() == theirs.keys()
    for name, ours_one in ours.items():
        assert ours_one.shape == theirs[name].shape, name
        np.testing.assert_allclose(ours_one, theirs[name], rtol=0,
                                   atol=1e-10 * np.abs(theirs[name]).max(), err_msg=name)
    for name, array in flatten(params).items():  # the params are left as they were
        np.testing.assert_array_equal(array, kept[name], err_msg=name)
