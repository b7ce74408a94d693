"""The --explain page of a couplet model:

    picogpt "海阔凭鱼跃" --model_size dui --explain page.html
    picogpt "海阔凭鱼跃，天高任鸟飞" --model_size dui --explain page.html

One self-contained file, as page.py writes GPT-2's (the template `couplet.html`, with the shared
views.css and views.js inlined): the 上句, the 下句 the run wrote, and per layer and head the
encoder's self-attention (上句 × 上句), the decoder's masked self-attention (下句 × 下句, from the
start token) and the cross-attention (下句 × 上句), with each cross-attention head's 对位 score.
Every attention weight and 对位 score on it is one that transformer/inside.py's `trace_seq2seq`
or `same_position_score` returned for the pair, run as the decoder ran it: the start token, then
the 下句. Each character's p is the one transformer/decoding.py's loop gave it: its probability in
the distribution it was drawn from (under the length mask, after the sampler's filters), or, when
the prompt is a whole 联, the model's own distribution, masked, at each step the poet's character
was fed in (teacher forcing). The cross-attention panel opens on its most aligned head.
"""

import numpy as np

from ..chars import Chars
from ..show import piece
from ..transformer.decoding import Written
from ..transformer.inside import same_position_score, trace_seq2seq
from .page import fill, titled
from .views import float32_base64


def couplet_data(first: str, made: Written, params: dict, hparams: dict, encoder: Chars,
                 settings: dict, model: dict, forced: bool = False) -> dict:
    """Everything the page shows of a 上句 and the 下句 decoding.py's loop wrote for it (made: one
    row, the 下句 and its end), or fed in when forced (the poet's own). settings: the sampler's
    (top_k, top_p, temperature, seed); model: as LoadedModel.about() names it."""
    n_layer, n_dec_layer = len(params["encoder"]["blocks"]), len(params["decoder"]["blocks"])
    src = encoder.encode(first)  # [n]
    written = made.ids[0].tolist()  # [n + 1]: what each decoder row writes, the end last
    tgt = [encoder.start, *written[:-1]]  # [n + 1]: what each decoder row reads
    wanted = {f"encoder.blocks.{i}.attn.pattern" for i in range(n_layer)} | {
        f"decoder.blocks.{i}.{kind}.pattern" for i in range(n_dec_layer)
        for kind in ("attn", "cross_attn")}
    _logits, values = trace_seq2seq(src, tgt, params, hparams, names=wanted)
    same = same_position_score(values)  # [n_dec_layer, n_head]

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
            "probs": [round(float(p), 4) for p in made.probs[0]], "forced": forced,
            "encoder": patterns("encoder", "attn", n_layer),
            "decoder": patterns("decoder", "attn", n_dec_layer),
            "cross": patterns("decoder", "cross_attn", n_dec_layer),
            "same_position": same.round(4).tolist(),
            # the cross-attention panel opens on the head of the highest 对位 score
            "best_cross": [int(i) for i in np.unravel_index(np.argmax(same), same.shape)]}


def write_couplet_page(path: str, data: dict) -> None:
    """The page of couplet_data's data, written to path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(fill("couplet.html", data))
