"""The docs' demo model: a small GPT-2 that picogpt trains here, and what its insides show.

The text is the licence texts Debian keeps in /usr/share/common-licenses (the GPL, LGPL, Apache,
MPL ... ; each may be copied verbatim, and every Debian-based machine has them, ~237 kB, ~52,000
tokens). Nothing is mixed in. Training the default shape for 450 steps of 16 x 128 tokens takes
~10 minutes on 2 cores:

    python -m scripts.figures.demo_model train --models_dir /tmp/demo
    python -m scripts.figures.demo_model views --models_dir /tmp/demo --out docs/trained

`views` prints the numbers docs/trained-model.md quotes and writes its pictures: attention of
the most previous-token-like and the most induction-like head, and wpe's cosine similarity.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from picogpt import load_encoder_hparams_and_params
from picogpt.inside import cosine_similarity, residual_names, trace
from picogpt.model import layer_norm, softmax
from picogpt.train import train
from scripts.figures.common import upscale, write_png

LICENSES = Path("/usr/share/common-licenses")
# made up, so the model cannot have learned it: whatever it predicts in the second copy comes
# from the first copy, in context
SENTENCE = " Seven purple owls carried a brass lantern across the frozen harbour at dawn."


def license_text() -> str:
    """Every licence text in the folder once (GPL is a link to GPL-3, and so on), by name."""
    files = sorted(path for path in LICENSES.iterdir() if not path.is_symlink())
    return "".join(path.read_text(encoding="utf-8") + "\n" for path in files)


def doubled(text: str) -> str:
    """Every line twice in a row: a text in which what follows a passage's first copy says
    what follows in its second, the pattern induction heads learn to copy."""
    return "".join(f"{line}\n{line}\n" for line in text.split("\n") if line.strip())


def views(models_dir: str, out: Path, name: str) -> None:
    encoder, hparams, params = load_encoder_hparams_and_params(name, models_dir)
    n_layer, n_head = hparams["n_layer"], hparams["n_head"]
    out.mkdir(parents=True, exist_ok=True)

    # held-out text: the last tenth of the training text, which train() never trained on
    ids = encoder.encode(license_text())
    held_out = ids[int(len(ids) * 0.9):][:128]
    _, held_values = trace(held_out, params, n_head)
    print(f"previous-token score: mean weight on the token just before, {len(held_out)} "
          f"held-out tokens (uniform attention would give {np.mean(1 / np.arange(2, 129)):.3f})")
    prev = np.array([[np.mean(np.diagonal(held_values[f"blocks.{i}.attn.pattern"][h], -1))
                      for h in range(n_head)] for i in range(n_layer)])
    for i in range(n_layer):
        print(f"  layer {i}: " + "  ".join(f"head {h} {prev[i, h]:.3f}" for h in range(n_head)))

    # induction: the made-up sentence twice
    once = encoder.encode(SENTENCE)
    twice, n = once + once, len(once)
    logits, values = trace(twice, params, n_head)
    nll = -np.log(softmax(logits)[np.arange(len(twice) - 1), twice[1:]])  # each next token's
    print(f"\nthe sentence twice ({n} tokens each): loss per token, first copy "
          f"{nll[: n - 1].mean():.2f} nats, second copy {nll[n:].mean():.2f} nats")
    # an induction head at token t of the second copy looks at t - n + 1: the token that
    # followed this token's first occurrence
    induction = np.array([[np.mean([values[f"blocks.{i}.attn.pattern"][h][t, t - n + 1]
                                    for t in range(n, 2 * n)]) for h in range(n_head)]
                          for i in range(n_layer)])
    print("induction score: mean weight from the second copy on the token after the same "
          "token in the first")
    for i in range(n_layer):
        print(f"  layer {i}: " + "  ".join(f"head {h} {induction[i, h]:.3f}"
                                          for h in range(n_head)))

    # logit lens on held-out text: does the right next token rise layer by layer? (what
    # inside.logit_lens computes, with the whole distribution kept for p(next))
    targets = np.array(held_out[1:])
    print("\nlogit lens on the held-out tokens: share of next tokens ranked first, and mean "
          "probability of the next token")
    for row, residual in enumerate(residual_names(n_layer)):
        probs = softmax(layer_norm(held_values[residual], **params["ln_f"]) @ params["wte"].T)
        right = probs[np.arange(len(targets)), targets]
        label = "embed" if row == 0 else f"after block {row - 1}"
        print(f"  {label:14s} top-1 {np.mean(probs[:-1].argmax(-1) == targets):.3f}  "
              f"p(next) {right.mean():.4f}")

    # wpe: cosine similarity of the first 128 positions
    similarity = cosine_similarity(params["wpe"][:128])
    near = np.mean(np.diagonal(similarity, 1))
    far = np.mean(similarity[np.triu_indices(128, 32)])
    print(f"\nwpe cosine similarity: neighbours {near:.3f}, positions 32 or more apart "
          f"{far:.3f}")
    write_png(out / "wpe-similarity.png", upscale((similarity + 1) / 2, 3))

    # pictures of the two heads, on the repeated sentence
    for kind, scores in (("previous-token", prev), ("induction", induction)):
        i, h = np.unravel_index(np.argmax(scores), scores.shape)
        pattern = values[f"blocks.{i}.attn.pattern"][h]
        write_png(out / f"{kind}-head.png", upscale(1 - pattern, 12))  # dark = more weight
        print(f"{kind} head with the highest score: layer {i}, head {h} -> "
              f"{out / f'{kind}-head.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["train", "views"])
    parser.add_argument("--models_dir", default="/tmp/demo")
    parser.add_argument("--name", default="licenses")
    parser.add_argument("--steps", type=int, default=450)
    parser.add_argument("--out", type=Path, default=Path("docs/trained"))
    parser.add_argument("--doubled", action="store_true",
                        help="train on the text with every line repeated (for induction)")
    args = parser.parse_args()
    if args.what == "train":
        text = Path(args.models_dir) / f"{args.name}.txt"
        text.parent.mkdir(parents=True, exist_ok=True)
        text.write_text(doubled(license_text()) if args.doubled else license_text(),
                        encoding="utf-8")
        result = train(str(text), name=args.name, models_dir=args.models_dir, steps=args.steps)
        print(result)
    else:
        views(args.models_dir, args.out, args.name)


if __name__ == "__main__":
    sys.exit(main())
