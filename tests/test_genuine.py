"""Opt-in: picogpt on OpenAI's genuine 124M weights, which CI cannot download.

    PICOGPT_GPT2_124M=/path/to/models/124M .venv/bin/python -m pytest -m genuine

The folder holds OpenAI's seven files for 124M (what `picogpt` downloads into models/124M/).
These tests are deselected unless `-m genuine` is given (pyproject.toml's addopts), and fail,
rather than skip, when they are selected without the files. They check picogpt against two
things that do not come from this project:

- the greedy continuation that picoGPT's README publishes for its example prompt;
- transformers' GPT2LMHeadModel.from_pretrained of the same checkpoint, converted here from
  the TensorFlow files by the variable names OpenAI's checkpoint holds.
"""

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from picogpt import generate, gpt2, load_encoder_hparams_and_params
from picogpt.files.download import FILES
from scripts.fixtures.reference import hf_name

pytestmark = pytest.mark.genuine

PROMPT = "Alan Turing theorized that computers would one day become"
# jaymody/picoGPT's README: its greedy 40 tokens for PROMPT with the 124M model
PUBLISHED = (" the most powerful machines on the planet.\n\nThe computer is a machine that can "
             "perform complex calculations, and it can perform these calculations in a way that "
             "is very similar to the human brain.")


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> Path:
    """A models folder holding links to the genuine files (picogpt converts them there)."""
    source = Path(os.environ.get("PICOGPT_GPT2_124M", ""))
    missing = [name for name in FILES if not (source / name).is_file()]
    if not os.environ.get("PICOGPT_GPT2_124M") or missing:
        pytest.fail(f"set PICOGPT_GPT2_124M to a folder with OpenAI's 124M files (missing: "
                    f"{', '.join(missing) or 'the variable'}); `picogpt hi` downloads them "
                    f"into models/124M/ where the internet is reachable.")
    models_dir = tmp_path_factory.mktemp("genuine")
    (models_dir / "124M").mkdir()
    for name in FILES:
        os.symlink((source / name).resolve(), models_dir / "124M" / name)
    return models_dir


@pytest.fixture(scope="module")
def hf_from_pretrained(genuine, tmp_path_factory):
    """transformers' from_pretrained of the genuine checkpoint, converted by this test."""
    import tensorflow as tf
    from transformers import GPT2Config, GPT2LMHeadModel

    reader = tf.train.load_checkpoint(str(genuine / "124M" / "model.ckpt"))
    state = {}
    for name in reader.get_variable_to_shape_map():
        array = reader.get_tensor(name)
        state[hf_name(name)] = torch.from_numpy(array.reshape(array.shape[-2:])
                                                if array.ndim == 3 else array)
    model = GPT2LMHeadModel(GPT2Config(activation_function="gelu_new"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    folder = tmp_path_factory.mktemp("hf")
    model.save_pretrained(folder)
    return GPT2LMHeadModel.from_pretrained(folder).eval()


def test_the_published_greedy_continuation(genuine):
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(genuine))
    ids = list(generate(encoder.encode(PROMPT), params, hparams["n_head"], 40))
    n_published = len(encoder.encode(PUBLISHED))
    assert encoder.decode(ids[:n_published]) == PUBLISHED


def test_logits_and_greedy_tokens_equal_transformers_from_pretrained(genuine,
                                                                     hf_from_pretrained):
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(genuine))
    ids = encoder.encode(PROMPT)
    with torch.no_grad():
        expected = hf_from_pretrained(torch.tensor([ids])).logits[0].numpy()
        out = hf_from_pretrained.generate(torch.tensor([ids]), max_new_tokens=40,
                                          do_sample=False, pad_token_id=50256)
    logits = gpt2(ids, **params, n_head=hparams["n_head"])
    # trained GPT-2's logits reach ~-100; float32 engines agree to ~1e-3 there
    np.testing.assert_allclose(logits, expected, atol=2e-3, rtol=0)
    assert list(generate(ids, params, hparams["n_head"], 40)) == out[0, len(ids):].tolist()
