"""Each of the learner's ten functions, checked against picogpt.model in seed 001's order
(and the optional ones against picogpt.transformer's and picogpt.llama's).

Owns the three stages of each try (the shape, float32 in and float32 out, then the values) on
the inputs of cases.py, what a function that raises is reported with (the learner's own line),
and `Result`, what one function's check found. A function that fails is stood in for by
picogpt's own while the later ones are checked, so each failure is named at the function that
holds it; the slip it matches, and its hint, come from hints.py. Must not print: the command
line prints a Result.
"""

import traceback
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from picogpt import model, transformer
from picogpt.llama import model as llama_model

from .cases import EXTRAS, FUNCTIONS, NOT_WRITTEN, SMALL, cases
from .hints import N_, SLIPS

TOLERANCE = {"gelu": 1e-5, "softmax": 1e-5}  # else 1e-4; both far below any slip's effect
OVERFLOW = float(np.log(np.finfo(np.float32).max))  # 88.7: np.exp of more is inf in float32


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


def reference_cross_attention(x, memory, q, k, v, c_proj, n_head):
    """transformer.multi_head_attention of x over memory with no mask: cross-attention."""
    mask = np.zeros((x.shape[0], memory.shape[0]), x.dtype)  # every query sees every key
    return transformer.multi_head_attention(x, memory, q, k, v, c_proj, n_head, mask)


REFERENCE = {name: getattr(model, name) for name in FUNCTIONS[:-1]}
REFERENCE["generate"] = reference_generate
REFERENCE["cross_attention"] = reference_cross_attention
REFERENCE["rms_norm"] = llama_model.rms_norm
REFERENCE["rope"] = llama_model.rope


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


def check_extras(module, path: str, results: list[Result]) -> list[Result]:
    """The extras (cases.EXTRAS) the learner's module defines, each checked as the ten are, with
    picogpt's functions standing in for the learner's that failed; those it lacks, not at all."""
    failed = [r.name for r in results if not r.passed]
    for earlier in failed:
        module.__dict__[earlier] = REFERENCE[earlier]
    extras = []
    for name in EXTRAS:
        function = module.__dict__.get(name)
        if callable(function):
            result = check_one(name, function, module, path)
            result.stand_ins = tuple(n for n in failed if n in names_used(function))
            extras.append(result)
    return extras


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
    broken = bad & ~np.isfinite(got)
    if broken.any():  # nan or inf: no difference to measure
        where = tuple(int(i) for i in np.argwhere(broken)[0])
        return N_("got {got} at {where}, where {want} was expected"), {
            "got": f"{got[where]:.6g}", "where": list(where), "want": f"{want[where]:.6g}"}
    if bad.any():
        diff = np.abs(got.astype(np.float64) - want)
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
    if name == "softmax" and overflows_only(outputs):
        return ("softmax_max",)
    if name == "mha" and tries and sees_future(function, *tries[0][:2]):
        return ("mask",)
    return ()


def overflows_only(outputs: list) -> bool:
    """Whether a softmax went wrong only as np.exp's overflow does: inf or nan on a case with
    logits above OVERFLOW, and right on every other case."""
    overflowed = False
    for (_, (x,), _), got, want in zip(cases("softmax"), outputs, expected("softmax")):
        if not isinstance(got, np.ndarray) or got.shape != want.shape:
            return False
        if not np.isfinite(got).all() and np.max(x) > OVERFLOW:
            overflowed = True
        elif not close(got, want, TOLERANCE["softmax"]).all():
            return False
    return overflowed


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
