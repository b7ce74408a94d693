"""Every word the pages show (the --explain page and the --explore page), from the message
catalog: `page.fill` inlines them in both languages, and the pages' language buttons choose
between them. A `{field}` in a text is filled in by the page's script (views.js, `Views.t`).
"""

from ..errors import LANGUAGES, _, speaking


def page_words() -> dict[str, str]:
    """The pages' texts, by the key the scripts and the data-t attributes use, in the
    current language."""
    return {
        "h_prompt": _("Prompt"),
        "n_prompt": _("Type or change the text: its tokens and the next token's distribution "
                      "follow as you type."),
        "h_next": _("Next token"),
        "n_next": _("The most likely next tokens, as the model gives them (before, grey) and "
                    "after the sampler's filters (after, blue). Move a control and the "
                    "distribution changes at once: no new model call. Click a candidate to append"
                    " it."),
        "temperature": _("temperature"),
        "top_k": _("top-k"),
        "top_p": _("top-p"),
        "penalty": _("repetition penalty"),
        "off": _("off"),
        "line": _("line length"),
        "line_any": _("any length"),
        "acrostic": _("acrostic"),
        "rhyme": _("rhyme"),
        "n_verse": _("A poem's form, as a mask on the logits: every token that would break it "
                     "gets -inf before the sampler's filters, so its after bar is empty. The "
                     "whole text is the poem so far. Line length: each line that many Chinese "
                     "characters, then ， and 。 alternately. Acrostic: line i starts with its "
                     "i-th character (藏头诗). Rhyme: each line that ends in 。 ends on a "
                     "character that rhymes with the first such line's last (十三辙). Once the "
                     "poem is complete, the mask lifts."),
        "greedy": _("take the greedy token"),
        "draw": _("draw with seed"),
        "back": _("back one step"),
        "generate": _("generate"),
        "n_generate": _("tokens"),
        "busy": _("working ..."),
        "h_tokens": _("Tokens"),
        "n_tokens": _("Each BPE piece with its id. Grey: the prompt; blue: generated (click one "
                      "to see its step). A piece that holds only part of a UTF-8 character shows "
                      "its bytes in hex; the character its pieces form together is written under "
                      "them, in a dashed box."),
        "n_tokens_wordpiece": _("Each WordPiece token with its id: the model's own list of whole "
                                "tokens (in BERT's Chinese vocabulary, one for each character); "
                                "a piece inside a word is shown without its ##. Grey: the "
                                "prompt; blue: generated (click one to see its step)."),
        "n_tokens_chars": _("Each token with its id: a character vocabulary, one character a "
                                "token (a line break too); a character training saw fewer than "
                                "twice is <|unknown|>. Grey: the prompt; blue: generated (click one"
                                " to see its step)."),
        "h_steps": _("Step candidates"),
        "n_steps": _("The distribution each generated token was drawn from: the most likely "
                     "candidates with their probability as the model gave it (before, grey) and "
                     "after the sampling filters (after, blue). Each column's bars are drawn "
                     "against the largest value in that column, given in its header."),
        "step": _("step"),
        "candidate": _("candidate"),
        "before": _("before"),
        "after": _("after"),
        "h_attn": _("Attention"),
        "n_attn": _("Row: a query position; column: a key position it may look at (only earlier "
                    "ones: the mask is causal). The tokens label both axes. Every row sums to 1. "
                    "Hover for the exact weight."),
        "layer": _("layer"),
        "head": _("head"),
        "head_kv": _("{h} · kv {kv}"),
        "n_attn_gqa": _("This model's {n_head} query heads share {n_kv_head} key/value heads, "
                        "{group} query heads to each (grouped-query attention): query head h "
                        "reads key/value head h // {group}, as transformers' repeat_kv does. "
                        "Each head is named with the key/value head it reads. Heads that share "
                        "one look at the same keys, each with its own queries, so their "
                        "patterns can still differ."),
        "overview": _("all heads of this layer (click one)"),
        "scale_attn": _("weight: white is 0, blue is 1; the shade follows the square root of the "
                        "weight, so that small weights stay visible"),
        "h_heads": _("Head scores"),
        "n_heads": _("For each layer (row) and head (column), averaged over this text: the weight"
                     " on the previous token, the weight on the first token, and, at a token seen"
                     " before, the weight on the tokens that followed it then (an induction "
                     "head). Click a cell to see that head's attention above."),
        "scale_heads": _("score: white is 0, blue is 1"),
        "score_previous": _("previous token"),
        "score_first": _("first token"),
        "score_induction": _("induction"),
        "no_repeat": _("no token of this text occurs twice, so there is no induction score"),
        "one_token": _("the text is one token long: there is no earlier token to score"),
        "h_lens": _("Logit lens"),
        "n_lens": _("What each layer would predict next if it were the last (ln_f and the "
                    "unembedding applied to its residual stream): the top token and its "
                    "probability. Early layers are a rough guide only; the last row is the "
                    "model's own prediction. Hover for the top 3."),
        "scale_lens": _("cell colour: the top token's probability, from clear (0) to blue (1)"),
        "lens_layer": _("layer"),
        "lens_scroll": _("The table is wider than the page: scroll it sideways (the layer "
                         "column stays in place)."),
        "embed": _("embed"),
        "block": _("block"),
        "h_wpe": _("Position embeddings"),
        "n_wpe": _("Cosine similarity of the learned position embeddings wpe, for the first "
                   "positions: row i, column j compares position i with position j."),
        "scale_wpe": _("cosine similarity: black is 0 or below, white is 1"),
        "mode_sample": _("sample"),
        "mode_greedy": _("greedy"),
        "note_sample": _("sampling: each token is drawn at random from the blue bars (after the "
                         "filters); the seed makes a draw repeatable."),
        "note_greedy": _("greedy: temperature, top-k, top-p and seed have no effect; the most "
                         "likely token (▶) is always taken."),
        "all": _("all"),
        "stop": _("stop"),
        "inside_busy": _("computing the inside views …"),
        "changed": _("Another tab changed the text: this tab now shows the text as it is."),
        "lost": _("The picogpt server is not answering (stopped?): start picogpt --explore again "
                  "and open the address it prints."),
        "title": _("Inside one run of {model}"),
        "explore_title": _("Explore {model}"),
        "count_one": _("{n} token of the {ctx} the model can read"),
        "count": _("{n} tokens of the {ctx} the model can read"),
        "entropy": _("entropy after the filters: {e} nats"),
        "most": _("{label} (max {value})"),
        "chosen": _("chosen {token} (id {id}), entropy {e} nats"),
        "range": _("(positions {a} to {b} only: the page keeps the last {n} to stay small)"),
        "tip": _("layer {l} head {h}: query {q} {tq} -> key {k} {tk}: {w}"),
        "head_tip": _("{kind}: layer {l} head {h}: {v}"),
        "tip_kv": _("layer {l} head {h} · kv {kv}: query {q} {tq} -> key {k} {tk}: {w}"),
        "head_tip_kv": _("{kind}: layer {l} head {h} · kv {kv}: {v}"),
        "settings": _("{model}: {n} tokens ({p} prompt, {g} generated). {how}, repetition penalty"
                      " {penalty}."),
        "sampling_run": _("sampling: temperature {temperature}, top_k {top_k}, top_p {top_p}, "
                          "seed {seed}"),
        "unset_seed": _("none"),
        "released": _("GPT-2 {size}"),
        "trained": _("\"{name}\", a {n_layer}-layer model trained by picogpt (not GPT-2)"),
        "hf": _("the Hugging Face model {name} (GPT-2's architecture)"),
        "hf_llama": _("the Hugging Face model {name} (the LLaMA family's architecture)"),
        "random": _("a {n_layer}-layer model with random weights (not GPT-2)"),
        "pending": _("not in the box: the bytes {bytes}, part of a character the next pieces may "
                     "finish (back one step takes them away)"),
        "stray": _("not in the box: the bytes {bytes}, which begin no character (typing in the "
                   "box drops them; the text after them is kept)"),
        "dropped": _("Typing set the text from the box: the bytes {bytes}, which the box cannot "
                     "hold, were dropped."),
        "replaced": _("The box held typing the model did not take (see above): it now shows the "
                      "model's text again, with the step."),
        "retokenized_one": _("Typing tokenized the text again: 1 token before the edit became "
                             "other tokens (the strip shows the new ones)."),
        "retokenized": _("Typing tokenized the text again: {n} tokens before the edit became "
                         "other tokens (the strip shows the new ones)."),
        **couplet_words(),
    }


def couplet_words() -> dict[str, str]:
    """The couplet model's page's own texts (web/couplet.html), in the current language."""
    return {
        "couplet_trained": _("\"{name}\", a couplet model trained by picogpt (an encoder-decoder "
                             "of {n_layer} + {n_dec_layer} layers, not GPT-2)"),
        "couplet_random": _("a couplet model with random weights (an encoder-decoder of {n_layer}"
                            " + {n_dec_layer} layers, not GPT-2)"),
        "couplet_settings": _("{model}. A 上句 of {n} characters, and the 下句 the model wrote for "
                              "it, as long (a mask on the logits); {how}."),
        "couplet_distinct": _("No character twice in the 下句 unless the 上句 repeats one at "
                              "the same places (--distinct: a mask on the logits, as the length "
                              "is)."),
        "couplet_settings_forced": _("{model}. A whole 联 of {n} characters a 句: the poet's own "
                                     "下句 fed to the decoder a character at a time (teacher "
                                     "forcing), not one the model wrote."),
        "h_couplet": _("上句 and 下句"),
        "n_couplet": _("The encoder reads the whole 上句. The decoder writes the 下句 a character "
                       "at a time: it reads the start token and then each character it wrote, "
                       "and writes the next, until the 下句 is as long as the 上句; then the end. "
                       "Under each character, its id; p: its probability in the distribution it "
                       "was drawn from: the model's, given the 上句 and the characters before it, "
                       "under the masks it was written with (the length: no end before the 下句 "
                       "is as long as the 上句, then only the end; and --distinct's, said above)"
                       " and after the sampler's filters."),
        "n_couplet_forced": _("The encoder reads the whole 上句. The decoder reads the start token "
                              "and then each character of the poet's 下句, and at each step "
                              "gives its distribution of the next: the model's own, masked "
                              "(no end before the 下句 is as long as the 上句, then only the "
                              "end), no sampler. Under each character, its id; p: the "
                              "probability that distribution gives the poet's character, forced "
                              "in at that step."),
        "row_first": _("上句"),
        "row_second": _("下句"),
        "row_p": _("p"),
        "p_title": _("the probability of the token written in this column, in the "
                     "distribution it was drawn from (masked, filtered)"),
        "p_title_forced": _("the model's probability, masked, of the poet's token fed in at this "
                            "column"),
        "end": _("end"),
        "end_title": _("the end: the token {token} (id {id}), which in this vocabulary also "
                       "starts"),
        "n_couplet_attn": _("Three kinds of attention, each with its own layer and head (choose "
                            "them above each picture). Every row sums to 1. Hover a cell for the "
                            "exact weight."),
        "h_enc": _("The encoder's self-attention: 上句 × 上句"),
        "n_enc": _("Row: a character of the 上句, as a query; column: a character it looks at. "
                   "No mask: each character sees the whole 上句, the later characters too."),
        "h_dec": _("The decoder's masked self-attention: 下句 × 下句"),
        "n_dec": _("Row: a position of the decoder, named by the character it writes (the last "
                   "writes the end); column: a token it reads (the start token, then the 下句's "
                   "characters). The mask is causal: the row that writes character i sees the "
                   "start token and the characters before i only."),
        "h_cross": _("Cross-attention: 下句 × 上句"),
        "n_cross": _("Row: a position of the decoder, named by the character it writes; column: "
                     "a character of the 上句. The queries come from the decoder, the keys and "
                     "values from the encoder's output. No mask: every row sees the whole 上句. "
                     "A head that serves 对仗 lights the diagonal: writing character i, it looks "
                     "at the 上句's character i. Under each head of the layer: its 对位 score."),
        "h_same": _("对位 scores (same position)"),
        "n_same": _("For each decoder layer (row) and head (column): the cross-attention weight "
                    "that the row writing the 下句's character i puts on the 上句's character i, "
                    "averaged over every character i. The last row, which writes the end, has no"
                    " 上句 character to answer and is not counted. 1: the head looks at the same "
                    "position only; 1/n for a 上句 of n characters: no more than a head that "
                    "spreads its weight evenly. Click a cell to see that head above."),
        "score_same_position": _("对位"),
        "same_badge": _("对位 {v}"),
        "tip_dec": _("layer {l} head {h}: row {q} (writes {wq}) -> reads {k} {tk}: {w}"),
        "tip_cross": _("layer {l} head {h}: row {q} (writes {wq}) -> 上句 {k} {tk}: {w}"),
    }


def both_languages() -> dict[str, dict[str, str]]:
    """The pages' texts in every language picogpt speaks: {"en": {...}, "zh": {...}}."""
    words = {}
    for lang in LANGUAGES:
        with speaking(lang):
            words[lang] = page_words()
    return words
