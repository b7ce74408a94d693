"""The message catalog: every sentence picogpt puts through `_` has a Chinese entry with the same
fields, the compiled .mo says what the .po says, and the command line speaks the locale's
language.

The references are independent of picogpt's own lookup: Python's `ast` finds the messages in
the source, a reader written here parses the .po, and the standard library's gettext reads the
.mo that msgfmt wrote.
"""

import ast
import errno
import gettext
import os
import re
import socket
import string
import subprocess
import sys
from pathlib import Path

import pytest

from picogpt import errors

PACKAGE = Path(errors.__file__).parent
PO = PACKAGE / "locale" / "zh_CN" / "LC_MESSAGES" / "picogpt.po"
MO = PO.with_suffix(".mo")
PICOGPT = Path(sys.executable).parent / "picogpt"


def read_po(path: Path) -> dict[str, str]:
    """msgid -> msgstr of a .po file (the header's empty msgid included), read line by line."""
    entries, key = {}, None
    parts: dict[str, list[str]] = {}

    def close():
        if "msgid" in parts:
            entries["".join(parts["msgid"])] = "".join(parts.get("msgstr", []))

    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        line = line.strip()
        if not line or line.startswith("#"):
            if not line and parts:
                close()
                parts = {}
            continue
        if line.startswith(("msgid ", "msgstr ")):
            key, _, rest = line.partition(" ")
            if key == "msgid" and "msgstr" in parts:  # no blank line between two entries
                close()
                parts = {}
            parts[key] = [ast.literal_eval(rest)]
        else:  # a continuation line: a quoted string, in Python's escapes as in C's
            parts[key].append(ast.literal_eval(line))
    close()
    return entries


def messages_in_source() -> list[tuple[str, int, ast.Call]]:
    """Each call of `_` in picogpt's source, and of `N_`, gettext's mark for a message kept as
    data and translated where it is shown (`_(HINTS[key])`): (file, line, call)."""
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("_", "N_")):
                calls.append((str(path.relative_to(PACKAGE.parent)), node.lineno, node))
    return calls


def fields(message: str) -> set[str]:
    """The names of the {fields} a message formats."""
    return {name for _, name, _, _ in string.Formatter().parse(message) if name is not None}


def test_every_message_is_one_plain_literal():
    """_() takes the English text itself, or a name for one marked with N_() where it is
    written: an f-string, a concatenation or a call inside _() would look up a text that no
    catalog holds, and the test below could not find it."""
    wrong = [f"{where}:{line}" for where, line, call in messages_in_source()
             if len(call.args) != 1 or call.keywords
             or not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
                     or call.func.id == "_" and isinstance(call.args[0], (ast.Name, ast.Subscript,
                                                                           ast.Attribute)))]
    assert not wrong, f"_() called with something other than one message at {wrong}"


def test_every_message_has_a_chinese_entry_with_its_fields():
    """A message without a Chinese entry would be English on a zh page; a field the Chinese
    misnames would raise KeyError in .format at the moment of the error."""
    catalog = read_po(PO)
    sources = [(where, line, call.args[0].value) for where, line, call in messages_in_source()
               if isinstance(call.args[0], ast.Constant)]
    assert len(sources) > 100  # the walk found picogpt's messages, not an empty tree
    missing = [f"{where}:{line}: {message!r}" for where, line, message in sources
               if not catalog.get(message)]
    assert not missing, "no Chinese entry in picogpt.po for:\n" + "\n".join(missing)
    for key, value in catalog.items():
        if key:
            assert fields(value) == fields(key), f"the fields differ: {key!r} -> {value!r}"


def test_compiled_catalog_matches_the_po():
    """picogpt.mo is what msgfmt makes of picogpt.po now: an entry added to the .po without
    running msgfmt would never be shown."""
    with open(MO, "rb") as f:
        compiled = gettext.GNUTranslations(f)
    catalog = read_po(PO)
    entries = {key: value for key, value in catalog.items() if key and value}
    assert {key: compiled.gettext(key) for key in entries} == entries
    assert len(compiled._catalog) - 1 == len(entries)  # no entry the .po no longer has


@pytest.mark.parametrize("env, lang", [
    ({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LANG": "C"}, "en"), ({}, "en"),
    ({"LANG": "zh_CN.UTF-8", "LC_ALL": "en_US.UTF-8"}, "en"),
    ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_TW.UTF-8"}, "zh"),
    ({"LANG": "zh_CN.UTF-8", "LANGUAGE": "en"}, "en"),
])
def test_the_locale_chooses_the_language(monkeypatch, env, lang):
    """gettext's order: LANGUAGE, LC_ALL, LC_MESSAGES, LANG; the first one set decides."""
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert errors.language() == lang
    with errors.speaking("zh" if lang == "en" else "en"):  # a page's language wins in its block
        assert errors.language() != lang
    assert errors.language() == lang


def run_picogpt(lang: str, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items()
           if key not in ("LANGUAGE", "LC_ALL", "LC_MESSAGES")}
    return subprocess.run([str(PICOGPT), *args], capture_output=True, text=True, timeout=120,
                          env={**env, "LANG": lang, "PYTHONIOENCODING": "utf-8"})


def test_command_line_refuses_in_the_locales_language(tmp_path):
    """The issue's "done when": LANG=zh_CN.UTF-8 picogpt "你好" --top_k 0 is refused in one
    Chinese line with exit code 1, and the same in English under LANG=C."""
    chinese = run_picogpt("zh_CN.UTF-8", "你好", "--top_k", "0")
    english = run_picogpt("C", "你好", "--top_k", "0")
    for result in chinese, english:
        assert result.returncode == 1, result.stderr
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert chinese.stderr.startswith("picogpt：top_k=0 ")
    assert "整数" in chinese.stderr and "贪心解码" in chinese.stderr
    assert "whole number" not in chinese.stderr and "greedy" not in chinese.stderr
    assert english.stderr == ("picogpt: top_k=0 is not a whole number from 1 up; 1 is greedy; "
                              "leave it unset for greedy decoding.\n")


# how the pages name a word: t("key", ...), data-t="key", dataset.t = "key", and a choice of two
# keys, t(n === 1 ? "count_one" : "count", ...)
PAGE_KEY = re.compile(r'\bt\(\s*"(\w+)"\s*[,)]|data-t="(\w+)"|dataset\.t = "(\w+)"\s*;'
                      r'|\bt\([^,()"]*\? "(\w+)" : "(\w+)"')


def test_every_word_the_pages_ask_for_is_in_the_catalog():
    """The pages' scripts and templates name their words by key (t("key"), data-t="key"); each
    key is one of web/words.py's, whose texts are in the catalog (the test above), with the
    {fields} the scripts fill; the scripts hold no words of their own, in either language."""
    from picogpt.web.words import both_languages

    words = both_languages()
    web = PACKAGE / "web"
    sources = {name: (web / name).read_text(encoding="utf-8")
               for name in ("views.js", "explore.js", "explain.html", "explore.html", "views.html",
                            "couplet.html")}
    keys = set()
    for text in sources.values():
        for match in PAGE_KEY.findall(text):
            keys |= {key for key in match if key}
    keys |= {f"score_{kind}" for kind in ("previous", "first", "induction", "same_position")}
    keys |= {f"n_tokens_{kind}" for kind in ("wordpiece", "chars")}  # "n_tokens_" + vocabulary
    assert {"count", "count_one", "explore_title", "h_prompt", "h_cross", "tip_cross"} <= keys
    assert keys <= set(words["en"]), f"no text for {sorted(keys - set(words['en']))}"
    assert words["en"].keys() == words["zh"].keys()
    for key, english in words["en"].items():
        assert fields(words["zh"][key]) == fields(english), key
    for name in ("views.js", "explore.js"):
        assert not re.search("[\u4e00-\u9fff]", sources[name]), f"{name} holds Chinese words"


# calls whose first argument is a sentence a person reads: an error, a refusal, Ctrl-C's words,
# a download's reason, and what goes to stderr
SAYS = {"PicoGPTError", "KeyboardInterrupt", "Refused", "IncompleteError", "ServerError"}


def written_plain(node: ast.expr) -> bool:
    """Whether a message is written as a literal or an f-string with words, not through _()."""
    if isinstance(node, ast.JoinedStr):
        return any(written_plain(value) for value in node.values)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.search("[A-Za-z]{2}", node.value) is not None
    if isinstance(node, ast.BinOp):
        return written_plain(node.left) or written_plain(node.right)
    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "format":
        return written_plain(node.func.value)  # "...".format(...) without _()
    return False


def test_no_message_bypasses_the_catalog():
    """A PicoGPTError, a refusal, Ctrl-C's words, a progress bar's label or a line on stderr
    written as a plain (f-)string would be English on a Chinese command line: each goes
    through _()."""
    plain = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            to_stderr = any(keyword.arg == "file" and "stderr" in ast.unparse(keyword.value)
                            for keyword in node.keywords)
            said = [node.args[0]] if node.args and (
                name in SAYS or name in ("print", "write") and to_stderr) else []
            said += [keyword.value for keyword in node.keywords if keyword.arg == "desc"]
            plain += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)[:90]}"
                      for message in said if written_plain(message)]
    assert not plain, "messages not put through _():\n" + "\n".join(plain)


def test_the_catalog_holds_no_message_picogpt_no_longer_says():
    """An entry whose English no _() or N_() in picogpt/ says any more is a reworded message's
    old translation: the new wording needs its own, and the old one goes."""
    said = {call.args[0].value for _, _, call in messages_in_source()
            if isinstance(call.args[0], ast.Constant)}
    stale = [key for key in read_po(PO) if key and key not in said]
    assert not stale, "entries of picogpt.po no _() uses:\n" + "\n".join(map(repr, stale))


def test_os_reasons_are_given_in_the_users_language():
    """errors.reason: the common errno values in the catalog's words (in English, the C
    library's own, os.strerror), any other errno in the system's English, the OSError behind
    another error found, and a text that is not UTF-8 said by its byte."""
    for number in errors.OS_REASONS:
        error = OSError(number, os.strerror(number))
        with errors.speaking("en"):
            if sys.platform == "linux":  # the ids are glibc's words
                assert errors.reason(error) == os.strerror(number)
        with errors.speaking("zh"):
            said = errors.reason(error)
        assert said != os.strerror(number) and re.search(r"[\u4e00-\u9fff]", said), said
    with errors.speaking("zh"):
        assert errors.reason(OSError(errno.ELOOP, os.strerror(errno.ELOOP))) == os.strerror(
            errno.ELOOP)
        try:
            try:
                raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
            except OSError as refused:
                raise RuntimeError("the hub is unreachable") from refused
        except RuntimeError as error:
            assert errors.reason(error) == "连接被拒绝"
        try:
            b"ab\xe9".decode("utf-8")
        except UnicodeDecodeError as error:
            assert errors.reason(error) == "第 2 个字节是 0xe9，不是 UTF-8"
        assert errors.reason(ValueError("bad\nvalue")) == "ValueError: bad"
        assert errors.reason(errors.PicoGPTError("在这里说")) == "在这里说"


def test_a_missing_file_a_taken_port_and_a_folder_are_refused_in_chinese(tmp_path):
    """The reasons the operating system gives ("No such file or directory", "Address already in
    use", a folder where a file was expected) reach a Chinese user in Chinese: from the command
    line, the explore server and the exercises."""
    from picogpt.exercises import load_file
    from picogpt.web.server import ExploreServer

    done = run_picogpt("zh_CN.UTF-8", "--prompt_file", str(tmp_path / "missing.txt"))
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "没有这个文件或目录" in done.stderr and "No such file" not in done.stderr
    with socket.socket() as taken, errors.speaking("zh"):
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(errors.PicoGPTError, match="（地址已被占用）"):
            ExploreServer(None, taken.getsockname()[1])
        with pytest.raises(errors.PicoGPTError, match="（这是一个目录）"):
            load_file(str(tmp_path))
    with socket.socket() as taken, errors.speaking("en"):
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(errors.PicoGPTError, match=r"\(Address already in use\)"):
            ExploreServer(None, taken.getsockname()[1])


# Where an OSError's strerror or an exception's class name may still reach a message: the
# training command's rooms, which are being restructured (errors.reason replaces these there),
# and the exercises' report of an error the learner's own code raised, named as Python names it
UNTRANSLATED = {"picogpt/exercises/__init__.py": 2, "picogpt/exercises/checks.py": 3}


def test_os_reasons_and_error_names_go_through_errors_reason():
    """Outside errors.py, no message takes e.strerror (or getattr(e, "strerror")) or an error's
    type(e).__name__ / e.__class__.__name__: errors.reason gives them in the user's language."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE.parent))
        if where == "picogpt/errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            strerror = (isinstance(node, ast.Attribute) and node.attr == "strerror"
                        or isinstance(node, ast.Constant) and node.value == "strerror")
            class_name = isinstance(node, ast.Attribute) and node.attr == "__name__" and (
                isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "type"
                or isinstance(node.value, ast.Attribute) and node.value.attr == "__class__")
            if strerror or class_name:
                found[where] = found.get(where, 0) + 1
    assert found == UNTRANSLATED
