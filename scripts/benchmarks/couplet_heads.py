"""What the cross-attention heads of a couplet model do on pairs it never saw: each head's 对位
score (the weight the row writing the 下句's character i puts on the 上句's character i, the
end's row left out), averaged over held-out 联 read as in training (the start token, then the
real 下句), over every one and over the 颔联 and 颈联 alone. With --checkpoints, the same for
each checkpoint.npz of the run kept along the way (hard links of the run's .part/checkpoint.npz
as it is replaced): when the heads start to align. docs/inside-couplet.md quotes it.

    python -m scripts.benchmarks.couplet_heads /tmp/couplet/models/dui --text chinese-poetry/
        [--pairs 400] [--checkpoints /tmp/snaps/*.npz]
"""

import argparse
import json
from pathlib import Path

import numpy as np

from picogpt.files.loaded_model import load_model
from picogpt.files.params import nest
from picogpt.files.poems import read_poems
from picogpt.tasks.couplet import split
from picogpt.transformer.inside import same_position_score, trace_seq2seq


def mean_scores(pairs: list[tuple[str, str]], params: dict, hparams: dict,
                encoder) -> np.ndarray:  # -> [n_dec_layer, n_head]
    """The 对位 score of each head, averaged over pairs, run a length at a time as a batch."""
    total, count = 0.0, 0
    for length in sorted({len(first) for first, _second in pairs}):
        rows = [(first, second) for first, second in pairs if len(first) == length]
        src = np.array([encoder.encode(first) for first, _second in rows])  # [n, length]
        tgt = np.array([[encoder.start, *encoder.encode(second)] for _first, second in rows])
        names = {f"decoder.blocks.{i}.cross_attn.pattern"
                 for i in range(len(params["decoder"]["blocks"]))}
        _, values = trace_seq2seq(src, tgt, params, hparams, names=names)
        score = same_position_score(values)  # [n_dec_layer, n, n_head]
        total, count = total + score.sum(axis=1), count + len(rows)
    return total / count


def checkpoint_params(path: Path) -> tuple[int, dict]:
    """The step and the params of a training checkpoint (cli/checkpoint.py's layout)."""
    with np.load(path) as stored:
        about = json.loads(str(stored["about"]))
        return about["step"], nest({key.split("/", 1)[1]: stored[key] for key in stored.files
                                    if key.startswith("params/")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--text", help="the chinese-poetry folder the model was trained on")
    parser.add_argument("--pairs", type=int, default=400, help="held-out 联 of each kind")
    parser.add_argument("--checkpoints", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    loaded = load_model(args.model_dir.name, str(args.model_dir.parent))
    encoder, hparams = loaded.encoder, loaded.hparams
    settings = json.loads((args.model_dir / "curve.json").read_text())["settings"]
    poems = read_poems(args.text, settings.get("collection"), settings.get("traditional"))[0]
    held = [(first, second, middle) for first, second, middle in
            split(poems, settings["n_held_out"])[1]
            if not encoder.outside(first + second)]  # a character it never saw twice: out
    kinds = {"every held-out 联": [(a, b) for a, b, _m in held][: args.pairs],
             "the 颔联 and 颈联": [(a, b) for a, b, middle in held if middle][: args.pairs]}
    runs = sorted((checkpoint_params(path) for path in args.checkpoints), key=lambda run: run[0])
    runs.append(("the model", loaded.params))
    print(f"{args.model_dir}: each cross-attention head's 对位 score, [layer][head]; a head "
          f"that spreads its weight evenly scores 1/5 on five characters, 1/7 on seven")
    for step, params in runs:
        for kind, pairs in kinds.items():
            mean = mean_scores(pairs, params, hparams, encoder)
            layer, head = np.unravel_index(np.argmax(mean), mean.shape)
            print(f"{'step ' + str(step) if isinstance(step, int) else step}, {kind} "
                  f"({len(pairs)}): best {mean.max():.2f} (layer {layer} head {head}); "
                  f"{np.round(mean.astype(float), 2).tolist()}")


if __name__ == "__main__":
    main()
