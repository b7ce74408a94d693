"""The explore server's gate: what a request must be before the session sees it, and every
refusal in the page's language.

It holds the checks server.py runs on a request before any computation: `allowed` (Host, Origin,
and the secret, compared as bytes, so whatever text a request carries is refused, never raised
on), `settings` (the sampler, checked with the command line's own checks),
`body` (one JSON object of a known, capped length, however deep or broken its bytes), `prompt`
(a text of whole characters, capped before it is tokenized: BPE's time grows with the square of
a word's length); `language` (the page's, from Accept-Language) and `words` (a refusal in it:
the server's own, and the command line's check messages, translated). A refusal is `Refused`,
with its status and its English words. It reads only the body it is handed; server.py answers.
"""

import json
import re
import secrets
from typing import BinaryIO
from urllib.parse import parse_qs, urlparse

from ..generate import check_settings
from ..sampling import Sampling

MAX_BODY = 64 * 1024  # bytes: a 1,024-token prompt is a few KB
CHARS_PER_POSITION = 8  # English is ~4.5 characters a token, code a little more: a text that
# fits in the context fits in 8 a position; a longer one is refused before it is tokenized


class Refused(Exception):
    """A request answered with a status and a message instead of a computation."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def allowed(headers, command: str, path: str, host: str, secret: str) -> None:
    """Refused (403) unless Host is the printed address, Origin (when there is one) that
    address's page, and the secret the printed one: ?token= for a GET, X-Picogpt-Token for
    the API."""
    if headers.get("Host") != host:
        raise Refused(403, "this server answers only at the address it printed")
    if headers.get("Origin") not in (None, f"http://{host}"):
        raise Refused(403, "requests from other sites' pages are refused")
    token = (parse_qs(urlparse(path).query).get("token", [None])[0] if command == "GET"
             else headers.get("X-Picogpt-Token"))
    if not secret_matches(token, secret):
        raise Refused(403, "the secret is missing or wrong: open the address picogpt printed")


def secret_matches(given: str | None, secret: str) -> bool:
    """Whether a request's secret is the server's, in constant time. Compared as UTF-8 bytes:
    compare_digest raises on a str that is not ASCII (?token=%C3%A9)."""
    return given is not None and secrets.compare_digest(given.encode("utf-8", "surrogatepass"),
                                                        secret.encode("utf-8"))


def body(length: str | None, file: BinaryIO) -> dict:
    """A request's body, read from file, as the JSON object it must be; Refused otherwise. A
    body over MAX_BODY is refused unread; 50,000 '[' make json's reader recurse too deep, which
    is a refusal too, not a traceback."""
    try:
        n_bytes = int(length or "")
    except ValueError:
        raise Refused(411, "a request body needs its length") from None
    if not 0 <= n_bytes <= MAX_BODY:
        raise Refused(413, f"a request body may hold up to {MAX_BODY // 1024} KiB")
    try:
        value = json.loads(file.read(n_bytes) or b"{}")
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise Refused(400, "the request body is not a JSON object")
    return value


def prompt(value, n_ctx: int) -> str:
    """A request's prompt, if it is text the encoder can take and at most CHARS_PER_POSITION
    characters for each position of the context; Refused (400) otherwise."""
    if not isinstance(value, str):
        raise Refused(400, "prompt must be a text")
    if len(value) > CHARS_PER_POSITION * n_ctx:
        raise Refused(400, f"the prompt is {len(value)} characters; the page takes up to "
                           f"{CHARS_PER_POSITION * n_ctx} ({CHARS_PER_POSITION} for each of the "
                           f"model's {n_ctx} positions). Shorten it")
    surrogate = re.search("[\ud800-\udfff]", value)  # JSON's "\ud800": half a pair, not text
    if surrogate:
        raise Refused(400, f"the prompt is not text: it holds U+{ord(surrogate[0]):04X}, half "
                           f"of a UTF-16 pair. Send the text as typed")
    return value


def settings(body: dict, n_vocab: int) -> Sampling:
    """The sampler a request asks for, checked as the command line checks it."""
    sampling = Sampling(body.get("top_k"), body.get("top_p"), body.get("temperature", 1.0),
                        body.get("repetition_penalty", 1.0))
    check_settings(0, sampling, None, None, n_vocab)
    return sampling


def language(accept: str | None) -> str:
    """"zh" when the first language a request accepts is Chinese, "en" otherwise. The page
    sends its own language; a browser sends the user's."""
    first = (accept or "").split(",")[0].strip().lower()
    return "zh" if first.startswith("zh") else "en"


# Each refusal the page can meet, as a pattern of its English words and their Chinese: the
# server's own, then the command line's checks (checks.py, generate.check_context, explore.py).
WORDS = [
    ("this server answers only at the address it printed", "这个服务器只应答它打印出的地址"),
    ("requests from other sites' pages are refused", "来自其他网站页面的请求一律拒绝"),
    ("the secret is missing or wrong: open the address picogpt printed",
     "密钥缺失或不对：请打开 picogpt 打印出的地址"),
    ("there is nothing here but the page", "这里只有这个页面"),
    (r"no such call; the page calls (?P<calls>.*)", "没有这个调用；页面调用的是 {calls}"),
    ("a request body needs its length", "请求体需要注明长度（Content-Length）"),
    (r"a request body may hold up to (?P<n>\d+) KiB", "请求体最多 {n} KiB"),
    ("the request body is not a JSON object", "请求体不是一个 JSON 对象"),
    (r"(?P<name>\w+) must be a whole number", "{name} 必须是整数"),
    ("page must be a short text", "page 必须是一段短文本"),
    ("prompt must be a text", "prompt 必须是文本"),
    ("another page changed the text", "另一个页面改动了文本"),
    (r"the prompt is (?P<n>\d+) characters; the page takes up to (?P<cap>\d+) \((?P<per>\d+) "
     r"for each of the model's (?P<n_ctx>\d+) positions\)\. Shorten it",
     "提示词有 {n} 个字符；页面最多接受 {cap} 个（模型的 {n_ctx} 个位置，每个 {per} 个）。"
     "请缩短提示词"),
    (r"the prompt is not text: it holds (?P<code>U\+\w+), half of a UTF-16 pair\. Send the "
     r"text as typed", "提示词不是有效的文本：其中的 {code} 只是 UTF-16 代理对的一半。"
                       "请按原样发送输入的文本"),
    (r"picogpt hit a bug (?P<error>.*); the terminal has the details\.",
     "picogpt 遇到了程序错误 {error}；详情见终端。"),
    (r"(?P<name>\w+)=(?P<value>.+) is not a whole number from (?P<low>-?\d+) up(?P<hint>; .*)?\.",
     "{name}={value} 不是 {low} 及以上的整数{hint}。"),
    (r"(?P<name>\w+)=(?P<value>.+) is not a whole number from (?P<low>-?\d+) to "
     r"(?P<high>-?\d+)(?P<hint>; .*)?\.",
     "{name}={value} 不是 {low} 到 {high} 之间的整数{hint}。"),
    (r"(?P<name>\w+)=(?P<value>.+) must be a number above (?P<low>\S+) and at most "
     r"(?P<high>[^;]+)(?P<hint>; .*)?\.",
     "{name}={value} 必须是大于 {low}、不超过 {high} 的数{hint}。"),
    (r"(?P<name>\w+)=(?P<value>.+) must be a number above (?P<low>[^;]+)(?P<hint>; .*)?\.",
     "{name}={value} 必须是大于 {low} 的数{hint}。"),
    (r"(?P<name>\w+)=(?P<value>.+) is too small: below (?P<low>\S+) it makes float32's logits "
     r"overflow(?P<hint>; .*)?\.",
     "{name}={value} 太小：低于 {low} 会让 float32 的 logits 溢出{hint}。"),
    (r"prompt is (?P<n>\d+) tokens; with n_tokens=(?P<k>\d+) that passes the model's limit of "
     r"(?P<n_ctx>\d+) tokens\. Shorten the prompt or lower n_tokens\.",
     "提示词有 {n} 个词元，再加 n_tokens={k} 个就超出了模型 {n_ctx} 个词元的上限。"
     "请缩短提示词，或减小 n_tokens。"),
    (r"there is no step to take back: the text is one token long\.",
     "没有可以退回的一步：文本只有一个词元。"),
]
HINTS = {  # the hints check_settings adds to a check's message
    "1 is greedy; leave it unset for greedy decoding": "1 即贪心解码；不设置则为贪心解码",
    "1 keeps every token; leave it unset for greedy decoding": "1 保留所有词元；不设置则为贪心解码",
    "1 keeps the model's probabilities; lower is more conservative":
        "1 保持模型给出的概率；越低越保守",
    "1 is off; 1.2 is a common choice against loops": "1 表示关闭；防止重复时常用 1.2",
    "give one, or leave it unset for a different sample each run":
        "给一个整数，或不设置，每次运行得到不同的样本",
}


def words(message: str, lang: str) -> str:
    """A refusal's message in the page's language; one no pattern knows stays English."""
    if lang != "zh":
        return message
    for pattern, chinese in WORDS:
        match = re.fullmatch(pattern, message)
        if match:
            values = match.groupdict()
            hint = (values.get("hint") or "").removeprefix("; ")
            values["hint"] = f"；{HINTS.get(hint, hint)}" if hint else ""
            return chinese.format(**values)
    return message
