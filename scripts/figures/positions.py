"""Draw two position-similarity matrices side by side: sinusoidal positions and a model's wpe.

Each is the cosine similarity of every pair of the first 128 positions, in the colours every
similarity picture in docs/ uses (blue -1, white 0, red 1). The sinusoidal one depends only on
the distance between positions, so it is the same along every diagonal. The wpe one is whatever
the model in --models_dir learned: GPT-2 shows smooth bands, a random-weight model noise.
`--language zh` writes the titles and axes in Chinese, for the zh pages.

    python -m scripts.figures.positions docs/positions.png --models_dir /tmp/demo/models \
        --model_size demo
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from picogpt.files.openai import load_encoder_hparams_and_params  # noqa: E402
from picogpt.inside import cosine_similarity  # noqa: E402
from picogpt.transformer import sinusoidal_positions  # noqa: E402
from scripts.figures.common import SIMILARITY, heatmap, save, use_language  # noqa: E402

TEXT = {
    "en": {"sinusoidal": "sinusoidal_positions({n}, {n_embd}): cosine similarity",
           "wpe": "wpe[:{n}] of {label}: cosine similarity", "label": "the demo model",
           "i": "position i", "j": "position j"},
    "zh": {"sinusoidal": "sinusoidal_positions({n}, {n_embd})：余弦相似度",
           "wpe": "{label}的 wpe[:{n}]：余弦相似度", "label": "演示模型",
           "i": "位置 i", "j": "位置 j"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="PNG file to write")
    parser.add_argument("--models_dir", default="models", help="where picogpt keeps models")
    parser.add_argument("--model_size", default="124M")
    parser.add_argument("--label", default=None,
                        help="what the model is, in titles (default: the demo model)")
    parser.add_argument("--language", choices=sorted(TEXT), default="en",
                        help="the language of titles and axes")
    parser.add_argument("--n_pos", type=int, default=128)
    args = parser.parse_args()
    _, hparams, params = load_encoder_hparams_and_params(args.model_size, args.models_dir)
    n = min(args.n_pos, hparams["n_ctx"])
    sinusoidal = cosine_similarity(sinusoidal_positions(n, hparams["n_embd"]))
    learned = cosine_similarity(np.asarray(params["wpe"][:n], np.float64))
    text = TEXT[args.language]
    use_language(args.language)
    # constrained layout keeps the right plot's axis label clear of the left colour bar
    figure, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.8), layout="constrained")
    heatmap(left, sinusoidal, None, SIMILARITY,
            text["sinusoidal"].format(n=n, n_embd=hparams["n_embd"]))
    heatmap(right, learned, None, SIMILARITY,
            text["wpe"].format(n=n, label=args.label or text["label"]))
    for axes in (left, right):
        axes.set_xlabel(text["j"])
        axes.set_ylabel(text["i"])
    save(figure, args.out)
    print(f"wrote {args.out}")
    for name, similarity in [("sinusoidal", sinusoidal), ("wpe", learned)]:
        spread = max(np.ptp(np.diagonal(similarity, k)) for k in range(1, 9))
        print(f"{name}: similarity to the next position {np.diagonal(similarity, 1).mean():.3f}, "
              f"largest spread along one of the first 8 diagonals {spread:.3f}")


if __name__ == "__main__":
    main()
