"""Training on a vocabulary of the text's own (--n_vocab): the BPE learner against merges counted
by hand and against a plain recount, the files it writes read back by picogpt's own reader, a
model trained with it in every mode, and the held-out loss per byte."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_openai import assert_one_line_error, picogpt

from picogpt import generate, load_encoder_hparams_and_params
from picogpt.cli.train import main
from picogpt.encoder import PIECES, SPECIAL, Encoder, bytes_to_unicode
from picogpt.errors import PicoGPTError
from picogpt.files.folder_vocab import read_vocab
from picogpt.merges import bpe_files, learn_merges

CORPUS = Path(__file__).parent / "data" / "corpus.txt"


def test_merges_of_a_tiny_text_equal_merges_counted_by_hand():
    """"the then the hen" is four pieces, each once: the, Ġthen, Ġthe, Ġhen. Pairs: t h 3,
    h e 4, e n 2, Ġ t 2, Ġ h 1, so h e first. Then t he 3 (the, Ġthen, Ġthe); then Ġ the 2
    (Ġthen, Ġthe). Left: Ġthe n, Ġ he, he n, once each: ties, taken in string order, and
    "he" < "Ġ" (U+0068 < U+0120), so he n; then Ġ hen before Ġthe n ("Ġ" < "Ġthe")."""
    by_hand = [("h", "e"), ("t", "he"), ("Ġ", "the"), ("he", "n"), ("Ġ", "hen"), ("Ġthe", "n")]
    merges, pieces = learn_merges("the then the hen", 256 + len(by_hand) + 1)
    assert merges == by_hand
    assert pieces == {"the": ("the",), " then": ("Ġthen",), " the": ("Ġthe",),
                      " hen": ("Ġhen",)}
    assert learn_merges("the then the hen", 256 + 3 + 1)[0] == by_hand[:3]  # stops at n_vocab
    with pytest.raises(PicoGPTError, match=r"n_vocab=264 is more than this text can make: "
                                           r"merging every pair in it gives 263 tokens"):
        learn_merges("the then the hen", 264)


def recounted_merges(text: str, n_merges: int) -> list[tuple[str, str]]:
    """BPE the slow, plain way: after each merge, count every pair of the text's pieces again."""
    spell = bytes_to_unicode()
    words = Counter(tuple(spell[b] for b in piece.encode("utf-8"))
                    for piece in PIECES.findall(text))
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        top = max(pairs.values())
        best = min(pair for pair, n in pairs.items() if n == top)
        merges.append(best)
        merged = Counter()
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if word[i : i + 2] == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


def test_merges_are_learned_in_order_as_a_full_recount_finds_them():
    """On 20 kB of many scripts, the learner, which keeps its counts up to date, makes the
    merges a recount of every pair after every merge makes, in the same order."""
    text = CORPUS.read_text(encoding="utf-8")[:20_000]
    merges, _ = learn_merges(text, 256 + 120 + 1)
    assert len(merges) == 120
    assert merges == recounted_merges(text, 120)


def test_the_encoder_of_the_learned_files_gives_the_ids_the_learner_predicts(tmp_path):
    """The files bpe_files writes, read back by vocab_files.py as a trained model's folder is read,
    encode the training text to the ids of the pieces the learner made, and decode to it."""
    text = CORPUS.read_text(encoding="utf-8")[:60_000]
    merges, pieces = learn_merges(text, 700)
    for name, value in bpe_files(merges).items():
        (tmp_path / name).write_text(value if isinstance(value, str) else json.dumps(value),
                                     encoding="utf-8")
    encoder = read_vocab(tmp_path, "train again")
    table = json.loads((tmp_path / "encoder.json").read_text(encoding="utf-8"))
    assert encoder.n_vocab == len(table) == 700 and table[SPECIAL] == 699 == encoder.end
    spell = bytes_to_unicode()
    assert [table[spell[b]] for b in range(256)] == list(range(256))  # byte b is token b
    assert [table[a + b] for a, b in merges[:5]] == list(range(256, 261))  # then merge order
    predicted = [table[token] for piece in PIECES.findall(text) for token in pieces[piece]]
    ids = encoder.encode(text)
    assert ids == predicted
    assert len(ids) < 0.6 * len(text.encode("utf-8"))  # the merges do shorten the text
    assert encoder.decode(ids) == text


def test_any_text_round_trips_through_a_learned_vocabulary_even_bytes_never_seen():
    """Learned from English alone, the vocabulary still holds all 256 bytes: Chinese, emoji,
    control characters and random code points encode and decode to themselves."""
    english = "one two three four five six seven eight nine ten. " * 50
    merges, _ = learn_merges(english, 280)
    encoder = Encoder(bpe_files(merges)["encoder.json"], merges)
    rng = np.random.default_rng(0)
    points = [p for p in rng.integers(0, 0x110000, 3000) if not 0xD800 <= p < 0xE000]
    texts = ["", "语言模型 👍🏽\0\x7f\r\n\t  é", "".join(map(chr, points)), english[:200],
             "<|endoftext|>", bytes(range(128)).decode("ascii")]
    for text in texts:
        ids = encoder.encode(text)
        assert all(0 <= i < 279 for i in ids)  # never <|endoftext|>, which text never makes
        assert encoder.decode(ids) == text


SHAPE = ["--steps", "4", "--n_embd", "16", "--n_head", "2", "--n_ctx", "16", "--n_batch", "2"]


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """A tiny model trained with --n_vocab 300 on 30 kB of many scripts."""
    root = tmp_path_factory.mktemp("learned")
    text = root / "text.txt"
    text.write_text(CORPUS.read_text(encoding="utf-8")[:30_000], encoding="utf-8")
    done = picogpt(str(text), "--name", "own", "--models_dir", str(root), "--n_vocab", "300",
                   *SHAPE, entry=main)
    assert done.returncode == 0, done.stderr
    return root, done


def test_a_model_trained_with_n_vocab_runs_in_every_mode(learned):
    """Its folder holds its own vocabulary (300 tokens, <|endoftext|> last), and generating,
    scoring, candidates and the --explain page all run on it."""
    root, _ = learned
    encoder, hparams, params = load_encoder_hparams_and_params("own", str(root))
    assert hparams["n_vocab"] == 300 == encoder.n_vocab == len(params["wte"])
    assert encoder.end == 299 and len(encoder.ranks) == 300 - 257
    assert (root / "own" / "vocab.bpe").read_text(encoding="utf-8").startswith("#version")
    common = ["--model_size", "own", "--models_dir", str(root)]
    ids = list(generate(encoder.encode("语言 is"), params, hparams["n_head"], 6,
                        stop_at_end=False))
    done = picogpt("语言 is", *common, "--n_tokens", "6", "--ignore_end")
    assert done.returncode == 0, done.stderr
    assert done.stdout == encoder.decode(ids) + "\n"
    scored = picogpt("语言 is", *common, "--score")
    assert scored.returncode == 0, scored.stderr
    assert (f"{len(encoder.encode('语言 is'))} tokens, {len('语言 is')} characters "
            f"({len('语言 is'.encode())} bytes)") in scored.stdout
    candidates = picogpt("语言 is", *common, "--candidates", "3", "--n_tokens", "2")
    assert candidates.returncode == 0 and "candidates" in candidates.stdout, candidates.stderr
    page = root / "page.html"
    explained = picogpt("语言 is", *common, "--explain", str(page), "--n_tokens", "2")
    assert explained.returncode == 0, explained.stderr
    assert page.stat().st_size > 10_000


def test_the_held_out_loss_is_reported_per_character_too(learned):
    """The summary line and curve.json give the held-out loss per token and per character: per
    token times the held-out tokens (each paragraph's and its start token, the first not
    scored) over the held-out paragraphs' characters, counted here."""
    import re

    from picogpt.files.folder_vocab import read_vocab

    root, done = learned
    encoder = read_vocab(root / "own", "")
    curve = json.loads((root / "own" / "curve.json").read_text(encoding="utf-8"))
    text = CORPUS.read_text(encoding="utf-8")[:30_000]
    parts = [p.strip("\r\n") for p in re.split(r"\n[ \t\r]*\n", text) if p.strip()]
    held = parts[9::10]
    counts = np.cumsum([len(encoder.encode(part)) + 1 for part in held])
    held = held[: max(1, int(np.sum(counts <= 4096)))]  # the command measures 4,096 at most
    n_tokens = sum(len(encoder.encode(part)) + 1 for part in held) - 1
    best = next(m for m in curve["measured"] if m["step"] == curve["best"]["step"])
    assert best["held_out_per_char"] == pytest.approx(
        best["held_out"] * n_tokens / sum(map(len, held)), abs=2e-4)
    summary = [line for line in done.stderr.splitlines() if "held-out text:" in line][0]
    assert (f"{best['held_out']:.3f} nats per token ({best['held_out_per_char']:.3f} per "
            f"character) at step {best['step']}") in summary


@pytest.mark.parametrize("args, message", [
    (["--n_vocab", "256"], "n_vocab=256 is not a whole number from 257 up; a vocabulary "
                           "learned from the text holds the 256 byte tokens and <|endoftext|>"),
    (["--n_vocab", "0"], "n_vocab=0 is not a whole number from 257 up"),
    (["--n_vocab", "3e2"], "n_vocab=300.0 is not a whole number from 257 up"),
    (["--n_vocab", "400", "--vocab_dir", "x"], "--n_vocab learns a vocabulary from the text and "
                                               "--vocab_dir names GPT-2's; give one of them."),
    (["--n_vocab", "5000"], "n_vocab=5000 is more than this text can make: merging every pair "
                            "in it gives"),
])
def test_a_vocabulary_too_small_or_too_large_is_refused_in_one_line(args, message, tmp_path,
                                                                    monkeypatch):
    """Refused before a step is taken, and nothing is written."""
    from picogpt import train as train_module

    def no_step(*args):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(train_module, "loss_and_grads", no_step)
    text = tmp_path / "t.txt"
    text.write_text("hello world, " * 300, encoding="utf-8")
    done = picogpt(str(text), "--models_dir", str(tmp_path / "models"), *args, entry=main)
    assert_one_line_error(done, message)
    assert not (tmp_path / "models").exists()


def test_the_memory_check_counts_the_learned_vocabulary_not_gpt2s(tmp_path, monkeypatch):
    """On a machine of 8 GiB, 64 windows of 1,024 need ~28 GiB with GPT-2's 50,257 tokens and
    ~4 GiB with 257: only the first is refused for memory (the second then finds the text too
    short, before any step)."""
    from picogpt.cli import prepare

    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 8 * 2**30 // 4096}
    monkeypatch.setattr(prepare.os, "sysconf", pages.__getitem__)
    text = tmp_path / "t.txt"
    text.write_text(("hello world, " * 10 + "\n") * 10, encoding="utf-8")
    shape = ["--n_ctx", "1024", "--n_batch", "64", "--models_dir", str(tmp_path / "models")]
    gpt2 = picogpt(str(text), *shape, entry=main)
    assert_one_line_error(gpt2, "needs about 27.6 GiB and this machine has 8.0 GiB")
    own = picogpt(str(text), *shape, "--n_vocab", "257", entry=main)
    assert_one_line_error(own, "is too short: its held-out paragraphs (every tenth) are")


def test_a_context_longer_than_the_learned_vocabulary_trains(tmp_path):
    """The curve's probes are made of distinct tokens; with 260 tokens and a context of 300
    there are too few, and the run trains without them (it crashed in the probes before)."""
    text = tmp_path / "t.txt"
    text.write_text(CORPUS.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    done = picogpt(str(text), "--name", "long", "--models_dir", str(tmp_path), "--n_vocab",
                   "260", "--n_ctx", "300", "--steps", "1", "--n_embd", "16", "--n_head", "2",
                   "--n_batch", "1", entry=main)
    assert done.returncode == 0, done.stderr
    curve = json.loads((tmp_path / "long" / "curve.json").read_text(encoding="utf-8"))
    assert [m["step"] for m in curve["measured"]] == [0, 1] and len(curve["loss"]) == 1
    assert "first" not in curve["measured"][-1]  # held-out text measured, no probes
