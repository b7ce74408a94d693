"""`python -m picogpt.data chinese-poetry DIR` (cli/data.py, files/unpack.py) against a server on
127.0.0.1 that sends archives as GitHub does: in chunks, with no length, ignoring Range. Each test
checks what the user sees, and that DIR ends whole or absent, with nothing of theirs touched."""

import gzip
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import QuietHandler
from test_chinese_poetry import TANG_POEMS, write_corpus
from test_openai_faults import socket_closed

from picogpt import PicoGPTError
from picogpt.cli.data import main
from picogpt.files import download, unpack
from picogpt.files.chinese_poetry import ARCHIVE, COMMIT, read_chinese_poetry
from picogpt.files.unpack import unpack_tar

TOP = f"chinese-poetry-{COMMIT}"  # the one folder GitHub's archive keeps everything in


class ChunkedHandler(QuietHandler):
    """Sends a file as GitHub sends its archives: 200 with Transfer-Encoding: chunked and no
    Content-Length, whatever Range asks; server.chunked_answers counts those answers."""
    protocol_version = "HTTP/1.1"  # chunked transfer is HTTP/1.1's

    def do_GET(self):
        self.server.requests.append((self.path, self.headers.get("Range")))
        if getattr(self.server, "endless", None):
            self.send_endlessly(self.server.endless)
            return
        path = Path(self.directory) / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-gzip")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        data = path.read_bytes()
        for start in range(0, len(data), 4096):
            chunk = data[start:start + 4096]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")
        self.server.chunked_answers += 1
        self.close_connection = True

    def send_endlessly(self, most: int):
        """Chunks of noise until the client hangs up or most bytes are sent; server.sent
        counts them."""
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk, self.server.sent = os.urandom(1 << 16), 0
        try:
            while self.server.sent < most:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.server.sent += len(chunk)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client hung up, as it should past its limit
            pass
        self.close_connection = True

    def log_message(self, format, *args):
        pass


def archive_of(folder: Path, path: Path, top: str | None = TOP) -> Path:
    """folder as a .tar.gz at path, its files under top/ as GitHub's archives keep them."""
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname=top or ".")
    return path


def hostile(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    """A .tar.gz at path holding members as given (names, types and links unchecked)."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.fixture
def mirror(tmp_path, serve):
    """A chunked server whose site holds ARCHIVE, a small chinese-poetry in GitHub's layout."""
    write_corpus(tmp_path / "corpus", "github")
    site = tmp_path / "site"
    site.mkdir()
    archive_of(tmp_path / "corpus", site / ARCHIVE)
    return serve(site, ChunkedHandler, chunked_answers=0, site=site)


def run_data(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "picogpt.data", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=300)


def left_beside(folder: Path) -> list[str]:
    """What is in folder's parent besides folder: work files a download left behind."""
    return sorted(path.name for path in folder.parent.iterdir() if path != folder)


def test_the_command_unpacks_a_chunked_archive_into_a_folder_usable_as_text(mirror, tmp_path):
    """Through `python -m picogpt.data`, with the mirror named by PICOGPT_BASE_URL."""
    folder = tmp_path / "get" / "chinese-poetry"
    done = run_data("chinese-poetry", str(folder), env={"PICOGPT_BASE_URL": mirror.url})
    assert done.returncode == 0, done.stderr
    assert mirror.requests == [(f"/{ARCHIVE}", None)] and mirror.chunked_answers == 1
    assert "about 95 MB" in done.stderr and "no total" in done.stderr  # said before it starts
    assert f"--text {folder}" in done.stderr
    assert (folder / "全唐诗" / "poet.tang.0.json").is_file()  # GitHub's top folder taken out
    assert read_chinese_poetry(folder, traditional=True).poems == TANG_POEMS
    assert left_beside(folder) == []


def test_base_url_points_at_a_mirror_and_an_empty_folder_is_filled(mirror, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    main(["chinese-poetry", str(folder), "--base_url", mirror.url + "/"])
    assert read_chinese_poetry(folder, traditional=True).poems == TANG_POEMS
    assert left_beside(folder) == ["corpus", "site"]  # the test's own, and nothing else


def one_line_exit_1(argv: list[str], capsys, downloads: bool = True) -> str:
    """Run the command in this process; it must end with exit code 1 and one line on stderr
    (after the one that says what it downloads, when it got that far)."""
    with pytest.raises(SystemExit) as ended:
        main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("picogpt: ")]
    assert ended.value.code == 1 and len(lines) == 1 + downloads, err
    return lines[-1]


def test_offline_is_one_line_naming_the_other_ways(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(download, "RETRIES", 0)  # a refused connection is not waited for
    folder = tmp_path / "chinese-poetry"
    with socket_closed() as port:
        line = one_line_exit_1(["chinese-poetry", str(folder), "--base_url",
                                f"http://127.0.0.1:{port}"], capsys)
    assert "connection refused; 1 try" in line
    assert "git clone --depth 1 https://github.com/chinese-poetry/chinese-poetry" in line
    assert "npm pack chinese-poetry" in line and "a copy of the folder" in line
    assert not folder.exists() and left_beside(folder) == []


def test_offline_through_the_module_is_exit_code_1_and_one_line(tmp_path):
    """`python -m picogpt.data` with a host name that cannot resolve: tried once, one line."""
    done = run_data("chinese-poetry", str(tmp_path / "cp"), "--base_url",
                    "http://no-such-host.invalid")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("picogpt: could not download")
    assert not (tmp_path / "cp").exists()


def test_a_missing_archive_is_one_line_with_the_status(mirror, tmp_path, capsys):
    (mirror.site / ARCHIVE).unlink()
    line = one_line_exit_1(["chinese-poetry", str(tmp_path / "cp"), "--base_url", mirror.url],
                           capsys)
    assert "answered HTTP 404. Other ways to get it: git clone --depth 1" in line


def test_a_folder_that_holds_files_is_refused_before_any_download(mirror, tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    with pytest.raises(SystemExit) as ended:
        main(["chinese-poetry", str(folder), "--base_url", mirror.url])
    assert ended.value.code == 1 and "not an empty folder" in capsys.readouterr().err
    assert mirror.requests == []
    assert [path.name for path in folder.iterdir()] == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "my notes"


@pytest.mark.parametrize("case", ["dangling link", "link to an empty folder", ".",
                                  "name too long"])
def test_a_folder_that_cannot_become_the_corpus_is_refused_before_any_download(
        mirror, tmp_path, capsys, monkeypatch, case):
    (tmp_path / "empty").mkdir()
    folder = tmp_path / {"dangling link": "dangling", "link to an empty folder": "link",
                         ".": "empty", "name too long": "x" * 250}[case]
    if case == "dangling link":
        folder.symlink_to(tmp_path / "nowhere")
    elif case == "link to an empty folder":
        folder.symlink_to(tmp_path / "empty")
    elif case == ".":
        monkeypatch.chdir(folder)
        folder = Path(".")
    line = one_line_exit_1(["chinese-poetry", str(folder), "--base_url", mirror.url], capsys,
                           downloads=False)
    assert ("too long" if case == "name too long" else "a link or not a folder's name") in line
    assert mirror.requests == []
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["corpus", "site", "empty", *([folder.name] if "link" in case else [])])
    assert list((tmp_path / "empty").iterdir()) == []


def test_a_member_name_too_long_for_the_file_system_is_said_so(tmp_path):
    archive = hostile(tmp_path / "a.tar.gz", [(member(f"{TOP}/{'x' * 300}.json"), b"[]")])
    (tmp_path / "target").mkdir()
    with pytest.raises(unpack.BadArchive, match="a name too long for this file system"):
        unpack_tar(archive, tmp_path / "target")


def test_an_archive_that_is_not_chinese_poetry_writes_nothing(mirror, tmp_path, capsys):
    site = mirror.site
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "README").write_text("another project")
    archive_of(tmp_path / "other", site / ARCHIVE)
    folder = tmp_path / "cp"
    line = one_line_exit_1(["chinese-poetry", str(folder), "--base_url", mirror.url], capsys)
    assert "it is not chinese-poetry" in line
    assert not folder.exists() and left_beside(folder) == ["corpus", "other", "site"]


def test_a_server_that_sends_too_much_is_cut_off(mirror, tmp_path, capsys, monkeypatch):
    (tmp_path / "corpus" / "noise.bin").write_bytes(os.urandom(2 << 20))  # does not compress
    archive_of(tmp_path / "corpus", mirror.site / ARCHIVE)
    monkeypatch.setattr("picogpt.cli.data.MAX_ARCHIVE_BYTES", 1 << 20)
    folder = tmp_path / "cp"
    line = one_line_exit_1(["chinese-poetry", str(folder), "--base_url", mirror.url], capsys)
    assert f"{mirror.url}/{ARCHIVE} sends more than 1 MB" in line
    assert not folder.exists() and left_beside(folder) == ["corpus", "site"]


def test_an_endless_answer_is_cut_off_at_the_limit(mirror, tmp_path, capsys, monkeypatch):
    """Cut off while it comes, not after: the server, which would send 256 MB, sends about the
    limit (1 MB) plus what the sockets' buffers hold before it sees the client hang up."""
    monkeypatch.setattr("picogpt.cli.data.MAX_ARCHIVE_BYTES", 1 << 20)
    mirror.endless = 256 << 20
    folder = tmp_path / "cp"
    line = one_line_exit_1(["chinese-poetry", str(folder), "--base_url", mirror.url], capsys)
    assert "sends more than 1 MB" in line
    assert mirror.sent < 64 << 20
    assert not folder.exists() and left_beside(folder) == ["corpus", "site"]


# ---- hostile archives: nothing outside the folder, no link, bounded size -----------------------

HOSTILE = {
    "a parent path": [(member(f"{TOP}/../escaped.txt"), b"out")],
    "an absolute path": [(member("/tmp/escaped.txt"), b"out")],
    "a path through parents": [(member(f"{TOP}/a/../../../escaped.txt"), b"out")],
    "a Windows path": [(member("..\\escaped.txt"), b"out")],
    "a drive": [(member("C:escaped.txt"), b"out")],
    "a file twice": [(member(f"{TOP}/x.json"), b"1"), (member(f"{TOP}/x.json"), b"2")],
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_archive_is_refused_whole_and_writes_nothing_outside(tmp_path, case):
    archive = hostile(tmp_path / "a.tar.gz", HOSTILE[case])
    target = tmp_path / "deep" / "target"
    target.mkdir(parents=True)
    with pytest.raises(unpack.BadArchive):
        unpack_tar(archive, target)
    assert not any(path.name == "escaped.txt" for path in tmp_path.rglob("*"))
    assert not Path("/tmp/escaped.txt").exists()


def test_links_and_devices_are_never_made_and_nothing_goes_through_them(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = hostile(tmp_path / "a.tar.gz", [
        (member(f"{TOP}/link", tarfile.SYMTYPE, str(outside)), b""),
        (member(f"{TOP}/link/planted.txt"), b"through the link"),  # a folder of its own now
        (member(f"{TOP}/hard", tarfile.LNKTYPE, "/etc/passwd"), b""),
        (member(f"{TOP}/dev", tarfile.CHRTYPE), b""),
        (member(f"{TOP}/fifo", tarfile.FIFOTYPE), b""),
    ])
    target = tmp_path / "target"
    target.mkdir()
    assert unpack_tar(archive, target) == 1
    assert list(outside.iterdir()) == []
    made = sorted(str(path.relative_to(target)) for path in target.rglob("*"))
    assert made == [TOP, f"{TOP}/link", f"{TOP}/link/planted.txt"]
    assert not (target / TOP / "link").is_symlink()


def test_too_many_entries_or_bytes_refuse_the_archive(tmp_path):
    archive = hostile(tmp_path / "a.tar.gz", [(member(f"{TOP}/{i}.json"), b"x" * 100_000)
                                              for i in range(20)])  # 2 MB once unpacked
    for name in ("t1", "t2", "t3"):
        (tmp_path / name).mkdir()
    with pytest.raises(unpack.BadArchive, match="more than 10 entries"):
        unpack_tar(archive, tmp_path / "t1", max_members=10)
    with pytest.raises(unpack.BadArchive, match="more than 1 MB once unpacked"):
        unpack_tar(archive, tmp_path / "t2", max_bytes=1 << 20)
    assert unpack_tar(archive, tmp_path / "t3") == 20


def sparse_archive(path: Path, size: int) -> Path:
    """A .tar.gz at path of a few hundred bytes holding one GNU sparse file (what tar --sparse
    writes) of size bytes: a header whose map declares size bytes and stores none of them."""
    info = tarfile.TarInfo(f"{TOP}/zeros")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    block = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    block[386:410] = b"%011o\0%011o\0" % (size, 0)  # one hole, then nothing stored
    block[483:495] = b"%011o\0" % size  # the file's size once unpacked
    block[148:156] = b" " * 8  # the checksum counts its own field as spaces
    block[148:156] = b"%06o\0 " % sum(block)
    path.write_bytes(gzip.compress(bytes(block) + bytes(1024)))
    return path


@pytest.mark.parametrize("sparse_checked", [True, False])
def test_a_sparse_member_is_refused_and_written_bytes_count(tmp_path, monkeypatch,
                                                            sparse_checked):
    archive = sparse_archive(tmp_path / "a.tar.gz", 64 << 20)
    assert archive.stat().st_size < 1000
    if not sparse_checked:  # were the sparse check gone, the bytes written still stop it
        monkeypatch.setattr(tarfile.TarInfo, "issparse", lambda self: False)
    (tmp_path / "target").mkdir()
    with pytest.raises(unpack.BadArchive, match="sparse file" if sparse_checked
                       else "more than 1 MB once unpacked"):
        unpack_tar(archive, tmp_path / "target", max_bytes=1 << 20)
    written = sum(path.stat().st_size for path in (tmp_path / "target").rglob("*")
                  if path.is_file())
    assert written <= 1 << 20


@pytest.mark.parametrize("damage", ["not gzip", "truncated"])
def test_a_damaged_download_is_one_line_and_writes_nothing(mirror, tmp_path, capsys, damage):
    site = mirror.site
    data = (site / ARCHIVE).read_bytes()
    (site / ARCHIVE).write_bytes(b"<html>not found</html>" if damage == "not gzip"
                                 else data[: len(data) // 2])
    folder = tmp_path / "cp"
    line = one_line_exit_1(["chinese-poetry", str(folder), "--base_url", mirror.url], capsys)
    assert "cannot be unpacked (not a whole .tar.gz" in line and "nothing was written" in line
    assert not folder.exists() and left_beside(folder) == ["corpus", "site"]


def test_the_first_word_must_name_a_corpus(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["chinese_poetry", "DIR"])
    assert ended.value.code == 1
    assert "downloads chinese-poetry; write python -m picogpt.data chinese-poetry DIR" in (
        capsys.readouterr().err)


def test_unpacking_raises_picogpt_error_never_an_os_error_for_a_bad_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(PicoGPTError, match="cannot write"):
        unpack.download_unpacked("http://127.0.0.1:9/x.tar.gz", blocker / "sub" / "cp",
                                 lambda root: None, "", 1 << 20, "x.tar.gz")
