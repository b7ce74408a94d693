"""Folders whose vocabulary is a tokenizer.json, as transformers 5 saves GPT-2's and BERT's
tokenizers (tokenizer.json and tokenizer_config.json, nothing else), against transformers
itself: the same ids on tricky text, the same greedy text from `--hf`, and one line for a
tokenizer picogpt cannot run or a folder whose files disagree."""

import json
import shutil
import unicodedata
from pathlib import Path

import pytest
from test_encoder import TRICKY, corpus
from test_hf import PROMPT, SHAPES, random_hf_model
from test_hf_chinese import CLS, SEP, hf_greedy, uer_arrays
from test_hf_chinese import PROMPT as POEM
from test_openai import picogpt
from test_wordpiece import CORPUS, SETTINGS

from picogpt import PicoGPTError
from picogpt.files.folder_vocab import read_vocab
from picogpt.files.openai import read_encoder
from scripts.fixtures.bert_vocab import chinese_vocab, small_vocab, write
from scripts.fixtures.reference import hf_model_of

FIX = "save the tokenizer again"
SAVED = ["tokenizer.json", "tokenizer_config.json"]  # all transformers 5 writes


def save_gpt2_tokenizer(folder: Path, vocab_dir: Path):
    """GPT-2's tokenizer built from the genuine files, saved by transformers 5; it is returned."""
    from transformers import GPT2Tokenizer

    tokenizer = GPT2Tokenizer(vocab=str(vocab_dir / "encoder.json"),
                              merges=str(vocab_dir / "vocab.bpe"))
    tokenizer.save_pretrained(folder)
    return tokenizer


def save_bert_tokenizer(folder: Path, tokens: list[str], **settings):
    """transformers 5's BertTokenizer over a vocab.txt of tokens, saved into folder."""
    from transformers import BertTokenizer

    tokenizer = BertTokenizer(vocab=str(write(folder.with_name(folder.name + "_vocab"), tokens)),
                              **settings)
    tokenizer.save_pretrained(folder)
    return tokenizer


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory, vocab_dir) -> Path:
    folder = tmp_path_factory.mktemp("gpt2_tokenizer")
    save_gpt2_tokenizer(folder, vocab_dir)
    assert sorted(path.name for path in folder.iterdir()) == SAVED
    return folder


def refusal(folder: Path, *naming: str) -> str:
    """read_vocab's error for folder: one line that names each of naming."""
    with pytest.raises(PicoGPTError) as caught:
        read_vocab(folder, FIX)
    message = str(caught.value)
    assert "\n" not in message and all(name in message for name in naming), message
    return message


def test_gpt2s_tokenizer_json_gives_transformers_ids(gpt2_folder, vocab_dir):
    """The tricky strings and the corpus, against transformers reading the same folder.
    "<|endoftext|>" typed in a text is where the two part on purpose: transformers finds the
    special token in it, picogpt reads it as text, as OpenAI's encoder and tiktoken's
    encode_ordinary do."""
    from transformers import AutoTokenizer

    ours, reference = read_vocab(gpt2_folder, FIX), AutoTokenizer.from_pretrained(gpt2_folder)
    genuine = read_encoder(vocab_dir)  # the same vocabulary from encoder.json and vocab.bpe
    assert (ours.encoder, ours.ranks, ours.start) == (genuine.encoder, genuine.ranks, 50256)
    typed = [text for text in TRICKY if "<|endoftext|>" in text]
    assert typed
    for name, text in corpus().items():
        ids = ours.encode(text)
        if text in typed:
            assert 50256 in reference.encode(text, add_special_tokens=False) and 50256 not in ids
            continue
        assert ids == reference.encode(text, add_special_tokens=False), name
        assert ours.decode(ids) == reference.decode(ids) == text, name


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
def test_berts_tokenizer_json_gives_transformers_ids(settings, tmp_path):
    from transformers import AutoTokenizer

    folder = tmp_path / "bert"
    save_bert_tokenizer(folder, chinese_vocab(), **settings)
    assert sorted(path.name for path in folder.iterdir()) == SAVED
    ours, reference = read_vocab(folder, FIX), AutoTokenizer.from_pretrained(folder)
    for name, text in CORPUS.items():
        assert ours.encode(text) == reference.encode(text, add_special_tokens=False), name
    assert (ours.start, ours.end, ours.unknown) == (
        reference.cls_token_id, reference.sep_token_id, reference.unk_token_id)


def test_a_folder_with_the_older_files_too_must_agree_with_them(gpt2_folder, vocab_dir,
                                                                 tmp_path):
    both = tmp_path / "gpt2"
    shutil.copytree(gpt2_folder, both)
    shutil.copy(vocab_dir / "encoder.json", both / "vocab.json")
    shutil.copy(vocab_dir / "vocab.bpe", both / "merges.txt")
    assert read_vocab(both, FIX).ranks == read_encoder(vocab_dir).ranks
    data = json.loads((both / "tokenizer.json").read_text())
    merges = data["model"]["merges"]
    merges[5], merges[6] = merges[6], merges[5]
    (both / "tokenizer.json").write_text(json.dumps(data))
    refusal(both, "tokenizer.json and vocab.json + merges.txt", "disagree on merge 5", FIX)
    merges[5], merges[6] = merges[6], merges[5]
    data["model"]["vocab"]["hello"], data["model"]["vocab"]["Ġthe"] = 262, 31373
    (both / "tokenizer.json").write_text(json.dumps(data))
    refusal(both, "disagree on token 'Ġthe' (31373 in tokenizer.json, 262 in vocab.json + "
                  "merges.txt)")

    bert = tmp_path / "bert"
    save_bert_tokenizer(bert, small_vocab(), do_lower_case=False)
    write(bert, small_vocab())
    assert read_vocab(bert, FIX).lower is False  # the same vocab.txt: they agree
    write(bert, [*small_vocab()[:-1], "##extra"])
    refusal(bert, "tokenizer.json and vocab.txt, which disagree on token")
    shutil.copy(vocab_dir / "encoder.json", bert / "vocab.json")
    shutil.copy(vocab_dir / "vocab.bpe", bert / "merges.txt")
    (bert / "vocab.txt").unlink()
    refusal(bert, "the kind of vocabulary (WordPiece in tokenizer.json, byte-level BPE in")


def test_tokenizer_config_json_must_state_what_tokenizer_json_runs(gpt2_folder, tmp_path):
    """transformers 5 runs tokenizer_config.json's do_lower_case (BertTokenizer's default when
    it is left out) over tokenizer.json's normalizer: where they differ, picogpt asks."""
    from transformers import AutoTokenizer

    folder = tmp_path / "bert"
    save_bert_tokenizer(folder, small_vocab(), do_lower_case=False)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    del config["do_lower_case"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert AutoTokenizer.from_pretrained(folder).encode("Hello", add_special_tokens=False) != \
        AutoTokenizer.from_pretrained(folder, do_lower_case=False).encode(
            "Hello", add_special_tokens=False)  # the default did win over the file
    refusal(folder, "tokenizer_config.json sets do_lower_case to True", "normalizer.lowercase")
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # then tokenizer.json alone decides
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert read_vocab(folder, FIX).encode("Hello") == AutoTokenizer.from_pretrained(
        folder).encode("Hello", add_special_tokens=False)
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    shutil.copy(gpt2_folder / "tokenizer.json", gpt2)
    (gpt2 / "tokenizer_config.json").write_text('{"eos_token": "</s>"}')
    refusal(gpt2, "tokenizer_config.json sets eos_token to '</s>'")


def tokenizers_file(folder: Path, model, **parts) -> Path:
    """A tokenizer.json the tokenizers library writes for model with the given parts."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer(model)
    for part, value in parts.items():
        setattr(tokenizer, part, value)
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def test_a_tokenizer_picogpt_cannot_run_is_refused_in_one_line_naming_it(gpt2_folder, vocab_dir,
                                                                         tmp_path):
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 0, "[CLS]": 1, "a": 2, "##b": 3}
    bert = {"normalizer": normalizers.BertNormalizer(),
            "pre_tokenizer": pre_tokenizers.BertPreTokenizer()}
    cases = {
        "a Unigram model": (models.Unigram([("[UNK]", 0.0), ("a", -1.0)], 0, False), {}),
        "a decoder of type None, with a WordLevel model": (
            models.WordLevel({"[UNK]": 0, "a": 1}, "[UNK]"), {}),
        "a normalizer of type Sequence [NFD, Lowercase, StripAccents]": (
            models.WordPiece(vocab, unk_token="[UNK]"), {**bert, "normalizer": normalizers.Sequence(
                [normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents()])}),
        "a pre_tokenizer of type Whitespace": (
            models.WordPiece(vocab, unk_token="[UNK]"), {
                **bert, "pre_tokenizer": pre_tokenizers.Whitespace()}),
        "a WordPiece with model.max_input_chars_per_word = 50": (
            models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=50), bert),
        "a pre_tokenizer of type Metaspace": (
            models.BPE({"a": 0}, []), {
                "pre_tokenizer": pre_tokenizers.Metaspace(), "decoder": decoders.Metaspace()}),
        # Llama-2's and TinyLlama's: SentencePiece's BPE, its spaces as ▁, bytes as <0x41>
        "a SentencePiece BPE with byte fallback (as Llama-2's and TinyLlama's)": (
            models.BPE({"<unk>": 0, "<0x41>": 1, "▁": 2}, [], byte_fallback=True), {
                "normalizer": normalizers.Sequence([normalizers.Prepend("▁"),
                                                    normalizers.Replace(" ", "▁")]),
                "decoder": decoders.Sequence([decoders.Replace("▁", " "),
                                              decoders.ByteFallback(), decoders.Fuse()])}),
        "a byte-level BPE with pre_tokenizer.add_prefix_space = True": (
            models.BPE({"a": 0}, []), {
                "pre_tokenizer": pre_tokenizers.ByteLevel(add_prefix_space=True),
                "decoder": decoders.ByteLevel()}),
        "a normalizer of type NFKC": (models.BPE({"a": 0}, []), {
            "normalizer": normalizers.NFKC(), "pre_tokenizer": pre_tokenizers.ByteLevel(False),
            "decoder": decoders.ByteLevel()}),
    }
    for i, (named, (model, parts)) in enumerate(cases.items()):
        folder = tokenizers_file(tmp_path / str(i), model, **parts)
        refusal(folder, f"{folder / 'tokenizer.json'} describes {named}",
                "which picogpt cannot run")
    from transformers import GPT2Tokenizer

    padded = tmp_path / "padded"  # a fine-tune that added a token of its own
    tokenizer = GPT2Tokenizer.from_pretrained(gpt2_folder)
    tokenizer.add_special_tokens({"pad_token": "[PAD]"})
    tokenizer.save_pretrained(padded)
    refusal(padded, "adds the token '[PAD]' (id 50257)")


def test_a_gpt2_and_a_uer_model_saved_by_transformers_5_give_transformers_greedy_text(
        tmp_path, vocab_dir):
    """Random weights saved with GPT2LMHeadModel.save_pretrained and the tokenizer with
    tokenizer.save_pretrained: `picogpt --hf` prints the text of transformers' greedy ids."""
    gpt2 = tmp_path / "gpt2"
    model = random_hf_model(*SHAPES["hub"])
    model.save_pretrained(gpt2)
    tokenizer = save_gpt2_tokenizer(gpt2, vocab_dir)
    assert not (gpt2 / "vocab.json").exists() and (gpt2 / "tokenizer.json").exists()
    greedy = hf_greedy(model, tokenizer.encode(PROMPT), 20)
    done = picogpt(PROMPT, "--hf", str(gpt2), "--n_tokens", "20", "--ignore_end")
    assert done.returncode == 0, done.stderr
    assert done.stdout == tokenizer.decode(greedy) + "\n"

    uer = tmp_path / "uer"
    model = hf_model_of(*uer_arrays("small"))
    model.config.update({"tokenizer_class": "BertTokenizer", "bos_token_id": CLS,
                         "eos_token_id": SEP})
    model.save_pretrained(uer)
    tokenizer = save_bert_tokenizer(uer, chinese_vocab(), do_lower_case=False)
    assert not (uer / "vocab.txt").exists()
    greedy = hf_greedy(model, [CLS, *tokenizer.encode(POEM, add_special_tokens=False)], 20)
    done = picogpt(POEM, "--hf", str(uer), "--n_tokens", "20", "--ignore_end")
    assert done.returncode == 0, done.stderr
    # picogpt writes Chinese without BERT's spaces between characters (wordpiece.py)
    assert done.stdout == read_vocab(uer, FIX).decode(greedy) + "\n"
    assert "".join(done.stdout.split()) == "".join(tokenizer.decode(greedy).split())


def test_a_folder_with_no_vocabulary_names_tokenizer_json_among_the_choices(tmp_path):
    refusal(tmp_path, "holds no vocabulary", "tokenizer.json (either) or chars.json")


@pytest.mark.parametrize("added", [5, "[PAD]", [5], [{"content": ["<|endoftext|>"], "id": 50256}],
                                   [{"content": {"a": 1}, "id": 50256}],
                                   [{"content": "<|endoftext|>", "id": "50256"}]],
                         ids=["number", "text", "list_of_numbers", "content_list",
                              "content_dict", "id_text"])
def test_added_tokens_that_are_not_a_list_of_tokens_are_one_line(gpt2_folder, tmp_path, added):
    folder = tmp_path / "added"
    shutil.copytree(gpt2_folder, folder)
    data = json.loads((folder / "tokenizer.json").read_text())
    (folder / "tokenizer.json").write_text(json.dumps({**data, "added_tokens": added}))
    refusal(folder, "tokenizer.json's added_tokens is not a list of tokens (objects with a "
                    "string \"content\" and a whole-number \"id\")", FIX)


def test_json_nested_too_deeply_is_one_line(gpt2_folder, tmp_path):
    """Deeper than Python's recursion limit: the file is unreadable. As deep as json still
    reads (a Sequence of Sequences, 450 of them): named one level deep."""
    folder = tmp_path / "deep"
    shutil.copytree(gpt2_folder, folder)
    good = (folder / "tokenizer.json").read_text()
    (folder / "tokenizer.json").write_text("[" * 100_000)
    refusal(folder, "tokenizer.json is not a tokenizers file")
    (folder / "tokenizer.json").write_text(good)
    (folder / "tokenizer_config.json").write_text("{" * 100_000)
    refusal(folder, "tokenizer_config.json is not a JSON object of tokenizer settings")
    (folder / "tokenizer_config.json").unlink()
    nested = {"type": "NFC"}
    for _ in range(450):
        nested = {"type": "Sequence", "normalizers": [nested]}
    (folder / "tokenizer.json").write_text(json.dumps({**json.loads(good), "normalizer": nested}))
    refusal(folder, "describes a normalizer of type Sequence [Sequence], with a BPE model")


# Text a chat model's tokenizer meets: Chinese, digit runs, code, runs of spaces and line
# breaks, emoji, and special tokens written inside the text, which transformers finds there
LATER_TEXTS = [
    "床前明月光，疑是地上霜。", "今天是2024年12月3日，气温-5.5°C。", "1234567890 12 345 6789",
    "def f(x):\n    return x ** 2\n\n\n", "a  b   c    d\t\te\r\n\r\nf   ", "    ", "\n\n\n",
    "emoji 😀🎉👍🏽 👨‍👩‍👧 🇺🇳 🤖🤖", "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n",
    "a<|endoftext|>b<|im_end|><|im_end|>c", "<|im_start", "<|begin_of_text|>hello<|eot_id|>",
    "e\u0301 café", "Ａｂｃ１２３ ﬁ", "x" * 300, "",
]


@pytest.mark.parametrize("kind", ["qwen", "llama3"])
def test_qwen_and_llama3_tokenizers_give_the_tokenizers_librarys_ids(kind, tmp_path):
    """A Qwen2-style and a LLaMA-3-style tokenizer.json (their regex, NFC, special tokens past
    the vocab, LLaMA-3's begin token), against transformers reading the same folder."""
    from scripts.fixtures.chat_tokenizers import llama3_tokenizer, qwen_tokenizer

    reference = (qwen_tokenizer if kind == "qwen" else llama3_tokenizer)(tmp_path)
    ours = read_vocab(tmp_path, FIX)
    begin = reference.bos_token_id if kind == "llama3" else None
    assert (ours.begin, ours.start, ours.end) == (begin, begin, reference.eos_token_id)
    assert ours.n_vocab == len(reference)
    texts = [*LATER_TEXTS, *corpus().values()]
    for text in texts:
        ids = ours.encode(text)
        assert ids == reference.encode(text, add_special_tokens=False), text
        assert ours.prompt_ids(text) == reference.encode(text) if text else True
        assert ours.decode(ids) == reference.decode(ids), text
        nfc = unicodedata.normalize("NFC", text)
        assert ours.decode(ours.encode(nfc)) == nfc
    # the special tokens were found in the text, and the digits cut as each regex cuts them
    assert ours.encode("<|im_end|>" if kind == "qwen" else "<|eot_id|>") == [
        reference.convert_tokens_to_ids("<|im_end|>" if kind == "qwen" else "<|eot_id|>")]
    assert ours.cut("1234567") == (list("1234567") if kind == "qwen" else ["123", "456", "7"])


def test_a_downloaded_regex_that_backtracks_without_end_is_stopped_in_one_line(
        tmp_path, monkeypatch):
    """A Split regex that takes exponential time on "aaa...a!" ends in one line, not a hang."""
    import picogpt.files.later_tokenizers as later_tokenizers
    from scripts.fixtures.chat_tokenizers import qwen_tokenizer

    qwen_tokenizer(tmp_path)
    data = json.loads((tmp_path / "tokenizer.json").read_text())
    data["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": "(a|aa)+$|."}
    (tmp_path / "tokenizer.json").write_text(json.dumps(data))
    monkeypatch.setattr(later_tokenizers, "REGEX_SECONDS", 0.05)
    encoder = read_vocab(tmp_path, FIX)
    assert len(encoder.encode("aaaa")) >= 1  # a text it finishes is encoded
    with pytest.raises(PicoGPTError) as caught:
        encoder.encode("a" * 40 + "!")
    assert "\n" not in str(caught.value) and "regex took more than" in str(caught.value)


def test_a_character_wordlevel_tokenizer_gives_the_tokenizers_librarys_ids(tmp_path):
    """The tokenizer.json `python -m picogpt.train --model llama` writes (each character a
    word of a WordLevel model, its start token put before a text by the post-processor, Fuse
    decoding), against transformers reading the same folder."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    chars = [*dict.fromkeys("床前明月光，疑是地上霜。\n 举头望低思故乡abc")]
    tokens = [*chars, "<|unknown|>", "<|start|>"]
    tokenizer = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, "<|unknown|>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|start|> $A", special_tokens=[("<|start|>", len(tokens) - 1)])
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens(["<|unknown|>", "<|start|>"])
    reference = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|start|>",
                                        eos_token="<|start|>", unk_token="<|unknown|>")
    reference.save_pretrained(tmp_path)
    ours = read_vocab(tmp_path, FIX)
    assert (ours.begin, ours.start, ours.end, ours.unknown, ours.n_vocab) == (
        len(tokens) - 1, len(tokens) - 1, len(tokens) - 1, len(tokens) - 2, len(tokens))
    for text in ["床前明月光，\n疑是地上霜。", "  举头 望明月\n\n", "低头思故乡😀xyz",
                 "a<|start|>b<|unknown|>", ""]:
        ids = ours.encode(text)
        assert ids == reference.encode(text, add_special_tokens=False), text
        assert ours.prompt_ids(text) == reference.encode(text), text
        assert ours.decode(ids) == reference.decode(ids), text
    assert ours.outside("明月xy") == ["x", "y"]
    assert ours.decode(ours.encode("床前 明月\n")) == "床前 明月\n"
