"""Each of the learner's ten functions, checked against picogpt.model in seed 001's order.

Owns the inputs each function is tried on (chosen so that each known slip shows), the three
stages of each try (the shape, float32 in and float32 out, then the values), and `Result`, what
one function's check found. A function that fails is stood in for by picogpt's own while the
later ones are checked, so each failure is named at the function that holds it. What a slip
looks like and its hint are hints.py's. Must not print: the command line prints a Result.
"""

import traceback
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from picogpt import model

from .hints import N_, SLIPS

FUNCTIONS = ("gelu", "softmax", "layer_norm", "linear", "ffn", "attention", "mha",
             "transformer_block", "gpt2", "generate")
SMALL = {"n_vocab": 60, "n_ctx": 16, "n_embd": 16, "n_head": 4, "n_layer": 2}
GPT2_SHAPE = {"n_vocab": 50257, "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 2}
PROMPT_IDS = [36235, 39141, 18765, 1143, 326, 9061]  # "Alan Turing theorized that computers"
NOT_WRITTEN = N_("not written yet: line {line} still raises NotImplementedError")
TOLERANCE = {"gelu": 1e-5, "softmax": 1e-5}  # else 1e-4; both far below any slip's effect


@dataclass
class Result:
    """What checking one function found: passed, or what went wrong (a message id and its
    fields, case being a message id too), the hints' keys, and the earlier functions of the
    learner's that picogpt's stood in for."""
    name: str
    passed: bool = True
    what: str = ""
    fields: dict = field(default_factory=dict)
    hints: tuple = ()
    stand_ins: tuple = ()


class StrangeId(Exception):
    """generate handed gpt2 an id that is not in the vocabulary."""


def reference_generate(inputs, params, n_head, n_tokens_to_generate):
    """seed 001's generate, on picogpt.model's gpt2: greedy, the new ids only."""
    ids = list(inputs)
    for _ in range(n_tokens_to_generate):
        ids = [*ids, int(np.argmax(model.gpt2(ids, **params, n_head=n_head)[-1]))]
    return ids[len(inputs):]


REFERENCE = {name: getattr(model, name) for name in FUNCTIONS[:-1]}
REFERENCE["generate"] = reference_generate


def random_params(hparams: dict, rng: np.random.Generator, std: float) -> dict:
    """GPT-2's params tree with random float32 weights, biases, gains and shifts."""
    n_embd = hparams["n_embd"]

    def normal(*shape, scale=std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)

    def linear(n_in, n_out):
        return {"w": normal(n_in, n_out), "b": normal(n_out)}

    def norm():
        return {"g": 1 + normal(n_embd, scale=0.1), "b": normal(n_embd, scale=0.1)}

    return {"wte": normal(hparams["n_vocab"], n_embd), "wpe": normal(hparams["n_ctx"], n_embd),
            "blocks": [{"ln_1": norm(), "ln_2": norm(),
                        "attn": {"c_attn": linear(n_embd, 3 * n_embd),
                                 "c_proj": linear(n_embd, n_embd)},
                        "mlp": {"c_fc": linear(n_embd, 4 * n_embd),
                                "c_proj": linear(4 * n_embd, n_embd)}}
                       for _ in range(hparams["n_layer"])],
            "ln_f": norm()}


@cache
def gpt2_shaped_params() -> dict:
    """Random weights of GPT-2 124M's shape, two blocks instead of twelve (kept fast)."""
    return random_params(GPT2_SHAPE, np.random.default_rng(124), std=0.1)  # 0.02 repeats one token


def cases(name: str) -> list[tuple[str, tuple, dict]]:
    """The inputs name is tried on: (what they are, positional args, keyword args)."""
    rng = np.random.default_rng(FUNCTIONS.index(name))

    def normal(*shape, scale=1.0):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)

    def linear(n_in, n_out):
        return {"w": normal(n_in, n_out, scale=0.5), "b": normal(n_out, scale=0.5)}

    small = random_params(SMALL, rng, std=0.3)
    block = small["blocks"][0]
    mask = (1 - np.tri(5, dtype=np.float32)) * np.float32(-1e10)
    return {
        "gelu": lambda: [(N_("x from -5 to 5, shape [5, 8]"),
                          (np.linspace(-5, 5, 40, dtype=np.float32).reshape(5, 8),), {})],
        "softmax": lambda: [
            (N_("random scores [3, 6]"), (normal(3, 6, scale=2),), {}),
            (N_("large logits, up to 1000 [3, 6]"), (normal(3, 6, scale=400),), {})],
        "layer_norm": lambda: [
            (N_("random rows [4, 8]"), (normal(4, 8, scale=3) + 1,),
             {"g": 1 + normal(8, scale=0.1), "b": normal(8, scale=0.1)}),
            (N_("nearly constant rows [4, 8] (spread 0.001)"),
             (normal(4, 8, scale=1e-3) + np.float32(0.5),),
             {"g": 1 + normal(8, scale=0.1), "b": normal(8, scale=0.1)})],
        "linear": lambda: [(N_("x [4, 6], a square w [6, 6]"), (normal(4, 6),), linear(6, 6)),
                           (N_("x [4, 6], w [6, 10]"), (normal(4, 6),), linear(6, 10))],
        "ffn": lambda: [(N_("x [4, 6], c_fc w [6, 24], c_proj w [24, 6]"), (normal(4, 6),),
                         {"c_fc": linear(6, 24), "c_proj": linear(24, 6)})],
        "attention": lambda: [
            (N_("q, k, v [5, 4] and a causal mask"),
             (normal(5, 4, scale=2), normal(5, 4, scale=2), normal(5, 4), mask), {}),
            (N_("q [3, 8], k [6, 8], v [6, 5], a mask of zeros"),
             (normal(3, 8, scale=2), normal(6, 8, scale=2), normal(6, 5),
              np.zeros((3, 6), np.float32)), {})],
        "mha": lambda: [(N_("x [6, 16], n_head 4"), (normal(6, 16),),
                         {**block["attn"], "n_head": 4})],
        "transformer_block": lambda: [(N_("x [6, 16], n_head 4"), (normal(6, 16),),
                                       {**block, "n_head": 4})],
        "gpt2": lambda: [
            (N_("ids [7, 3, 11, 3, 0] on a small model (n_vocab 60, n_embd 16, n_head 4)"),
             ([7, 3, 11, 3, 0],), {**small, "n_head": 4}),
            (N_("GPT-2's shape: n_vocab 50257, n_ctx 1024, n_embd 768, n_head 12 (2 blocks)"),
             (PROMPT_IDS,), {**gpt2_shaped_params(), "n_head": 12})],
        "generate": lambda: [(N_("ids [7, 3, 11], 6 new ids, on the small model"),
                              ([7, 3, 11], small, 4, 6), {})],
    }[name]()


def check_all(module, path: str) -> list[Result]:
    """Check the learner's module (loaded from path) function by function, in seed order."""
    results = []
    for name in FUNCTIONS:
        failed = [r.name for r in results if not r.passed]
        for earlier in failed:  # later functions call picogpt's version of a failed one
            module.__dict__[earlier] = REFERENCE[earlier]
        function = module.__dict__.get(name)
        if not callable(function):
            results.append(Result(name, False, N_("{file} has no function {name}"),
                                  {"name": name}))
            continue
        result = check_one(name, function, module, path)
        result.stand_ins = tuple(n for n in failed if n in names_used(function))
        results.append(result)
    return results


def names_used(function) -> set[str]:
    """The global names function's code reads, its comprehensions' and inner functions' too."""
    codes, names = [getattr(function, "__code__", None)], set()
    while codes:
        code = codes.pop()
        if code is not None:
            names |= set(code.co_names)
            codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    return names


def check_one(name: str, function, module, path: str) -> Result:
    """One function against picogpt's on each of its cases; the first failure is reported."""
    outputs, result = [], Result(name)
    saved = module.__dict__.get("gpt2")
    if name == "generate":  # watch the ids it feeds its gpt2
        module.__dict__["gpt2"] = guarded(saved, SMALL["n_vocab"])
    try:
        for (case, args, kwargs), want in zip(cases(name), expected(name)):
            got, failure = call(function, args, kwargs, path)
            outputs.append(got)
            failure = failure or compare(name, got, want)
            if failure and result.passed:
                where = {} if failure[0] == NOT_WRITTEN else {"case": case}
                result = Result(name, False, failure[0], {**where, **failure[1]},
                                failure[2] if len(failure) > 2 else ())
        if not result.passed and not result.hints:
            result.hints = diagnose(name, outputs, function, path)
    finally:
        module.__dict__["gpt2"] = saved
    return result


@cache
def expected(name: str) -> list:
    """picogpt's outputs on name's cases, computed once (the cases are the same every time)."""
    return [REFERENCE[name](*args, **kwargs) for _, args, kwargs in cases(name)]


def guarded(gpt2, n_vocab: int):
    """gpt2 that raises StrangeId when given an id outside the vocabulary."""
    def checked_gpt2(inputs, *args, **kwargs):
        for i in np.asarray(inputs).ravel():
            if not 0 <= i < n_vocab:
                raise StrangeId(int(i))
        return gpt2(inputs, *args, **kwargs)
    return checked_gpt2


def call(function, args, kwargs, path: str):
    """(what function returned, None), or (None, a failure) when it raised."""
    copied = [list(a) if isinstance(a, list) else a for a in args]  # seed 001's generate appends
    try:
        with np.errstate(all="ignore"):
            return function(*copied, **kwargs), None
    except StrangeId as e:
        return None, (N_("gave gpt2 the id {id}, which is not in the vocabulary (0 to {last})"),
                      {"id": e.args[0], "last": SMALL["n_vocab"] - 1}, ("position",))
    except Exception as e:  # noqa: BLE001 (whatever the learner's code raises is reported)
        line, code = learner_line(e, function, path)
        if isinstance(e, NotImplementedError):
            return None, (NOT_WRITTEN, {"line": line})
        message = str(e).splitlines()[0][:160] if str(e) else ""
        return None, (N_("raised {error} at {file} line {line}: {code}"),
                      {"error": f"{type(e).__name__}: {message}" if message else
                       type(e).__name__, "line": line, "code": code})


def learner_line(error: Exception, function, path: str) -> tuple[int, str]:
    """The line of the learner's file the error came from: the deepest frame in it, else the
    function's def."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == path]
    if frames:
        return frames[-1].lineno, (frames[-1].line or "").strip()
    code = getattr(function, "__code__", None)
    return (code.co_firstlineno if code else 0), f"def {function.__name__}(...)"


def compare(name: str, got, want):
    """None if got is want within the tolerance; else (message id, fields[, hint keys])."""
    if name == "generate":
        if not isinstance(got, list | tuple) or not all(
                isinstance(i, int | np.integer) for i in got):
            return N_("returned {kind}, expected a list of token ids"), {"kind": kind(got)}
        if len(got) != len(want):
            return N_("expected the {n} new ids only, got {got} ids: {ids}"), {
                "n": len(want), "got": len(got), "ids": list(map(int, got))}
        if list(map(int, got)) != want:
            return N_("expected ids {want}, got {got}"), {"want": want, "got": list(map(int, got))}
        return None
    if not isinstance(got, np.ndarray):
        return N_("returned {kind}, expected a NumPy array"), {"kind": kind(got)}
    if got.shape != want.shape:
        return N_("expected shape {want}, got {got}"), {"want": list(want.shape),
                                                        "got": list(got.shape)}
    if got.dtype != np.float32:
        return N_("float32 went in, {dtype} came out"), {"dtype": str(got.dtype)}, (
            ("float64",) if got.dtype == np.float64 else ())
    bad = ~close(got, want, TOLERANCE.get(name, 1e-4))
    if bad.any():
        diff = np.where(np.isfinite(got), np.abs(got.astype(np.float64) - want), np.inf)
        where = np.unravel_index(np.argmax(np.where(bad, diff, -1)), got.shape)
        return N_("largest difference {diff} at {where}: expected {want}, got {got}"), {
            "diff": f"{diff[where]:.3g}", "where": list(map(int, where)),
            "want": f"{want[where]:.6g}", "got": f"{got[where]:.6g}"}
    return None


def close(got, want, tol: float) -> np.ndarray:
    """Where got equals want within tol of want's scale (nan against nan counts as equal)."""
    scale = max(1.0, float(np.max(np.abs(want), initial=0)))
    with np.errstate(all="ignore"):
        return np.abs(got.astype(np.float64) - want) <= tol * scale


def kind(value) -> str:
    """What a value is, for a message: None, or its type's name."""
    return "None" if value is None else type(value).__name__


def diagnose(name: str, outputs: list, function, path: str) -> tuple:
    """The hint keys of the first slip whose outputs equal the learner's on every case."""
    tries = [(args, kwargs, got) for (_, args, kwargs), got in zip(cases(name), outputs)
             if got is not None]
    for hints, slip in SLIPS.get(name, []):
        try:
            with np.errstate(all="ignore"):
                if tries and all(same(slip(*args, **kwargs), got) for args, kwargs, got in tries):
                    return hints
        except Exception:  # noqa: BLE001, S112 (a slip that cannot run on a case is not it)
            continue
    if name == "softmax" and any(isinstance(g, np.ndarray) and not np.isfinite(g).all()
                                 for _, _, g in tries):
        return ("softmax_max",)
    if name == "mha" and tries and sees_future(function, *tries[0][:2]):
        return ("mask",)
    return ()


def same(slip_out, got) -> bool:
    """Whether a slip's output is the learner's, up to float32 rounding."""
    if isinstance(got, list):
        return list(map(int, got)) == list(slip_out)
    got = np.asarray(got)
    if got.shape != np.shape(slip_out):
        return False
    slip_out = np.asarray(slip_out, np.float64)
    nan_alike = ~np.isfinite(got) & ~np.isfinite(slip_out)
    return bool((close(got, slip_out, 1e-4) | nan_alike).all())


def sees_future(function, args, kwargs) -> bool:
    """Whether changing the last position's input changes an earlier position's output."""
    x = args[0]
    later = x.copy()
    later[-1] += np.float32(1)
    with np.errstate(all="ignore"):
        before, after = function(x, **kwargs), function(later, **kwargs)
    return not np.allclose(before[:-1], after[:-1], atol=1e-5)
