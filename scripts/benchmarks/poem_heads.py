"""What the heads of a poems model do on verse it never saw: each head's previous-token score,
last-break score (weight on the latest ，。 or line break: counting within a line),
previous-line score (weight on the same place in the 句 above, and in the 联 above) and rhyme
score (from where a 下句's last character is written, weight on the last character of the 下句
before), averaged over held-out verses of the corpus it trained on (fortunes-zh, or the
chinese-poetry folder its run read). docs/poems.md quotes it.

    python -m scripts.benchmarks.poem_heads models/shi [--verses 40]
"""

import argparse
import json
from pathlib import Path

import numpy as np

from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.files.poems import read_poems
from picogpt.inside import (
    last_break_score,
    previous_line_score,
    previous_token_score,
    rhyme_score,
    trace,
)
from picogpt.tasks.poems import split_poems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--verses", type=int, default=40)
    args = parser.parse_args()
    encoder, hparams, params = load_encoder_hparams_and_params(args.model_dir.name,
                                                               str(args.model_dir.parent))
    settings = json.loads((args.model_dir / "curve.json").read_text())["settings"]
    poems = read_poems(settings.get("text"), settings.get("collection"),
                       settings.get("traditional", False))[0]
    held_out = split_poems(poems, settings["n_held_out"])[1][: args.verses]
    half = [encoder.encode(c)[0] for c in "，。\n"]
    line = [encoder.encode("\n")[0]]
    ends = [encoder.encode("。")[0]]
    scores = {"previous token": [], "last break": [], "half-line above": [], "line above": [],
              "rhyme": []}
    for verse in held_out:
        ids = encoder.prompt_ids(verse)[: hparams["n_ctx"]]
        _, values = trace(ids, params, hparams["n_head"])
        scores["previous token"].append(previous_token_score(values))
        scores["last break"].append(last_break_score(values, ids, half))
        scores["half-line above"].append(previous_line_score(values, ids, half))
        if "\n" in encoder.decode(ids[1:-1]):
            scores["line above"].append(previous_line_score(values, ids, line))
        if sum(i in ends for i in ids[1:]) >= 2:
            scores["rhyme"].append(rhyme_score(values, ids, ends))
    print(f"{args.model_dir}: {len(held_out)} held-out verses; each head's mean score, "
          f"[layer][head]")
    for kind, values in scores.items():
        mean = np.mean(values, axis=0)
        layer, head = np.unravel_index(np.argmax(mean), mean.shape)
        print(f"{kind}: best {mean.max():.2f} (layer {layer} head {head}); "
              f"{np.round(mean.astype(float), 2).tolist()}")


if __name__ == "__main__":
    main()
