"""叠字 in a couplet model's 下句: how many of its answers to held-out 上句 use a character twice
where the 上句 does not repeat one at the same places, with and without --distinct (the mask
that forbids it), beside the poets' own 下句 of the same 联. docs/couplet.md quotes it.

    python -m scripts.benchmarks.couplet_repeats /tmp/couplet/models/dui --text chinese-poetry/
        [--pairs 100] [--seeds 0 1 2] [--top_k 8]

The 上句 are the first --pairs held-out 联 (the task's split, none trained on) whose characters
the model knows; each is answered once per seed, as `picogpt "上句" --top_k 8 --seed S` would.
"""

import argparse
import json
from pathlib import Path

from picogpt.files.loaded_model import load_model
from picogpt.files.poems import read_poems
from picogpt.sampling import Sampling
from picogpt.tasks.couplet import split
from picogpt.transformer.decoding import answer_each


def doubled(first: str, second: str) -> bool:
    """Whether second uses a character twice where first does not repeat at those places."""
    return any(second[i] == second[j] and first[i] != first[j]
               for i in range(len(second)) for j in range(i))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--text", help="the chinese-poetry folder the model was trained on")
    parser.add_argument("--pairs", type=int, default=100, help="held-out 上句 to answer")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--top_k", type=int, default=8)
    args = parser.parse_args()
    loaded = load_model(args.model_dir.name, str(args.model_dir.parent))
    encoder = loaded.encoder
    settings = json.loads((args.model_dir / "curve.json").read_text())["settings"]
    poems = read_poems(args.text, settings.get("collection"), settings.get("traditional"))[0]
    held = [(first, second) for first, second, _middle in split(poems, settings["n_held_out"])[1]
            if not encoder.outside(first + second)][: args.pairs]
    firsts = [first for first, _second in held]
    poets = sum(doubled(first, second) for first, second in held)
    print(f"{args.model_dir}: {len(held)} held-out 上句, top-k {args.top_k}, seeds {args.seeds}")
    print(f"the poets' own 下句: {poets} of {len(held)} with 叠字 the 上句 does not have")
    for distinct in (False, True):
        found, examples = 0, []
        for seed in args.seeds:
            made = answer_each(firsts, loaded.params, loaded.hparams, encoder,
                               Sampling(top_k=args.top_k), seed, distinct)
            hits = [(first, second) for first, second in zip(firsts, made)
                    if doubled(first, second)]
            found += len(hits)
            examples += [f"{first}，{second}" for first, second in hits[:2]]
        total = len(firsts) * len(args.seeds)
        print(f"--distinct {distinct}: {found} of {total} 下句 with 叠字 "
              f"({found / total:.1%}); e.g. {' / '.join(examples[:4]) or 'none'}")


if __name__ == "__main__":
    main()
