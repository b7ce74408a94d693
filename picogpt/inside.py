"""The inside view: what each layer computes, which tokens it weighed, what it nearly said.

It holds `trace` (the forward pass with every intermediate value kept, under TransformerLens's hook
names without `hook_`), `run_with_hooks` (the same pass, each value shown to a hook as it is made
and kept by no one unless the hook keeps it), `logit_lens`, `cosine_similarity` and the head
scores. trace runs model.py's own functions in `gpt2`'s order, so its logits equal `gpt2`'s bit
for bit (a test checks it).
"""

from collections.abc import Callable, Collection

import numpy as np

from .encoder import N_VOCAB
from .model import attention_scores, embed, ffn, future_mask, gelu, layer_norm, mha, softmax
from .sampling import most_likely

# Positions whose [n, n_vocab] lens probabilities are made at once: a 1,000-position stream's
# whole would be 200 MB on GPT-2's vocabulary, and softmax and the top-k pick copy it twice.
LENS_CHUNK = 32


def trace(ids, params: dict, n_head: int,
          names: Collection[str] | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The plain forward pass's [n_seq, n_vocab] logits, and its named intermediate values.

    Names: embed, pos_embed, ln_final, and for each block i: blocks.{i}.resid_pre,
    blocks.{i}.attn.q, .attn.k, .attn.v ([n_head, n_seq, d_head]), blocks.{i}.attn.attn_scores
    ([n_head, n_seq, n_seq], scaled and masked, before the softmax), blocks.{i}.attn.pattern
    (the same after the softmax: rows sum to 1), blocks.{i}.attn.z ([n_head, n_seq, d_head],
    the heads' outputs before c_proj), blocks.{i}.attn_out, blocks.{i}.resid_mid,
    blocks.{i}.mlp.pre and blocks.{i}.mlp.post ([n_seq, 4 * n_embd], before and after GELU),
    blocks.{i}.mlp_out, blocks.{i}.resid_post. `names` keeps only those (the scores and
    patterns are the big ones).
    """
    values = {}

    def keep(name: str, value: np.ndarray, row: int = 0) -> None:
        if names is None or name in names:
            values[name] = value

    return run_with_hooks(ids, params, n_head, keep) @ params["wte"].T, values  # [n_seq, n_vocab]


def run_with_hooks(ids, params: dict, n_head: int, hook: Callable[..., None],
                   rows: int | None = None) -> np.ndarray:  # [n_seq] ids -> [n_seq, n_embd]
    """gpt2's forward pass up to ln_final (returned), calling hook(name, value) on each value
    trace names as it is made. With rows, each block's attention, and its MLP's GELU, run that
    many positions (queries) at a time: hook then sees attn.attn_scores, attn.pattern, mlp.pre
    and mlp.post in pieces, as hook(name, value, row) with value's first row, and no block's
    whole [n_head, n_seq, n_seq] pattern is ever held. The products with the weights stay whole,
    as gpt2 makes them: BLAS may round a piece's rows otherwise than the whole's."""
    ids = np.asarray(ids)
    n_seq = ids.shape[-1]
    step = rows or n_seq

    def in_pieces(run: Callable[[int], np.ndarray]) -> np.ndarray:  # run(row): rows row, ...
        pieces = [run(row) for row in range(0, n_seq, step)]  # without rows, the whole at once
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=-2)

    x = embed(ids, params["wte"], params["wpe"])  # [..., n_seq, n_embd]
    hook("embed", params["wte"][ids])  # its two parts
    hook("pos_embed", params["wpe"][:n_seq])
    for i, block in enumerate(params["blocks"]):  # transformer_block, with its parts named
        at = f"blocks.{i}."

        def attend(q, k, v, at=at):  # mha's attention step: causal_attention, values shown
            for name, value in (("q", q), ("k", k), ("v", v)):
                hook(f"{at}attn.{name}", value)
            mask = future_mask(n_seq, n_seq, q.dtype)

            def queries(row: int) -> np.ndarray:  # -> [..., n_head, step, d_head]
                scores = attention_scores(q[..., row : row + step, :], k, mask[row : row + step])
                hook(f"{at}attn.attn_scores", scores, row)  # [..., n_head, step, n_seq]
                pattern = softmax(scores)
                hook(f"{at}attn.pattern", pattern, row)
                return pattern @ v

            z = in_pieces(queries)
            hook(f"{at}attn.z", z)
            return z

        def activation(pre: np.ndarray, at=at) -> np.ndarray:  # ffn's GELU, rows at a time
            post = np.empty_like(pre)  # [..., n_seq, 4 * n_embd], written piece by piece
            for row in range(0, n_seq, step):
                hook(f"{at}mlp.pre", pre[..., row : row + step, :], row)
                post[..., row : row + step, :] = gelu(pre[..., row : row + step, :])
                hook(f"{at}mlp.post", post[..., row : row + step, :], row)
            return post

        hook(f"{at}resid_pre", x)
        attn_out = mha(layer_norm(x, **block["ln_1"]), **block["attn"], n_head=n_head,
                       attend=attend)
        hook(f"{at}attn_out", attn_out)
        x = x + attn_out
        hook(f"{at}resid_mid", x)
        mlp_out = ffn(layer_norm(x, **block["ln_2"]), **block["mlp"], activation=activation)
        hook(f"{at}mlp_out", mlp_out)
        x = x + mlp_out
        hook(f"{at}resid_post", x)
    ln_final = layer_norm(x, **params["ln_f"])
    hook("ln_final", ln_final)
    return ln_final


def residual_names(n_layer: int) -> list[str]:
    """The residual stream before block 0 and after each block: the logit lens's rows."""
    return ["blocks.0.resid_pre", *(f"blocks.{i}.resid_post" for i in range(n_layer))]


def logit_lens(values: dict[str, np.ndarray], params: dict,
               top: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """What each layer would predict if it were the last: ln_final and the unembedding applied
    to its residual stream. Returns ids and probabilities of the top tokens,
    [n_layer + 1, n_seq, top] each; row 0 is the embeddings, the last row is the model's output.

    Early rows are a rough guide only: ln_f and wte were trained on the last layer's residual
    stream, and earlier layers use the stream in their own way.
    """
    ids, probs = zip(*lens_rows(values, params, top))
    return np.stack(ids), np.stack(probs)


def final_logits(x: np.ndarray, params: dict) -> np.ndarray:  # [..., n_embd] -> [..., n_vocab]
    """ln_f, then the unembedding: what the last block's stream becomes, as gpt2 makes it."""
    return layer_norm(x, **params["ln_f"]) @ params["wte"].T


def lens_rows(values: dict[str, np.ndarray], params: dict, top: int = 5,
              chunk: int = LENS_CHUNK, final: Callable[[np.ndarray], np.ndarray] | None = None):
    """logit_lens one residual stream at a time: (ids, probabilities), [n_seq, top] each. A
    stream's [n_seq, n_vocab] probabilities are made chunk positions at a time, never whole.
    final turns a stream into logits (GPT-2's final_logits unless given: another kind's own
    final norm and unembedding)."""
    final = final or (lambda x: final_logits(x, params))
    for name in residual_names(len(params["blocks"])):
        stream, pieces = values[name], []  # [n_seq, n_embd]
        for row in range(0, stream.shape[-2], chunk):
            layer_probs = softmax(final(stream[..., row : row + chunk, :]))  # [chunk, n_vocab]
            best = most_likely(layer_probs, top)  # [chunk, top]
            pieces.append((best, np.take_along_axis(layer_probs, best, axis=-1)))
        ids, probs = zip(*pieces)
        yield np.concatenate(ids, axis=-2), np.concatenate(probs, axis=-2)


def cosine_similarity(x: np.ndarray) -> np.ndarray:  # [n, d] -> [n, n]
    """Cosine of the angle between every two rows."""
    unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return unit @ unit.T


# ---- head scores: which heads do a recognisable job -----------------------------------------
# Each takes the values `trace` returns (any model's) and gives an [n_layer, n_head] array of
# attention weights, averaged over the positions where the job applies. They follow Olsson et
# al., "In-context Learning and Induction Heads" (2022), and are what TransformerLens users know
# as head detectors ("previous_token_head", "induction_head"). The pattern of block i is
# values["blocks.{i}.attn.pattern"], [n_head, n_seq, n_seq], rows the queries.
#
# A job is two arrays: keys, [n_seq, n_seq] bool, the positions each query should look at, and
# queries, [n_seq] bool, where the job applies. A head's score is each such query's summed weight
# on its keys (job_weights), averaged over those queries. A query's weight needs only its own row
# of the pattern, so a page can score each block's rows as they are made and keep none of them.


def score(values: dict[str, np.ndarray], job: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """A head score of every block's pattern in values, one block at a time: [n_layer, n_head]."""
    n_layer = sum(1 for name in values if name.endswith(".attn.pattern"))
    keys, queries = job
    return np.stack([job_weights(values[f"blocks.{i}.attn.pattern"], keys)[..., queries]
                     .mean(axis=-1) for i in range(n_layer)])


def job_weights(pattern: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each query's summed weight on the keys that do the job: a pattern's rows (all of them,
    or a piece of them as run_with_hooks makes it) and the job's keys for the same rows."""
    return (pattern * keys).sum(axis=-1)  # [n_head, n_q, n_seq], [n_q, n_seq] -> [n_head, n_q]


def previous_token_job(n_seq: int) -> tuple[np.ndarray, np.ndarray]:
    """Query i >= 1 looks at position i - 1."""
    if n_seq < 2:
        raise ValueError("a previous-token score needs at least 2 positions")
    return np.eye(n_seq, k=-1, dtype=bool), np.arange(n_seq) >= 1


def first_token_job(n_seq: int) -> tuple[np.ndarray, np.ndarray]:
    """Query i >= 1 looks at position 0."""
    if n_seq < 2:
        raise ValueError("a first-token score needs at least 2 positions")
    keys = np.zeros((n_seq, n_seq), bool)
    keys[:, 0] = True
    return keys, np.arange(n_seq) >= 1


def induction_job(ids) -> tuple[np.ndarray, np.ndarray]:
    """Query i, whose token ids[i] occurred before at positions j < i, looks at every j + 1
    (the tokens that followed the earlier occurrences)."""
    ids = np.asarray(ids)
    n_seq = ids.shape[-1]
    same = (ids[:, None] == ids[None, :]) & np.tri(n_seq, k=-1, dtype=bool)  # [n_seq, n_seq]
    after = np.zeros((n_seq, n_seq), bool)  # query i -> key j + 1, for each earlier j
    after[:, 1:] = same[:, :-1]
    repeated = same.any(axis=-1)  # [n_seq] queries whose token came before
    if not repeated.any():
        raise ValueError("an induction score needs a token that occurs twice in ids")
    return after, repeated


def previous_token_score(values: dict[str, np.ndarray]) -> np.ndarray:  # -> [n_layer, n_head]
    """For each query position i >= 1, the weight on position i - 1, averaged over those i."""
    return score(values, previous_token_job(values["blocks.0.attn.pattern"].shape[-1]))


def first_token_score(values: dict[str, np.ndarray]) -> np.ndarray:  # -> [n_layer, n_head]
    """For each query position i >= 1, the weight on position 0, averaged over those i."""
    return score(values, first_token_job(values["blocks.0.attn.pattern"].shape[-1]))


def induction_score(values: dict[str, np.ndarray], ids) -> np.ndarray:  # -> [n_layer, n_head]
    """For each query position i whose token ids[i] occurred before, at positions j < i, the
    summed weight on the positions j + 1 (the tokens that followed the earlier occurrences),
    averaged over those positions i."""
    return score(values, induction_job(ids))


def line_places(ids, breaks) -> tuple[np.ndarray, np.ndarray]:  # [n_seq] -> [n_seq], [n_seq]
    """Each position's line (0, 1, ...) and place in its line (0, 1, ...), where a token of
    breaks (a line break, or the ，。 that end a half-line of verse) is the last of its line."""
    is_break = np.isin(np.asarray(ids), list(breaks))  # [n_seq]
    line = np.concatenate([[0], np.cumsum(is_break)[:-1]])  # a break's line ends after it
    starts = np.flatnonzero(np.diff(line, prepend=-1))  # [n_line] where each line starts
    return line, np.arange(len(line)) - starts[line]


def last_break_job(ids, breaks) -> tuple[np.ndarray, np.ndarray]:
    """Query i, with a break token (of breaks) before it, looks at the latest such j < i."""
    is_break = np.isin(np.asarray(ids), list(breaks))  # [n_seq]
    n_seq = is_break.shape[-1]
    latest = np.maximum.accumulate(np.where(is_break, np.arange(n_seq), -1))  # [n_seq]
    before = np.concatenate([[-1], latest[:-1]])  # [n_seq] latest break j < i, or -1
    queries = np.flatnonzero(before >= 0)
    if not queries.size:
        raise ValueError("a last-break score needs a break token before some position")
    return one_key_each(n_seq, queries, before[queries])


def previous_line_job(ids, breaks) -> tuple[np.ndarray, np.ndarray]:
    """Query i, at place p of line k >= 1 whose line k - 1 has a place p, looks at that place."""
    line, place = line_places(ids, breaks)
    above = {(k, p): j for j, (k, p) in enumerate(zip(line.tolist(), place.tolist()))}
    pairs = [(i, above[k - 1, p]) for i, (k, p) in enumerate(zip(line.tolist(), place.tolist()))
             if (k - 1, p) in above]
    if not pairs:
        raise ValueError("a previous-line score needs two lines in ids")
    queries, keys = np.array(pairs).T
    return one_key_each(len(line), queries, keys)


def rhyme_job(ids, ends) -> tuple[np.ndarray, np.ndarray]:
    """Query i, whose next token is the last character of a 下句 after the first (a 下句 is ended
    by a token of ends, as 。), looks at the last character of the 下句 before it."""
    ids = np.asarray(ids)
    last = np.flatnonzero(np.isin(ids[1:], list(ends)))  # [n_xia] each 下句's last character
    if len(last) < 2:
        raise ValueError("a rhyme score needs two 下句 in ids")
    return one_key_each(len(ids), last[1:] - 1, last[:-1])


def one_key_each(n_seq: int, queries: np.ndarray, keys: np.ndarray):
    """The job in which query queries[m] looks at position keys[m] alone."""
    where = np.zeros((n_seq, n_seq), bool)
    where[queries, keys] = True
    return where, where.any(axis=-1)


def last_break_score(values: dict[str, np.ndarray], ids, breaks) -> np.ndarray:
    """For each query position i with a break token (of breaks) before it, the weight on the
    latest such position j < i, averaged over those i: the head that counts within a line."""
    return score(values, last_break_job(ids, breaks))  # [n_layer, n_head]


def previous_line_score(values: dict[str, np.ndarray], ids, breaks) -> np.ndarray:
    """For each query position i at place p of line k >= 1 whose line k - 1 has a place p,
    the weight on that position, averaged over those i: the head that reads the line above."""
    return score(values, previous_line_job(ids, breaks))  # [n_layer, n_head]


def rhyme_score(values: dict[str, np.ndarray], ids, ends) -> np.ndarray:
    """For each query position i whose next token is the last character of a 下句 after the
    first, the weight on the last character of the 下句 before it (the rhyme it must match),
    averaged over those i: the head that reads the rhyme."""
    return score(values, rhyme_job(ids, ends))  # [n_layer, n_head]


def repeated_tokens(n: int, seed: int = 0, n_vocab: int = N_VOCAB) -> list[int]:
    """<|endoftext|>, n random token ids, and the same n again: a text in which only an
    induction head can predict the second half (its tokens never repeat by chance)."""
    rng = np.random.default_rng(seed)
    first = rng.choice(n_vocab - 1, n, replace=False)  # distinct, and never <|endoftext|>
    return [n_vocab - 1, *first.tolist(), *first.tolist()]
