"""One way into both commands: `picogpt` and `python -m picogpt.train` read command lines here.

It turns a command line into one call of a function through fire: every flag name is checked before
anything loads, text stays exactly as typed, and at most one word stands without a flag. It also
reads a prompt from a file or standard input (`read_prompt`) and sets glibc's memory settings for
the process (`reuse_freed_memory`).

fire would read "hello, world" as a tuple, 2024 as a number and a long text as Python, so each
value the function takes as text reaches fire as a quoted literal; fire parses the other values and
writes --help from the docstring.

A run ends in one of four ways: what the function returns; a PicoGPTError, which is a problem
the user can fix, as one line `picogpt: <message>` on stderr and exit code 1; Ctrl-C as 130; a
reader that went away (`picogpt ... | head`) quietly as 141. Any other exception keeps its
traceback, because it is a bug.
"""

import contextlib
import ctypes
import difflib
import inspect
import os
import re
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import fire
import fire.helptext
import fire.trace

from ..errors import PicoGPTError, _, reason
from ..files.store import read_regular

MAX_PROMPT_BYTES = 1 << 20  # --prompt_file: far past any model's context (GPT-2's: 1,024 tokens)
TEXT = (str, str | None)  # annotations of the parameters whose values stay as typed
# how a true-or-false flag's value may be written (any case); --name alone is true
SWITCH = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def switch(name: str, value: str | None) -> bool:
    """The value of a true-or-false flag: --name alone, or --name=true/false, 1/0, yes/no."""
    if value is None:
        return True
    if value.lower() not in SWITCH:
        raise PicoGPTError(_("--{name}={value} is not true or false; write --{name} or "
                             "--{name}=true to turn it on, --{name}=false to leave it off "
                             "(1/0 and yes/no work too).").format(name=name, value=value))
    return SWITCH[value.lower()]


def words_for_fire(argv: list[str], function: Callable, program: str, positional: str,
                   misplaced: Callable[[str], str | None] = lambda name: None) -> list[str]:
    """The command line as the words fire should parse for function, checked.

    positional names the parameter a word without a flag fills; misplaced(name) may explain
    why a flag that function does not take belongs elsewhere.
    """
    params = inspect.signature(function).parameters
    command, words, i = [], [], 0
    switched = misread = None  # the last true-or-false flag; "--json false" read as text
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "--help"):
            return ["--help"]
        if arg == "--":  # everything after it is a word, even if it starts with dashes
            words += argv[i:]
            break
        if not arg.startswith("--"):  # "-c" too: flags are spelled whole, text is text
            words.append(arg)
            if switched and switched[0] == i - 1 and arg.lower() in SWITCH:
                misread = (switched[1], arg)  # meant as --json=false, perhaps
            continue
        name, has_value, value = arg[2:].partition("=")
        if name not in params:
            problem = misplaced(name)
            if problem is None:
                guess = difflib.get_close_matches(name, list(params), n=1, cutoff=0.6)
                hint = (_("did you mean --{guess}?").format(guess=guess[0]) if guess
                        else _("see {program} --help.").format(program=program))
                problem = _("unknown flag --{name}; {hint}").format(name=name, hint=hint)
            raise PicoGPTError(problem)
        if params[name].annotation is bool:
            command.append(f"--{name}={switch(name, value if has_value else None)}")
            switched = (i, name)  # where the word after it is, and its name
            continue
        if not has_value:  # the value is the next word, unless that is another flag
            if i == len(argv) or argv[i].startswith("--") and argv[i][2:].split("=")[0] in params:
                raise PicoGPTError(_("--{name} needs a value, as in --{name}=... (a text that "
                                     "starts with -- can be given as --{name}=--text).").format(
                                         name=name))
            value, i = argv[i], i + 1
        command.append(f"--{name}={value!r}" if params[name].annotation in TEXT
                       else f"--{name}={value}")
    what = positional.replace("_", " ")
    if len(words) > 1 and misread:
        raise PicoGPTError(_("--{name} takes its value after an equals sign, as in "
                             "--{name}={word}; '{word}' after it reads as a second {what}."
                             ).format(name=misread[0], word=misread[1], what=what))
    if len(words) > 1:
        shown = " ".join(repr(word) for word in words[:4])
        raise PicoGPTError(_("{program} takes one {what}, but got {n} words: {shown}. Quote the "
                             "whole {what}, and write flags as --name value.").format(
                                 program=program, what=positional, n=len(words), shown=shown))
    command += [f"--{positional}={words[0]!r}"] if words else []
    given = {word[2:].split("=")[0] for word in command}
    for name, param in params.items():
        if param.default is inspect.Parameter.empty and name not in given:
            where = (_("the first word: {program} WORD ...") if name == positional
                     else "--{name}").format(program=program, name=name)
            raise PicoGPTError(_("{program} needs {name} ({where}); see {program} --help.")
                               .format(program=program, name=name, where=where))
    return command


@contextlib.contextmanager
def ending(stopped: str = "") -> Iterator[None]:
    """End the process as the module says for what the block raises; stopped is what Ctrl-C
    prints when the KeyboardInterrupt itself says nothing."""
    with contextlib.suppress(ValueError):  # Ctrl-C raises KeyboardInterrupt again, from here on
        signal.signal(signal.SIGINT, signal.default_int_handler)  # (ValueError: not the main
    try:  # thread, which has its own)
        yield
    except PicoGPTError as e:
        print(_("picogpt: {message}").format(message=e), file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:  # the reader left (picogpt ... | head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        sys.exit(141)  # the shell's code for a process ended by SIGPIPE
    except KeyboardInterrupt as e:  # 130 is the shell's code for Ctrl-C
        said = e.args[0] if e.args else stopped
        print("\n" + _("picogpt: {message}").format(message=said) if said else "",
              file=sys.stderr)
        sys.exit(130)


def run_command(function: Callable, argv: list[str], program: str, positional: str,
                misplaced: Callable[[str], str | None] = lambda name: None,
                stopped: str = "", help_page: Callable[[], str] | None = None) -> Any:
    """Call function with the command line argv, ending the process as the module says;
    --help prints help_page() if given, else fire's page of function's docstring."""
    with ending(stopped):
        command = words_for_fire(argv, function, program, positional, misplaced)
        if command == ["--help"]:
            print(help_page() if help_page else help_text(function, program))
            return None
        return fire.Fire(function, command=command, name=program, serialize=lambda result: None)


def help_text(function: Callable, program: str) -> str:
    """fire's help page for function, from a copy of it whose Args: entries are one line each:
    fire's docstring reader ends an entry at a wrapped line holding a colon ("as GPT-2's: 256
    bytes" loses the rest, "instead of text: what" becomes a flag of its own). Without fire's
    short flags, which picogpt does not take, and without its "INFO: Showing help" line."""
    shown = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                               function.__defaults__, function.__closure__)
    shown.__kwdefaults__, shown.__annotations__ = function.__kwdefaults__, function.__annotations__
    shown.__doc__ = one_line_args(inspect.getdoc(function) or "")
    text = fire.helptext.HelpText(shown, trace=fire.trace.FireTrace(shown, name=program))
    return re.sub(r"^(\s+)-\w, --", r"\1--", text, flags=re.M)


def one_line_args(doc: str) -> str:
    """doc with each entry of its Args: section on one line (its wrapped lines joined)."""
    lines, section, entry = [], None, None  # the indents of Args: and of its entries
    for line in doc.split("\n"):
        depth = len(line) - len(line.lstrip())
        if section is not None and line.strip():
            if depth <= section:  # the next section: Returns:, or text
                section = entry = None
            elif entry is None or depth <= entry:
                entry = depth
            else:
                lines[-1] += " " + line.strip()
                continue
        if line.strip() == "Args:":
            section = depth
        lines.append(line)
    return "\n".join(lines)


def said(message: str) -> str:
    """message as a line the command prints on stderr: `picogpt: ` before it, in the language's
    own punctuation (picogpt：)."""
    return _("picogpt: {message}").format(message=message)


def read_prompt(
prompt: str, prompt_file: str | None) -> str:
    """The prompt as typed, or read from prompt_file, checked to be valid Unicode text."""
    if prompt_file is not None:
        if prompt:
            raise PicoGPTError(_("give the prompt as text or with --prompt_file, not both."))
        try:
            data = (sys.stdin.buffer.read(MAX_PROMPT_BYTES + 1) if prompt_file == "-"
                    else read_regular(prompt_file, MAX_PROMPT_BYTES))
            if len(data) > MAX_PROMPT_BYTES:  # stdin: as read_regular bounds a file
                raise PicoGPTError(_("{file} holds more than {mb} MB, more than picogpt reads "
                                     "as a text or a prompt; give a smaller file.").format(
                                         file=_("stdin"), mb=MAX_PROMPT_BYTES >> 20))
            prompt = data.decode("utf-8")
        except OSError as e:
            raise PicoGPTError(_("cannot read --prompt_file {file}: {reason}.").format(
                file=prompt_file, reason=reason(e))) from None
        except UnicodeDecodeError as e:
            raise PicoGPTError(_("--prompt_file {file} is not UTF-8 text (byte {at} is {byte}); "
                                 "save it as UTF-8.").format(
                                     file=prompt_file, at=e.start, byte=f"{data[e.start]:#04x}")
                               ) from None
        prompt = prompt.removesuffix("\n")  # the newline an editor or echo ends a file with
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as e:
        raise PicoGPTError(_("the prompt holds {char} at character {at}, which is not valid "
                             "Unicode text; pass the prompt as UTF-8.").format(
                                 char=repr(prompt[e.start]), at=e.start)) from None

    return prompt


def reuse_freed_memory() -> None:
    """Have glibc keep freed memory for reuse instead of handing it back to the OS at once."""
    # Each layer frees arrays of a few MB and allocates new ones. Handed back to the OS, they
    # return as fresh pages to fault in and zero, a large share of a long prompt's time
    # (docs/performance.md, "Memory allocation"). Only the process owner (the CLI) sets them.
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl): nothing to tune
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: blocks up to 32 MiB come from the heap
    mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: freed heap memory stays for the next step
    # M_ARENA_MAX: one heap for every thread. The explore server computes in a request thread,
    # which glibc would give a heap of its own, keeping a second set of freed arrays (the page's
    # inside views peaked at 1.48x the weights with it, 1.42x without: docs/performance.md)
    mallopt(-8, 1)
