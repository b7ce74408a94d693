"""One loaded model: the vocabulary, the hparams, the params and what the model is, in one object
that both loaders build. Every limit a command or a page checks (n_vocab, n_ctx, the start and
end tokens) comes from it, never from GPT-2's numbers."""

from dataclasses import dataclass, field
from pathlib import Path

from ..encoder import Encoder
from ..errors import PicoGPTError, _
from ..kinds import Kind, kind_of
from ..wordpiece import WordPiece
from .folder_vocab import read_vocab
from .hf import CONFIG, hf_kind, load_hf
from .openai import MODEL_SIZES, load_encoder_hparams_and_params, read_encoder
from .store import read_json

RANDOM_WEIGHTS = "random-weights.txt"  # written beside weights drawn at random (test fixtures)
SAMPLER = "sampler.json"  # a trained model's sampler, the one its task recommends: {"top_k": 8}


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to run: encoder, hparams and params, and what it is, for messages and pages.

    kind is its row of the table of model kinds (kinds.py), read once from its hparams as the
    folder loaded: every question about the model's architecture asks it. source is where it
    came from: "released" (one of OpenAI's sizes), "trained" (a folder picogpt.train wrote) or
    "hf" (a Hugging Face folder or hub id); random is True for weights drawn at random, which no
    page may call GPT-2."""

    encoder: Encoder | WordPiece
    hparams: dict
    params: dict
    name: str
    source: str
    where: str
    random: bool = False
    sampler: dict = field(default_factory=dict)  # the sampler it writes best with, if it says
    kind: Kind = field(default=None)  # kind_of(hparams) when not given

    def __post_init__(self):
        if self.kind is None:
            object.__setattr__(self, "kind", kind_of(self.hparams))

    @property
    def n_vocab(self) -> int:
        """Tokens the model can give: its table's rows (GPT-2's wte), never more than the
        vocabulary holds."""
        return self.kind.n_vocab(self.params)

    @property
    def n_ctx(self) -> int:
        """The longest context: wpe's rows (an encoder-decoder's own n_ctx: its positions are
        sinusoids, not a table)."""
        return self.kind.n_ctx(self.hparams, self.params)

    @property
    def n_head(self) -> int:
        return self.hparams["n_head"]

    def about(self) -> dict:
        """What the pages show of the model: its name, where it came from (as "kind", the name the
        pages read it by), its architecture (its kind's name: "gpt2", "llama", ...), place, shape
        and limits."""
        shape = {key: self.hparams[key] for key in ("n_layer", "n_head", "n_embd")}
        return {"name": self.name, "kind": self.source, "architecture": self.kind.name,
                "where": self.where,
                "random": self.random, "n_vocab": self.n_vocab, "n_ctx": self.n_ctx,
                "sampler": self.sampler, **shape}


def load_model(model_size: str = "124M", models_dir: str = "models", base_url: str | None = None,
               hf: str | None = None) -> LoadedModel:
    """The model a command's flags name (--model_size, --models_dir, --base_url, --hf)."""
    if hf is not None and (model_size, models_dir, base_url) != ("124M", "models", None):
        raise PicoGPTError(_("--hf names the model to run; drop --model_size, --models_dir and "
                             "--base_url, which choose one of OpenAI's downloads."))
    if hf is not None:
        encoder, hparams, params = load_hf(hf)
        folder = Path(hf)
        return LoadedModel(encoder, hparams, params, hf, "hf", hf,
                           (folder / RANDOM_WEIGHTS).is_file())
    folder = Path(models_dir) / model_size
    if model_size not in MODEL_SIZES and (folder / CONFIG).is_file():
        # a folder in Hugging Face's layout (python -m picogpt.train --model llama writes one):
        # the Hugging Face loader reads it, its float32 store beside the files it is made from
        # (the folder is picogpt's own)
        encoder, hparams, params = load_hf(str(folder), store=folder)
        return LoadedModel(encoder, hparams, params, model_size, "trained", str(folder),
                           (folder / RANDOM_WEIGHTS).is_file(), read_sampler(folder))
    encoder, hparams, params = load_encoder_hparams_and_params(model_size, models_dir, base_url)
    source = "released" if model_size in MODEL_SIZES else "trained"
    return LoadedModel(encoder, hparams, params, model_size, source, str(folder),
                       (folder / RANDOM_WEIGHTS).is_file(),
                       read_sampler(folder) if source == "trained" else {})


def read_sampler(folder: Path) -> dict:
    """The sampler a trained model's folder recommends (sampler.json), the settings picogpt
    knows with sensible values only; {} when it has none or it cannot be read."""
    said = read_json(folder / SAMPLER)
    if not isinstance(said, dict):
        return {}
    checks = {"top_k": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
              "top_p": lambda v: isinstance(v, float | int) and 0 < v <= 1,
              "temperature": lambda v: isinstance(v, float | int) and 0.05 <= v <= 20}
    return {key: value for key, value in said.items() if key in checks and checks[key](value)}


def vocabulary_first(model_size: str, models_dir: str,
                     hf: str | None) -> Encoder | WordPiece | None:
    """The vocabulary of a model already on disk (an --hf folder, or a folder picogpt.train
    wrote), read without its weights; None for a model that is downloaded first."""
    if hf is not None and Path(hf).is_dir():
        return read_vocab(Path(hf), "save the model's tokenizer beside the weights with "
                                    "tokenizer.save_pretrained")
    model_dir = Path(models_dir) / model_size
    if hf is None and model_size not in MODEL_SIZES and (model_dir / "hparams.json").is_file():
        return read_encoder(model_dir)
    return None


def refuse_views(kind: Kind, flag: str, where: str | None) -> None:
    """--explain and --explore show a model's insides through its kind's run_with_hooks (the
    encoder-decoder has its own --explain page); a kind without one (the training-only variant)
    is refused in one line."""
    if kind.run_with_hooks is None and not kind.seq2seq:
        raise PicoGPTError(_("--{flag} shows the insides of GPT-2 and the LLaMA family; a model "
                             "of the {kind} kind ({where}) trains for measuring only. Drop "
                             "--{flag}; generating, --candidates and --score work.").format(
            flag=flag, kind=kind.title, where=where))


def kind_first(model_size: str, models_dir: str, hf: str | None) -> Kind:
    """The kind of the model a command names, read from its folder's hparams.json (a Hugging Face
    folder's config.json) without its weights, so flags the kind cannot take are refused first:
    GPT-2 for one of OpenAI's sizes, a hub id not yet downloaded, and a folder whose
    hparams.json cannot be read (loading it then says why)."""
    if hf is not None:
        return hf_kind(hf)
    if model_size in MODEL_SIZES:
        return kind_of({})
    hparams = read_json(Path(models_dir) / model_size / "hparams.json")
    return kind_of(hparams if isinstance(hparams, dict) else {},
                   str(Path(models_dir) / model_size / "hparams.json"), _("Train the model again."))
