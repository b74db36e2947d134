"""File discovery and decoding: empty files (C6), bad encodings and binaries (C7), loops (C8)."""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import titans_agent.ingest.files as files_module
from titans_agent.errors import InvalidInputError
from titans_agent.ingest.files import (
    DEFAULT_EXCLUDE_DIRS,
    SkippedFile,
    SourceFile,
    discover,
    read_text_file,
)

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="symlinks and FIFOs")

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def run(paths, **kw) -> tuple[dict[str, SourceFile], dict[str, str], list[str]]:
    """discover() as (read files by display, skip reasons by display, displays in order)."""
    results = list(itertools.islice(discover(paths, **kw), 1000))
    assert len(results) < 1000, "discover did not end"
    # Walked files are shown as "<folder name>/<relative path>"; compare relative paths here.
    given = [paths] if isinstance(paths, (str, Path)) else paths
    roots = [os.path.basename(os.path.normpath(p)) + "/" for p in given if os.path.isdir(p)]

    def rel(shown: str) -> str:
        for root in roots:
            if shown.startswith(root):
                return shown[len(root) :]
        return shown

    read = {rel(r.display): r for r in results if isinstance(r, SourceFile)}

    def reason(text: str) -> str:
        return "duplicate of " + rel(text.removeprefix("duplicate of ")) if text.startswith("duplicate of ") else text

    skipped = {rel(r.path): reason(r.reason) for r in results if isinstance(r, SkippedFile)}
    order = [rel(r.display) if isinstance(r, SourceFile) else rel(r.path) for r in results]
    assert len(order) == len(read) + len(skipped), "a path was reported twice"
    return read, skipped, order


# -- C7: bad encodings and binaries ----------------------------------------------------------------


def test_c7_mixed_folder(tmp_path: Path) -> None:
    rng = random.Random(7)
    raw = {
        "notes.md": "# Notes\n\nCafé ✓ — 東京\n".encode(),
        "legacy.txt": "naïve résumé".encode("cp1252"),
        "wide.txt": "UTF-16 text: Grüße 日本\r\nsecond line\r\n".encode("utf-16"),
        ".noise": bytes(rng.randrange(256) for _ in range(4096)),
        "pixel.png": PNG,
        "nul.py": b"def f():\n    return 1\x00\n",
    }
    for name, data in raw.items():
        (tmp_path / name).write_bytes(data)

    read, skipped, _ = run([tmp_path])

    assert set(read) == {"notes.md", "legacy.txt", "wide.txt", "nul.py"}
    assert skipped == {".noise": "binary", "pixel.png": "binary (image/png)"}
    assert read["notes.md"].text == "# Notes\n\nCafé ✓ — 東京\n"
    assert read["notes.md"].encoding == "utf-8"
    assert read["legacy.txt"].text == "naïve résumé"
    assert read["legacy.txt"].encoding == "cp1252"
    assert read["wide.txt"].text == "UTF-16 text: Grüße 日本\nsecond line\n"
    assert read["wide.txt"].encoding == "utf-16"
    assert read["nul.py"].text == "def f():\n    return 1\n"
    assert read["nul.py"].warnings == ("1 NUL byte removed",)
    for name, f in read.items():
        assert f.path == (tmp_path / name).resolve()
        assert f.n_bytes == len(raw[name])
        assert f.sha256 == hashlib.sha256(raw[name]).hexdigest()
        assert "\r" not in f.text and "\x00" not in f.text


@pytest.mark.parametrize(
    ("data", "text", "encoding"),
    [
        (b"\xef\xbb\xbfplain \xc3\xa9\n", "plain é\n", "utf-8-sig"),
        ("big endian ✓\n".encode("utf-16-be"), "big endian ✓\n", "utf-16-be"),
        (b"\xfe\xff" + "big endian ✓\n".encode("utf-16-be"), "big endian ✓\n", "utf-16"),
        ("thirty-two ✓\n".encode("utf-32"), "thirty-two ✓\n", "utf-32"),
        ("no BOM, little endian\n".encode("utf-16-le"), "no BOM, little endian\n", "utf-16-le"),
        (b"a\r\nb\rc\n", "a\nb\nc\n", "utf-8"),
        (
            "Le garçon a mangé une pâtisserie à la crème; où est l'hôtel? « Très bien ».\n".encode("cp1252"),
            "Le garçon a mangé une pâtisserie à la crème; où est l'hôtel? « Très bien ».\n",
            "cp1252",
        ),
        ("Москва — столица России, крупнейший город страны.\n".encode("cp1251"), None, "cp1251"),
        # found by an attacker: one stray byte in UTF-8 made the whole file a legacy code page's mojibake
        (
            ("Le café naïve à Zürich résumé.\n" * 50).encode() + b"\x81 x\n",
            "Le café naïve à Zürich résumé.\n" * 50 + "\ufffd x\n",
            "utf-8",
        ),
        ("東京都は日本の首都であり、最大の都市です。人口は約千四百万人です。\n".encode("shift_jis"), None, None),
        ("北京是中华人民共和国的首都，也是全国的政治和文化中心。\n".encode("gbk"), None, None),
    ],
)
def test_decoding(tmp_path: Path, data: bytes, text: str | None, encoding: str | None) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    result = read_text_file(path)
    assert isinstance(result, SourceFile), result
    if text is None:
        assert result.text.strip() and "\ufffd" not in result.text
        if encoding is not None:
            assert result.text == data.decode(encoding)
    else:
        assert result.text == text
    if encoding is not None:
        assert result.encoding == encoding


def test_mostly_valid_utf8_keeps_text_with_replacements(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(("line of ascii text\n" * 200).encode() + b"\xff\xfe\xfa broken\n")
    result = read_text_file(path)
    assert isinstance(result, SourceFile)
    assert result.text.startswith("line of ascii text\n")
    assert result.text.endswith(" broken\n")
    assert result.text.count("line of ascii text") == 200


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_are_binary(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "blob"
    path.write_bytes(random.Random(seed).randbytes(2048))
    assert read_text_file(path, display="blob") == SkippedFile("blob", "binary")


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (PNG, "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "image/jpeg"),
        (b"GIF89a\x01\x00\x01\x00", "image/gif"),
        (b"PK\x03\x04\x14\x00\x00\x00", "application/zip"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "application/gzip"),
        (b"\x7fELF\x02\x01\x01\x00", "application/x-elf"),
    ],
)
def test_known_signatures_are_binary(tmp_path: Path, data: bytes, mime: str) -> None:
    path = tmp_path / "file.dat"
    path.write_bytes(data + b"some trailing text" * 10)
    result = read_text_file(path)
    assert isinstance(result, SkippedFile)
    assert result.reason == f"binary ({mime})"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600))
def test_any_bytes_never_raise(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any.bin"
    path.write_bytes(data)
    result = read_text_file(path)
    if isinstance(result, SourceFile):
        assert result.text.strip()
        assert "\x00" not in result.text and "\r" not in result.text
        assert result.sha256 == hashlib.sha256(data).hexdigest()
    else:
        assert result.reason
        if not data:
            assert result.reason == "empty"


# -- C6: empty files -------------------------------------------------------------------------------


def test_c6_empty_and_whitespace_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.md").write_bytes(b"  \n\t\r\n  ")
    (tmp_path / "blank16.txt").write_bytes(" \n \n".encode("utf-16"))
    (tmp_path / "real.txt").write_text("content\n")
    read, skipped, _ = run([tmp_path])
    assert set(read) == {"real.txt"}
    assert skipped == {
        "empty.txt": "empty",
        "blank.md": "whitespace only",
        "blank16.txt": "whitespace only",
    }


def test_too_large_file_is_skipped_with_sizes(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * 5_242_880)
    assert read_text_file(big, display="big.log") == SkippedFile("big.log", "too large (5,242,880 bytes > 4,194,304)")
    small = tmp_path / "small.txt"
    small.write_bytes(b"y" * 200)
    _, skipped, _ = run([tmp_path], max_file_bytes=100)
    assert skipped["small.txt"] == "too large (200 bytes > 100)"


# -- C8: symlinks ----------------------------------------------------------------------------------


@posix_only
def test_c8_symlink_loops_end_and_are_reported(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("alpha\n")
    (proj / "up").symlink_to("..")
    (proj / "self").symlink_to(".")
    (proj / "dead").symlink_to("/nonexistent/target")
    (proj / "me").symlink_to("me")  # a link to itself
    (tmp_path / "sibling.txt").write_text("outside the project\n")

    read, skipped, _ = run([proj])

    assert list(read) == ["a.txt"]
    assert read["a.txt"].path == (proj / "a.txt").resolve()
    assert skipped == {
        "up": "symlink loop",
        "self": "symlink loop",
        "dead": "broken symlink",
        "me": "symlink loop",
    }


@posix_only
def test_walked_files_are_shown_under_their_folder_name(tmp_path: Path) -> None:
    for name in ("json", "email"):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "__init__.py").write_text(f"# {name}\n")
    shown = [r.display for r in discover([tmp_path / "json", tmp_path / "email"]) if isinstance(r, SourceFile)]
    assert shown == ["json/sub/__init__.py", "email/sub/__init__.py"]


def test_file_reached_twice_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("guide\n")
    (tmp_path / "alias").symlink_to("docs")  # a second way into docs/, sorted first
    (tmp_path / "link.md").symlink_to("docs/guide.md")

    read, skipped, order = run([tmp_path, tmp_path / "docs" / "guide.md"])

    assert list(read) == ["docs/guide.md"]  # under its own path: the links are followed last
    assert skipped == {
        "alias": "duplicate of docs",
        "link.md": "duplicate of docs/guide.md",
        str(tmp_path / "docs" / "guide.md"): "duplicate of docs/guide.md",
    }
    assert order == ["docs/guide.md", str(tmp_path / "docs" / "guide.md"), "alias", "link.md"]


@posix_only
def test_special_files_and_errors_become_skips(tmp_path: Path, monkeypatch) -> None:
    os.mkfifo(tmp_path / "pipe")  # opening it would block: it must not be opened
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "x.txt").write_text("x\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    (tmp_path / "ok.txt").write_text("ok\n")

    real_scandir, real_open = os.scandir, open

    def scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    def fake_open(path, *args, **kwargs):
        if Path(path).name == "secret.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    # Running as root, chmod cannot make a file unreadable; the OS error is raised instead.
    monkeypatch.setattr(files_module.os, "scandir", scandir)
    monkeypatch.setattr(files_module, "open", fake_open, raising=False)

    read, skipped, _ = run([tmp_path, tmp_path / "missing.txt"])

    assert set(read) == {"ok.txt"}
    assert skipped == {
        "pipe": "not a regular file",
        "locked": "permission denied",
        "secret.txt": "permission denied",
        str(tmp_path / "missing.txt"): "does not exist",
    }


def test_missing_paths_do_not_raise(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert list(discover([missing])) == [SkippedFile(str(missing), "does not exist")]
    assert read_text_file(missing, display="nope") == SkippedFile("nope", "does not exist")


# -- include / exclude -----------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in [
        "src/app.py",
        "src/notes.txt",
        "docs/guide.md",
        "docs/api/ref.md",
        "tests/test_app.py",
        "tests/unit/test_core.py",
        "gen/out.py",
        "node_modules/pkg/index.js",
        ".git/config",
        "src/__pycache__/app.cpython-311.pyc",
        "README.md",
    ]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {rel}\n")
    return tmp_path


def test_walk_is_sorted_and_reports_default_excludes(tree: Path) -> None:
    read, skipped, order = run([tree])
    assert order == [
        ".git",
        "README.md",
        "docs/api/ref.md",
        "docs/guide.md",
        "gen/out.py",
        "node_modules",
        "src/__pycache__",
        "src/app.py",
        "src/notes.txt",
        "tests/test_app.py",
        "tests/unit/test_core.py",
    ]
    assert skipped == {
        ".git": "excluded (.git)",
        "node_modules": "excluded (node_modules)",
        "src/__pycache__": "excluded (__pycache__)",
    }
    assert read["docs/api/ref.md"].text == "content of docs/api/ref.md\n"
    assert run([tree])[2] == order  # deterministic
    assert {".git", "node_modules", "__pycache__"} <= set(DEFAULT_EXCLUDE_DIRS)


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (["*.py"], None, {"gen/out.py", "src/app.py", "tests/test_app.py",
                          "tests/unit/test_core.py"}),
        (["docs/**"], None, {"docs/guide.md", "docs/api/ref.md"}),
        (["tests/*"], None, {"tests/test_app.py"}),
        (["**/*.md"], None, {"README.md", "docs/guide.md", "docs/api/ref.md"}),
        (["*.py"], ["gen", "tests/unit/*"], {"src/app.py", "tests/test_app.py"}),
        (None, ["*.md", "*.py"], {"src/notes.txt"}),
        (None, ["docs/", "src/**", "tests"], {"README.md", "gen/out.py"}),
        (["src/*.t?t"], None, {"src/notes.txt"}),
    ],
)  # fmt: skip
def test_include_exclude_globs(tree: Path, include, exclude, expected: set[str]) -> None:
    read, skipped, _ = run([tree], include=include, exclude=exclude)
    assert set(read) == expected
    # Files left out by a pattern are not reported; default-excluded folders still are.
    assert set(skipped) == {".git", "node_modules", "src/__pycache__"}


def test_explicit_file_ignores_include(tree: Path) -> None:
    given = str(tree / "src" / "notes.txt")
    read, skipped, _ = run([given], include=["*.py"], exclude=["*.txt"])
    assert set(read) == {given} and not skipped
    assert read[given].display == given
    assert read[given].text == "content of src/notes.txt\n"


def test_discover_is_lazy(tree: Path) -> None:
    it = discover([tree])
    first = next(it)
    assert isinstance(first, SkippedFile) and first.path == f"{tree.name}/.git"


def test_bad_arguments_raise_at_the_call(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError):
        discover([tmp_path], max_file_bytes=0)  # at the call, before any iteration
    with pytest.raises(InvalidInputError):
        discover([tmp_path], include=[3])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        read_text_file(tmp_path / "x.txt", max_file_bytes=-1)


def test_single_path_and_single_pattern(tree: Path) -> None:
    read, _, _ = run(str(tree), include="*.md")  # not iterated character by character
    assert set(read) == {"README.md", "docs/guide.md", "docs/api/ref.md"}


def test_a_tiny_text_file_with_one_nul_is_text(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_bytes(b"x = 1\x00\ny = 2\n")  # 13 bytes, one NUL
    got = read_text_file(path)
    assert isinstance(got, SourceFile) and got.text == "x = 1\ny = 2\n"


# -- repositories: .gitignore and vendored folders -------------------------------------------------


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    write_tree(
        root,
        {
            ".gitignore": "*.log\n!keep.log\n/secret.txt\nout/\n# a comment\n",
            "app.py": "def main():\n    return 1\n",
            "debug.log": "noise\n",
            "keep.log": "kept although *.log is ignored\n",
            "secret.txt": "anchored: ignored only at the top\n",
            "out/gen.py": "generated\n",
            "sub/.gitignore": "*.tmp\n!important.log\n",
            "sub/secret.txt": "not the anchored one\n",
            "sub/a.tmp": "temporary\n",
            "sub/b.log": "ignored by the parent's *.log\n",
            "sub/important.log": "re-included by the nested .gitignore\n",
            "sub/out/x.py": "out/ matches at any depth\n",
        },
    )
    return root


def test_gitignore_rules_nested_files_and_negation(repo: Path) -> None:
    read, skipped, _ = run([repo])
    assert set(read) == {".gitignore", "app.py", "keep.log", "sub/.gitignore", "sub/secret.txt", "sub/important.log"}
    assert skipped == {
        ".git": "excluded (.git)",
        "debug.log": "ignored (.gitignore)",
        "out": "ignored (.gitignore)",
        "secret.txt": "ignored (.gitignore)",
        "sub/a.tmp": "ignored (.gitignore)",
        "sub/b.log": "ignored (.gitignore)",
        "sub/out": "ignored (.gitignore)",
    }


def test_gitignore_of_parent_folders_applies_inside_a_repository(repo: Path, tmp_path: Path) -> None:
    read, skipped, _ = run([repo / "sub"])
    assert set(read) == {".gitignore", "secret.txt", "important.log"}
    assert skipped["b.log"] == "ignored (.gitignore)"  # from repo/.gitignore, one level up
    # outside a repository, a parent's .gitignore is nobody's business
    plain = tmp_path / "plain"
    write_tree(plain, {".gitignore": "*.md\n", "docs/a.md": "a\n"})
    assert set(run([plain / "docs"])[0]) == {"a.md"}


def test_gitignore_can_be_switched_off_and_named_files_are_read(repo: Path) -> None:
    read, skipped, _ = run([repo], gitignore=False)
    assert {"debug.log", "secret.txt", "out/gen.py", "sub/a.tmp"} <= set(read)
    assert skipped == {".git": "excluded (.git)"}
    result = list(discover([repo / "debug.log"]))  # a file named directly is always read
    assert isinstance(result[0], SourceFile)


def test_vendored_and_generated_folders_are_excluded(tmp_path: Path) -> None:
    names = ["dist", "build", "vendor", "target", ".venv", "node_modules", ".tox", ".mypy_cache", "pkg.egg-info"]
    write_tree(tmp_path, {f"{name}/x.py": "x = 1\n" for name in names} | {"src/main.py": "y = 2\n"})
    read, skipped, _ = run([tmp_path])
    assert set(read) == {"src/main.py"}
    assert skipped == {name: f"excluded ({name})" for name in names}
    read, skipped, _ = run([tmp_path], exclude_dirs=[".venv"])
    assert "build/x.py" in read and skipped == {".venv": "excluded (.venv)"}


SECRET_NAMES = [".env", ".env.local", "server.pem", "tls.key", "id_rsa", "id_ed25519", ".netrc", ".npmrc",
                ".pypirc", ".git-credentials", "cert.p12"]  # fmt: skip


def test_files_that_may_hold_secrets_are_not_read_by_a_walk(tmp_path: Path) -> None:
    """A project's .env, private keys and credential stores are reported, not read (recall would
    hand them to anyone who asks); a file named directly is read; exclude_files=[] reads them."""
    write_tree(tmp_path, {name: "AWS_SECRET_ACCESS_KEY=abc123\n" for name in SECRET_NAMES})
    write_tree(tmp_path, {"sub/.env.production": "TOKEN=x\n", "app.py": "x = 1\n", ".envrc.md": "notes\n"})
    read, skipped, _ = run([tmp_path])
    assert set(read) == {"app.py", ".envrc.md"}
    want = {name: "excluded (may hold secrets)" for name in [*SECRET_NAMES, "sub/.env.production"]}
    assert skipped == want
    assert isinstance(next(discover([tmp_path / ".env"])), SourceFile)  # named directly: read
    read, skipped, _ = run([tmp_path], exclude_files=[])
    assert set(read) == {"app.py", ".envrc.md", "sub/.env.production", *SECRET_NAMES} and not skipped


def test_secret_files_in_any_case_and_private_key_blocks_are_not_read_by_a_walk(tmp_path: Path) -> None:
    # found by an attacker: all of these were read and recalled (an AWS key, private-key blocks)
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    by_name = [".ENV", "server.PEM", "prod.env", "id_rsa.bak", "terraform.tfstate", "secrets.json", "Credentials"]
    by_name += [".envrc", "prod.tfvars", ".my.cnf", ".bash_history", "deploy.ppk", "admin.kubeconfig"]
    write_tree(tmp_path, {name: "password=hunter2\n" for name in by_name})
    write_tree(
        tmp_path,
        {
            ".aws/credentials": "aws_secret_access_key = abc\n",
            ".ssh/config": "Host x\n",
            "deploy_key": key,
            "notes.md": "Rotate the key with a `-----BEGIN PRIVATE KEY-----` header.\n" + key,
            "app.py": "x = 1\n",
            "env.py": "import os\n",
        },
    )
    read, skipped, _ = run([tmp_path])
    assert set(read) == {"app.py", "env.py"}
    assert skipped == {
        **{name: "excluded (may hold secrets)" for name in by_name},
        ".aws": "excluded (.aws)",
        ".ssh": "excluded (.ssh)",
        "deploy_key": "excluded (holds a private key)",
        "notes.md": "excluded (holds a private key)",
    }
    assert isinstance(next(discover([tmp_path / "deploy_key"])), SourceFile)  # named directly: read
    write_tree(
        tmp_path / "more", {".docker/config.json": '{"auths": {}}\n', ".AWS/credentials": "x\n", "ok.md": "ok\n"}
    )
    read, skipped, _ = run([tmp_path / "more"])
    assert set(read) == {"ok.md"} and skipped == {".AWS": "excluded (.AWS)", ".docker": "excluded (.docker)"}
    read, skipped, _ = run([tmp_path], exclude_files=[])
    assert {"deploy_key", "notes.md", *by_name} <= set(read)


CRAFTED = "*a*a*a*a*a*a*a*a*a*a*a*a*b"  # exponential for a backtracking matcher on a long run of 'a'
DEEP = "**/a/**/a/**/a/**/b"  # four runs of '**': backtracking over the folders, to their depth's 4th power


def test_a_crafted_gitignore_line_or_glob_cannot_stall_a_walk(tmp_path: Path) -> None:
    # found by an attacker: the CRAFTED .gitignore line kept ingest at 100% CPU (and an MCP server
    # frozen); the walk runs in a child process, so that a regression fails on the timeout instead
    # of hanging
    write_tree(
        tmp_path,
        {".gitignore": f"{CRAFTED}\n{DEEP}\n# ***** banner *****\n*.log\n", "a" * 60 + ".txt": "hi\n", "x.log": "l\n"},
    )
    write_tree(tmp_path, {"a" * 60 + "b": "ignored by the crafted line\n"})
    code = (
        "import sys; from titans_agent.ingest.files import discover\n"
        "print(sorted(getattr(r, 'display', '') for r in discover([sys.argv[1]])))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "a" * 60 + ".txt" in done.stdout and "'x.log'" not in done.stdout and "a" * 60 + "b'" not in done.stdout
    assert "line(s) [2] hold more than 2 runs of '**'" in done.stderr  # the banner comment is no pattern
    for bad in ({"include": [DEEP]}, {"exclude": DEEP}):
        with pytest.raises(InvalidInputError, match="runs of '\\*\\*'; at most 2"):
            discover([tmp_path], **bad)
    read, _, _ = run([tmp_path], include=[CRAFTED, "*.md"])  # single stars: any number
    assert set(read) == set()
    read, _, _ = run([tmp_path], include=["*a*a*a*a*.txt"], gitignore=False)
    assert set(read) == {"a" * 60 + ".txt"}


@posix_only
def test_a_link_to_a_secret_file_is_not_followed(tmp_path: Path) -> None:
    write_tree(tmp_path, {"proj/app.py": "x = 1\n", "proj/conf/.env": "TOKEN=x\n"})
    (tmp_path / "proj" / "settings.txt").symlink_to(tmp_path / "proj" / "conf" / ".env")
    read, skipped, _ = run([tmp_path / "proj"])
    assert set(read) == {"app.py"}
    assert skipped["settings.txt"].startswith("excluded (may hold secrets; links to ")


# -- odd paths and unreadable files ----------------------------------------------------------------

ODD_NAMES = ["spaced name.md", "\u00fcn\u00efc\u00f8d\u00e9-\u65e5\u672c.txt", "-dash.txt", "quote'\"s.txt",
             "#hash%pct&amp;.txt", "back\\slash.txt", "tab\tand\nnewline.txt", "emoji-\U0001f600.txt"]  # fmt: skip


@posix_only
def test_odd_path_characters_work(tmp_path: Path) -> None:
    for i, name in enumerate(ODD_NAMES):
        (tmp_path / name).write_text(f"file number {i}\n")
    read, skipped, _ = run([tmp_path])
    assert skipped == {}
    expected = {name: f"file number {i}\n" for i, name in enumerate(ODD_NAMES)}
    assert {name: f.text for name, f in read.items()} == expected


@posix_only
def test_file_name_that_is_not_utf8_is_reported_not_raised(tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path)
    with open(folder + b"/bad\xffname.txt", "wb") as fh:
        fh.write(b"text\n")
    os.mkdir(folder + b"/dir\xfe")
    (tmp_path / "ok.txt").write_text("ok\n")
    read, skipped, _ = run([tmp_path])
    assert set(read) == {"ok.txt"}
    assert skipped == {"bad\\xffname.txt": "file name is not valid UTF-8", "dir\\xfe": "file name is not valid UTF-8"}


@posix_only
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a chmod 000 file")
def test_chmod_000_file_and_folder_are_reported(tmp_path: Path) -> None:
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "x.txt").write_text("x\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    (tmp_path / "ok.txt").write_text("ok\n")
    os.chmod(tmp_path / "secret.txt", 0)
    os.chmod(tmp_path / "locked", 0)
    try:
        read, skipped, _ = run([tmp_path])
    finally:
        os.chmod(tmp_path / "locked", 0o755)
    assert set(read) == {"ok.txt"}
    assert skipped == {"locked": "permission denied", "secret.txt": "permission denied"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_gitignore_agrees_with_git_itself(tmp_path: Path) -> None:
    root = tmp_path / "r"
    files = {
        ".gitignore": "*.log\n!keep.log\n/anchored.txt\ncache/\n**/deep/*.tmp\na/**/z.md\n[abc].cfg\n"
        "\\#literal.txt\ndocs/*.pdf\n!docs/manual.pdf\n*.bak\n",
        "keep.log": "k", "x.log": "x", "anchored.txt": "a", "sub/anchored.txt": "a", "cache/c.py": "c",
        "sub/cache/c.py": "c", "one/deep/t.tmp": "t", "one/two/deep/t.tmp": "t", "deep/t.tmp": "t",
        "a/z.md": "z", "a/b/c/z.md": "z", "b.cfg": "b", "d.cfg": "d", "#literal.txt": "l",
        "docs/guide.pdf": "g", "docs/manual.pdf": "m", "docs/sub/guide.pdf": "g", "main.py": "m",
        "sub/.gitignore": "!x.bak\n*.py\n", "sub/x.bak": "x", "sub/y.bak": "y", "sub/s.py": "s",
        "sub/n/.gitignore": "!s.py\n", "sub/n/s.py": "s", "sub/n/t.log": "t",
    }  # fmt: skip
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    read, _, _ = run([root])
    assert set(read) == set(listed)
    assert {"keep.log", "sub/anchored.txt", "docs/manual.pdf", "sub/x.bak", "sub/n/s.py"} <= set(read)


def test_a_folder_its_repository_ignores_is_still_walked_when_asked_for(tmp_path: Path) -> None:
    # e.g. Python installed by pyenv, a git checkout whose .gitignore holds "/versions"
    root = tmp_path / "pyenv"
    (root / ".git").mkdir(parents=True)
    write_tree(
        root,
        {
            ".gitignore": "/versions\n*.pyc\n",
            "versions/3.11/lib/json/decoder.py": "class JSONDecodeError(ValueError): ...\n",
            "versions/3.11/lib/json/.gitignore": "scratch.txt\n",
            "versions/3.11/lib/json/scratch.txt": "x\n",
            "versions/3.11/lib/json/cache.pyc": "not text anyway\n",
        },
    )
    read, skipped, _ = run([root / "versions" / "3.11" / "lib" / "json"])
    assert set(read) == {"decoder.py", ".gitignore", "cache.pyc"}  # the parent's *.pyc no longer applies
    assert skipped == {"scratch.txt": "ignored (.gitignore)"}
    assert run([root])[1]["versions"] == "ignored (.gitignore)"  # walked from the top, git's rules hold


def test_a_gitignore_that_is_a_fifo_is_not_opened(tmp_path):
    # found by a reviewer: open() on a FIFO .gitignore blocked the ingest forever
    import threading

    from titans_agent.ingest.patterns import load_gitignore

    os.mkfifo(tmp_path / ".gitignore")
    (tmp_path / "a.txt").write_text("alpha", encoding="utf-8")
    out: list = []
    worker = threading.Thread(target=lambda: out.append((load_gitignore(str(tmp_path)), list(discover([tmp_path])))))
    worker.daemon = True
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "walking a folder whose .gitignore is a FIFO hung"
    ignores, items = out[0]
    assert ignores == []
    assert [p.path.name for p in items if isinstance(p, SourceFile)] == ["a.txt"]


@posix_only
@pytest.mark.parametrize("link_name", ["a-link.md", "z-link.md"])  # sorts before the file, and after
def test_a_linked_file_is_read_under_its_own_path_and_the_link_is_the_duplicate(tmp_path: Path, link_name) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "m-real.md").write_text("the real note\n")
    (folder / link_name).symlink_to("m-real.md")

    read, skipped, _ = run([folder])

    assert list(read) == ["m-real.md"]
    assert read["m-real.md"].path == (folder / "m-real.md").resolve()
    assert read["m-real.md"].display == "notes/m-real.md"
    assert skipped == {link_name: "duplicate of m-real.md"}


@posix_only
@pytest.mark.parametrize("link_name", ["a-alias", "z-alias"])
def test_a_linked_folder_is_walked_under_its_own_path(tmp_path: Path, link_name) -> None:
    (tmp_path / "m-docs").mkdir()
    (tmp_path / "m-docs" / "guide.md").write_text("guide\n")
    (tmp_path / link_name).symlink_to("m-docs")

    read, skipped, _ = run([tmp_path])

    assert list(read) == ["m-docs/guide.md"]
    assert skipped == {link_name: "duplicate of m-docs"}


@posix_only
def test_a_link_out_of_the_walked_folders_is_not_followed(tmp_path: Path) -> None:
    # found by an attacker: a repository's link to /etc/shadow (or ~/.kube/config, any secret a
    # name list misses) was read and recalled; a walk reads what the folder holds
    (tmp_path / "outside.md").write_text("kept elsewhere\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.md").write_text("a file in a linked folder\n")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a-link.md").symlink_to(tmp_path / "outside.md")
    (folder / "dir-link").symlink_to(tmp_path / "elsewhere")
    (folder / "shadow").symlink_to("/etc/passwd")

    read, skipped, _ = run([folder])

    assert read == {}
    assert skipped == {
        "a-link.md": f"links out of the folder (to {(tmp_path / 'outside.md').resolve()}; name it to read it)",
        "dir-link": f"links out of the folder (to {(tmp_path / 'elsewhere').resolve()}; name it to read it)",
        "shadow": f"links out of the folder (to {Path('/etc/passwd').resolve()}; name it to read it)",
    }
    # named, or walked too, the target is read (once, under its own path)
    read, skipped, _ = run([folder, tmp_path / "outside.md", tmp_path / "elsewhere"])
    assert set(read) == {str(tmp_path / "outside.md"), "a.md"}
    assert skipped["shadow"].startswith("links out of the folder")


@posix_only
@pytest.mark.parametrize("link_name", ["a-link.md", "z-link.md"])
def test_ingest_stores_a_linked_file_once_under_its_own_name(agent, tmp_path: Path, link_name) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "m-real.md").write_text("The real note about the harbour crane.\n")
    (folder / link_name).symlink_to("m-real.md")

    report = agent.ingest(folder)

    assert [(s.path, s.reason) for s in report.skipped] == [(f"notes/{link_name}", "duplicate of notes/m-real.md")]
    [hit] = agent.records()
    assert hit.source == str((folder / "m-real.md").resolve()) and hit.metadata["path"] == "notes/m-real.md"


@posix_only
def test_a_link_does_not_bypass_gitignore_or_exclude(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "secret").mkdir(parents=True)
    (docs / ".gitignore").write_text("private.txt\nsecret/\n")
    (docs / "private.txt").write_text("gitignored walruses\n")
    (docs / "excluded.log").write_text("excluded narwhals\n")
    (docs / "ok.txt").write_text("ordinary\n")
    (docs / "secret" / "key.txt").write_text("in an ignored folder\n")
    (docs / "public.txt").symlink_to("private.txt")
    (docs / "innocent.txt").symlink_to("excluded.log")
    (docs / "open").symlink_to("secret")  # a folder link to an ignored folder
    (docs / "key.txt").symlink_to("secret/key.txt")  # a file link into it
    (docs / "named.log").symlink_to("ok.txt")  # a link whose own name is excluded: not followed

    read, skipped, _ = run([docs], exclude=["*.log"])

    assert sorted(read) == [".gitignore", "ok.txt"]
    assert {p: r.split(";")[0] for p, r in skipped.items()} == {
        "private.txt": "ignored (.gitignore)",
        "secret": "ignored (.gitignore)",
        "public.txt": "ignored (.gitignore",
        "open": "ignored (.gitignore",
        "key.txt": "ignored (.gitignore",
        "innocent.txt": f"excluded (links to {(docs / 'excluded.log').resolve()})",
    }
    assert all(str(Path(r.path)).endswith(("ok.txt", ".gitignore")) for r in read.values())


@posix_only
def test_a_link_resolved_past_the_path_limit_is_not_taken_for_one_inside(tmp_path: Path, monkeypatch) -> None:
    # found by an attacker: realpath() stops resolving past 4,096 characters and read "../" as text,
    # so a link that the kernel follows out of the folder looked like a path inside it, and was read
    root, out, name = tmp_path / "R", tmp_path / "out", "d" * 200
    root.mkdir()
    (out / "evil").mkdir(parents=True)
    (out / "evil" / "secret.txt").write_text("TOP SECRET outside the walked folder\n")
    monkeypatch.chdir(root)
    os.mkdir("deep")
    os.chdir("deep")
    for i in range(21):  # R/deep and 21 levels of 200-character names: past 4,096 characters
        os.mkdir(name)
        os.chdir(name)
        if i == 10:
            os.symlink("/".join([name] * 10), "l2")
    far = out / "/".join(f"x{i}" for i in range(23))
    far.mkdir(parents=True)
    os.symlink(far, "s")
    os.chdir(root)
    os.symlink("deep/" + "/".join([name] * 11), "l1")
    os.symlink("l1/l2/s/" + "../" * 23 + "evil", "evil")
    read, skipped, _ = run([root])
    assert not any("TOP SECRET" in f.text for f in read.values())
    assert skipped.get("evil") == "symlink loop"


@posix_only
def test_a_link_into_another_walked_folder_obeys_that_walks_rules(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".gitignore").write_text("*.cfg\n")
    (repo / "prod.cfg").write_text("PASSWORD=hunter2\n")
    (repo / "readme.md").write_text("a readme\n")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "config.txt").symlink_to(repo / "prod.cfg")
    (folder / "readme.txt").symlink_to(repo / "readme.md")

    read, skipped, _ = run([folder, repo], exclude=["readme.md"])

    assert set(read) == {".gitignore"}  # the walk of repo: its .gitignore leaves prod.cfg out
    assert skipped["config.txt"].startswith("ignored (.gitignore; links to ")
    assert skipped["readme.txt"].startswith("excluded (links to ")
    read, skipped, _ = run([folder], gitignore=False)  # out of the one walked folder: never followed
    assert read == {} and all(r.startswith("links out of the folder") for r in skipped.values())


@posix_only
def test_ingest_stores_no_file_that_a_link_leads_to_past_the_rules(agent, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / ".gitignore").write_text("private.txt\n")
    (docs / "private.txt").write_text("gitignored private content about walruses\n")
    (docs / "excluded.log").write_text("excluded log content about narwhals\n")
    (docs / "ok.txt").write_text("ordinary content\n")
    (docs / "public.txt").symlink_to("private.txt")
    (docs / "innocent.txt").symlink_to("excluded.log")

    agent.ingest(docs, exclude=["*.log"])

    stored = {hit.source for hit in agent.records()}
    assert str((docs / "private.txt").resolve()) not in stored
    assert str((docs / "excluded.log").resolve()) not in stored
    assert str((docs / "ok.txt").resolve()) in stored
