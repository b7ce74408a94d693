"""The licence-text model (docs/trained-model.md, docs/induction.md's appendix): train it, then
draw its curve and its attention.

    python -m scripts.figures.induction train --models_dir /tmp/demo/models
    python -m scripts.figures.induction views --models_dir /tmp/demo/models --out docs/induction
    python -m scripts.figures.induction views --models_dir /tmp/demo/models --out docs/induction \
        --language zh

`train` runs picogpt.train on the licence texts Debian keeps in /usr/share/common-licenses
(every Debian-based machine has them, and each may be copied verbatim), half of its windows
replaced by random tokens with a run of them repeated, and prints how long it took. `views`
reads the model and its curve.json and writes curve.png (the loss, and the loss on held-out
first and second copies), patterns.png (the attention of the two best-scoring heads on a
repeated sentence, the tokens on both axes) and wpe-similarity.png, and prints the numbers the
pages quote. Every picture is labelled with the model it shows. `--language zh` writes the
same pictures with Chinese titles and axes, as curve-zh.png and so on, for the zh pages. The
induction task's pictures are induction_task.py's.
"""

import argparse
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from picogpt.cli.train import train  # noqa: E402
from picogpt.files.openai import load_encoder_hparams_and_params  # noqa: E402
from picogpt.inside import (  # noqa: E402
    cosine_similarity,
    induction_score,
    previous_token_score,
    trace,
)
from scripts.figures.common import (  # noqa: E402
    ATTENTION,
    SIMILARITY,
    heatmap,
    save,
    token_labels,
    use_language,
)

LICENSES = Path("/usr/share/common-licenses")
# made up, so that no model can have learned it: what it predicts in the second copy it reads
# from the first copy
SENTENCE = " Seven purple owls carried a brass lantern across the frozen harbour."
TEXT = {  # every word the pictures show, in each language
    "en": {"model": "demo model ({n_layer} layers, trained here, not GPT-2)",
           "batch": "training batch", "first": "held-out probes: first copy",
           "second": "held-out probes: second copy",
           "easy": " second copy 1 nat easier: step {step}",
           "step": "training step", "loss": "loss (nats per token)",
           "curve": "{label}: loss while training",
           "head": "layer {layer} head {head}: {kind} score {score:.2f}",
           "previous-token": "previous-token", "induction": "induction",
           "key": "key (looked at)", "query": "query (looking)",
           "patterns": "{label}: attention on a text and its copy",
           "wpe": "wpe of the {label}: cosine similarity", "j": "position j", "i": "position i",
           "suffix": ""},
    "zh": {"model": "演示模型（{n_layer} 层，在本机训练，不是 GPT-2）",
           "batch": "训练批次", "first": "留出探测文本：第一遍", "second": "留出探测文本：第二遍",
           "easy": " 第二遍比第一遍低 1 奈特：第 {step} 步", "step": "训练步数",
           "loss": "损失（每个词元的奈特数）", "curve": "{label}：训练中的损失",
           "head": "第 {layer} 层 {head} 号头：{kind}分数 {score:.2f}",
           "previous-token": "前一词元", "induction": "归纳", "key": "键（被看的位置）",
           "query": "查询（正在看的位置）", "patterns": "{label}：一段文本及其重复上的注意力",
           "wpe": "{label}的 wpe：余弦相似度", "j": "位置 j", "i": "位置 i", "suffix": "-zh"},
}
SETTINGS = {"n_layer": 2, "n_head": 4, "n_embd": 128, "n_ctx": 32, "n_batch": 32,
            "steps": 2000, "lr": 1e-2, "repeats": 0.5, "curve_every": 40, "seed": 0}


def license_text() -> str:
    """Every licence text in the folder once (GPL is a link to GPL-3, and so on), by name."""
    files = sorted(path for path in LICENSES.iterdir() if not path.is_symlink())
    return "".join(path.read_text(encoding="utf-8") + "\n" for path in files)


def train_demo(models_dir: str, name: str, steps: int) -> None:
    text = Path(models_dir) / f"{name}.txt"
    text.parent.mkdir(parents=True, exist_ok=True)
    text.write_text(license_text(), encoding="utf-8")
    start = time.perf_counter()
    result = train(str(text), name=name, models_dir=models_dir, **{**SETTINGS, "steps": steps})
    minutes = (time.perf_counter() - start) / 60
    print(f"trained {result['model_dir']} in {minutes:.1f} minutes: held-out text loss "
          f"{result['curve']['measured'][0]['held_out']:.2f} -> "
          f"{result['best']['held_out']:.2f} (step {result['best']['step']})")


def draw_curve(curve: dict, label: str, out: Path, text: dict) -> int | None:
    """The loss curve; returns the step at which the second copy became 1 nat easier than the
    first (None if it never did), marked on the picture."""
    measured = curve["measured"]
    steps = [m["step"] for m in measured]
    easy = next((m["step"] for m in measured if m["second"] < m["first"] - 1), None)
    figure, axes = plt.subplots(figsize=(9, 4.2))
    loss = np.array(curve["loss"])
    axes.plot(np.arange(len(loss)), loss, color="#bbbbbb", lw=0.8, label=text["batch"])
    axes.plot(steps, [m["first"] for m in measured], "o-", color="#3574d4", ms=3,
              label=text["first"])
    axes.plot(steps, [m["second"] for m in measured], "o-", color="#d04030", ms=3,
              label=text["second"])
    if easy is not None:
        axes.axvline(easy, color="#444444", ls="--", lw=1)
        axes.text(easy, axes.get_ylim()[1], text["easy"].format(step=easy), va="top",
                  fontsize=8)
    axes.set_xlabel(text["step"])
    axes.set_ylabel(text["loss"])
    axes.set_title(text["curve"].format(label=label))
    axes.legend(fontsize=8)
    save(figure, out / f"curve{text['suffix']}.png")
    return easy


def draw_patterns(params: dict, n_head: int, labels: list[str], ids, label: str,
                  path: Path, text: dict) -> dict:
    """The attention of the best previous-token head and the best induction head on ids."""
    _, values = trace(ids, params, n_head)
    previous, induction = previous_token_score(values), induction_score(values, ids)
    best = {"previous-token": np.unravel_index(np.argmax(previous), previous.shape),
            "induction": np.unravel_index(np.argmax(induction), induction.shape)}
    figure, grid = plt.subplots(1, 2, figsize=(13, 6.2), layout="constrained")
    for axes, (kind, (layer, head)) in zip(grid, best.items()):
        score = (previous if kind == "previous-token" else induction)[layer, head]
        heatmap(axes, values[f"blocks.{layer}.attn.pattern"][head], labels, ATTENTION,
                text["head"].format(layer=layer, head=head, kind=text[kind], score=score))
        axes.set_xlabel(text["key"])
        axes.set_ylabel(text["query"])
    figure.suptitle(text["patterns"].format(label=label))
    save(figure, path)
    return {kind: (int(layer), int(head), float((previous if kind == "previous-token"
                                                 else induction)[layer, head]))
            for kind, (layer, head) in best.items()}


def views(models_dir: str, name: str, out: Path, language: str = "en") -> None:
    text = TEXT[language]
    use_language(language)
    encoder, hparams, params = load_encoder_hparams_and_params(name, models_dir)
    curve = json.loads((Path(models_dir) / name / "curve.json").read_text())
    label = text["model"].format(n_layer=hparams["n_layer"])
    out.mkdir(parents=True, exist_ok=True)
    easy = draw_curve(curve, label, out, text)
    last = curve["measured"][-1]
    print(f"second copy 1 nat easier than the first at step: {easy}")
    print(f"at the end (step {last['step']}): first copy {last['first']:.2f} nats, second copy "
          f"{last['second']:.2f}; best previous-token score {best_head(last['previous'])}, "
          f"best induction score {best_head(last['induction'])}")
    sentence = encoder.encode(SENTENCE)
    ids = [50256, *sentence, *sentence]
    best = draw_patterns(params, hparams["n_head"], token_labels(encoder, ids), ids, label,
                         out / f"patterns{text['suffix']}.png", text)
    print(f"on the sentence twice: {best}")
    lens(encoder, params, hparams["n_head"])
    similarity = cosine_similarity(np.asarray(params["wpe"], np.float64))
    near, far = np.mean(np.diagonal(similarity, 1)), np.mean(similarity[np.triu_indices(
        len(similarity), len(similarity) // 4)])
    print(f"wpe cosine similarity: neighbours {near:.3f}, a quarter of the context or more "
          f"apart {far:.3f}")
    figure, axes = plt.subplots(figsize=(5.6, 4.8))
    heatmap(axes, similarity, None, SIMILARITY, text["wpe"].format(label=label))
    axes.set_xlabel(text["j"])
    axes.set_ylabel(text["i"])
    save(figure, out / f"wpe-similarity{text['suffix']}.png")


def best_head(scores: list) -> str:
    layer, head = np.unravel_index(np.argmax(scores), np.shape(scores))
    return f"{np.max(scores):.2f} at layer {layer} head {head}"


def lens(encoder, params: dict, n_head: int) -> None:
    """The logit lens on held-out text (the licences' paragraphs the train command held out,
    never trained on, each after its start token): the share of next tokens each residual
    stream ranks first, and their mean probability."""
    from picogpt.inside import residual_names
    from picogpt.model import layer_norm, softmax
    from picogpt.tasks.text import hold_out, paragraph_ids, paragraphs

    _, held = hold_out(paragraphs(license_text()))
    held_out = paragraph_ids(held, encoder)[: len(params["wpe"])].tolist()
    _, values = trace(held_out, params, n_head)
    targets = np.array(held_out[1:])
    for row, name in enumerate(residual_names(len(params["blocks"]))):
        probs = softmax(layer_norm(values[name], **params["ln_f"]) @ params["wte"].T)[:-1]
        label = "embeddings" if row == 0 else f"after block {row - 1}"
        print(f"logit lens, {label}: top-1 {np.mean(probs.argmax(-1) == targets):.3f}, "
              f"p(next) {probs[np.arange(len(targets)), targets].mean():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["train", "views"])
    parser.add_argument("--models_dir", default="/tmp/demo/models")
    parser.add_argument("--name", default="demo")
    parser.add_argument("--steps", type=int, default=SETTINGS["steps"])
    parser.add_argument("--out", type=Path, default=Path("docs/induction"))
    parser.add_argument("--language", choices=sorted(TEXT), default="en",
                        help="the language of the pictures' titles and axes (views)")
    args = parser.parse_args()
    if args.what == "train":
        train_demo(args.models_dir, args.name, args.steps)
    else:
        views(args.models_dir, args.name, args.out, args.language)


if __name__ == "__main__":
    main()
