"""Write a PNG of two position-similarity matrices: sinusoidal positions beside GPT-2's wpe.

Each picture is the cosine similarity of every pair of the first 128 positions (white = 1,
dark = 0 or below). The sinusoidal one depends only on the distance between positions, so it
is the same along every diagonal. The wpe one is whatever the checkpoint in --models_dir
learned: real GPT-2 shows smooth bands; a random-weight checkpoint shows noise.

    python -m scripts.figures.positions docs/positions.png --models_dir models
"""

import argparse
from pathlib import Path

import numpy as np

from picogpt.inside import cosine_similarity
from picogpt.load import load_encoder_hparams_and_params
from picogpt.transformer import sinusoidal_positions
from scripts.figures.common import write_png


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="PNG file to write")
    parser.add_argument("--models_dir", default="models", help="where picogpt keeps models")
    parser.add_argument("--model_size", default="124M")
    parser.add_argument("--n_pos", type=int, default=128)
    parser.add_argument("--scale", type=int, default=3, help="pixels per position")
    args = parser.parse_args()
    _, hparams, params = load_encoder_hparams_and_params(args.model_size, args.models_dir)
    sinusoidal = cosine_similarity(sinusoidal_positions(args.n_pos, hparams["n_embd"]))
    learned = cosine_similarity(np.asarray(params["wpe"][: args.n_pos]))
    gap = np.ones((args.n_pos, 8))
    picture = np.concatenate([sinusoidal, gap, learned], axis=1)
    write_png(args.out, np.kron(picture, np.ones((args.scale, args.scale))))
    print(f"wrote {args.out}: left sinusoidal_positions({args.n_pos}, {hparams['n_embd']}), "
          f"right wpe[:{args.n_pos}] of {args.models_dir}/{args.model_size}")
    for name, similarity in [("sinusoidal", sinusoidal), ("wpe", learned)]:
        spread = max(np.ptp(np.diagonal(similarity, k)) for k in range(1, 9))
        print(f"{name}: similarity to the next position {np.diagonal(similarity, 1).mean():.3f}, "
              f"largest spread along one of the first 8 diagonals {spread:.3f}")


if __name__ == "__main__":
    main()
