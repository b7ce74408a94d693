"""The --explain page of a couplet model:

    picogpt "海阔凭鱼跃" --model_size dui --explain page.html

One self-contained file, as page.py writes GPT-2's (the template `couplet.html`, with the shared
views.css and views.js inlined): the 上句, the 下句 the run wrote, and per layer and head the
encoder's self-attention (上句 × 上句), the decoder's masked self-attention (下句 × 下句, from the
start token) and the cross-attention (下句 × 上句), with each cross-attention head's 对位 score.
Every number on it is one that transformer/inside.py's `trace_seq2seq` or `same_position_score`
returned for the pair, run as the decoder ran it: the start token, then the 下句 it wrote.
"""

import numpy as np

from ..chars import Chars
from ..model import softmax
from ..show import piece
from ..transformer.inside import same_position_score, trace_seq2seq
from .page import fill, titled
from .views import float32_base64


def couplet_data(first: str, second: str, params: dict, hparams: dict, encoder: Chars,
                 settings: dict, model: dict) -> dict:
    """Everything the page shows of a 上句 and the 下句 written for it. settings: the sampler's
    (top_k, top_p, temperature, seed); model: as LoadedModel.about() names it."""
    n_layer, n_dec_layer = len(params["encoder"]["blocks"]), len(params["decoder"]["blocks"])
    src = encoder.encode(first)  # [n]
    written = [*encoder.encode(second), encoder.end]  # [n + 1]: what each decoder row writes
    tgt = [encoder.start, *written[:-1]]  # [n + 1]: what each decoder row reads
    wanted = {f"encoder.blocks.{i}.attn.pattern" for i in range(n_layer)} | {
        f"decoder.blocks.{i}.{kind}.pattern" for i in range(n_dec_layer)
        for kind in ("attn", "cross_attn")}
    logits, values = trace_seq2seq(src, tgt, params, hparams, names=wanted)
    probs = softmax(logits.astype(np.float64))[np.arange(len(written)), written]

    def patterns(side: str, kind: str, n: int) -> str:  # [n, n_head, n_q, n_k], base64
        return float32_base64(np.stack([values[f"{side}.blocks.{i}.{kind}.pattern"]
                                        for i in range(n)]))

    return {"model": {**titled(model, params, encoder), "seq2seq": True,
                      "n_dec_layer": n_dec_layer},
            "settings": settings, "n_head": hparams["n_head"], "n_layer": n_layer,
            "n_dec_layer": n_dec_layer,
            "source": [piece(encoder, i) for i in src],
            "reads": [piece(encoder, i) for i in tgt],
            "writes": [piece(encoder, i) for i in written],
            "probs": [round(float(p), 4) for p in probs],
            "encoder": patterns("encoder", "attn", n_layer),
            "decoder": patterns("decoder", "attn", n_dec_layer),
            "cross": patterns("decoder", "cross_attn", n_dec_layer),
            "same_position": same_position_score(values).round(4).tolist()}


def write_couplet_page(path: str, data: dict) -> None:
    """The page of couplet_data's data, written to path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(fill("couplet.html", data))
