"""Path patterns: the include/exclude globs of an ingest, and git's ``.gitignore`` rules.

Globs (:func:`matches_glob`) are matched against a ``/``-separated relative path and against the
bare name: ``*`` and ``?`` stay within one folder, ``**`` spans any number. ``.gitignore`` files are
parsed by the pathspec library (:class:`pathspec.GitIgnoreSpec`, git's own semantics) and combined
as git does (:func:`gitignored`): the deepest file with a matching pattern decides.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import os
import re
from collections.abc import Sequence

import pathspec

from titans_agent.errors import InvalidInputError
from titans_agent.validation import check_patterns

__all__ = [
    "DEFAULT_EXCLUDE_DIRS",
    "DEFAULT_EXCLUDE_FILES",
    "MAX_GLOBSTARS",
    "Ignores",
    "gitignored",
    "holds_private_key",
    "load_gitignore",
    "matches_glob",
    "matches_name",
    "parent_gitignores",
    "atomic_stars",
    "check_globs",
    "globstars",
]

logger = logging.getLogger(__name__)

# -- what a folder walk leaves out by default ------------------------------------------------------

#: Folder names (or ``fnmatch`` patterns of names) never walked into, each one met reported as
#: ``excluded (<name>)``: version control, virtual environments, caches, vendored dependencies and
#: build output.
DEFAULT_EXCLUDE_DIRS = (
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "dist", "build", "vendor", "target",
    "site-packages", "bower_components", ".gradle", ".next", ".terraform", "*.egg-info",
    ".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", "gcloud",
)  # fmt: skip

#: File names (``fnmatch`` patterns, matched ignoring case) a folder walk does not read, each
#: reported as ``excluded (may hold secrets)``: environment files, private keys and certificates,
#: credential stores, Terraform state. Ingesting a project should not copy its credentials into a
#: memory that recall hands to anyone who asks. (A walked file whose text holds a PEM private key
#: block is left out too, as ``excluded (holds a private key)``: :func:`holds_private_key`.)
DEFAULT_EXCLUDE_FILES = (
    ".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", ".pgpass", ".npmrc", ".pypirc",
    ".git-credentials", ".htpasswd", "credentials", "credentials.json", "secrets.json", "secrets.yml",
    "secrets.yaml", "secrets.toml", "*.tfstate", "*.tfstate.backup", "*.tfvars", "*.ppk", "kubeconfig",
    "*.kubeconfig", ".envrc", ".env-*", "_netrc", ".my.cnf", ".s3cfg", ".boto", ".vault-token",
    ".bash_history", ".zsh_history", "credentials.toml", "service-account*.json",
    "application_default_credentials.json",
)  # fmt: skip

_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----")


def matches_name(name: str, patterns: Sequence[str]) -> bool:
    """Whether a bare file name matches any ``fnmatch`` pattern, ignoring case (``.ENV``, ``KEY.PEM``)."""
    folded = name.casefold()
    return any(fnmatch.fnmatchcase(folded, pattern.casefold()) for pattern in patterns)


def holds_private_key(text: str) -> bool:
    """Whether ``text`` holds a PEM (or PGP) private key block: ``-----BEGIN ... PRIVATE KEY-----``."""
    return "PRIVATE KEY" in text and _PRIVATE_KEY.search(text) is not None


# -- include / exclude globs ----------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: ``**`` spans folders, ``*`` and ``?`` stay within one, ``[...]`` is a set."""
    pattern = pattern.replace("\\", "/")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):  # a run of two stars or more is one '**' (as globstars counts)
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            if pattern.startswith("/", j):
                out.append("(?:.*/)?")  # zero or more folders
                j += 1
            else:
                out.append(".*")
            i = j
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if j < 0:
                out.append(re.escape(c))
                i += 1
            else:
                # fnmatch's translation of one set, e.g. "[!a-c]" -> "[^a-c]"
                out.append(fnmatch.translate(pattern[i : j + 1])[4:-3])
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile(atomic_stars("".join(out)) + r"\Z", re.DOTALL)


# A star within one folder level, as globs and pathspec translate "*"; what may sit between two
# stars: literals (escaped or plain), "?" ([^/]) and sets, none of them "/" or a quantifier.
_STAR = r"\[\^/\]\*"
_PIECE = r"(?:\\.|\[\^/\](?!\*)|\[(?!\^/\]\*)(?:\\.|[^\]\\])+\](?!\*)|[^\\\[\]()*+?{}|^$./])+"
_MIDDLE = re.compile(rf"{_STAR}({_PIECE})(?={_STAR}|\.\*)", re.DOTALL)  # an escaped newline is a piece too
_STAR_RUN = re.compile(rf"(?:{_STAR}){{2,}}")


def atomic_stars(regex: str) -> str:
    """A glob's regular expression (``*`` as ``[^/]*``) that matches the same paths without
    exponential backtracking: a star, the fixed-length piece after it and the star that follows
    (``*a*``) match the piece's leftmost occurrence in an atomic group, ``(?>[^/]*?a)``.

    Why that is the same match: within one folder level, if the pattern matches with the piece at
    a later occurrence, it matches with it at the leftmost one too (the next star takes up the
    characters between them, which hold no ``/``). A crafted ``*a*a*a*a*a*a*a*a*a*a*a*a*b``
    against a 60-character name did not finish in minutes before; now microseconds. Stars running
    together are one star."""
    return _MIDDLE.sub(lambda m: f"(?>[^/]*?{m.group(1)})", _STAR_RUN.sub("[^/]*", regex))


#: The most runs of ``**`` (a star that spans folders) a glob or a ``.gitignore`` line may hold:
#: each is matched by backtracking over the path, so time grows as the path's length to the power
#: of their number (three took 15 s on a crafted 4,000-character path; real patterns such as
#: ``**/.idea/**/workspace.xml`` need two). Single stars have no limit (:func:`atomic_stars`).
MAX_GLOBSTARS = 2


def globstars(pattern: str) -> int:
    """How many runs of ``**`` ``pattern`` holds (``**/src/**/*.py``: 2)."""
    return len(re.findall(r"\*{2,}", pattern))


def check_globs(patterns: Sequence[str] | str | None, name: str) -> list[str]:
    """``patterns`` as a list of globs (:func:`~titans_agent.validation.check_patterns`: a string
    is one; None is none).

    Raises:
        InvalidInputError: as ``check_patterns``, an empty pattern, or one that holds more than
            :data:`MAX_GLOBSTARS` runs of ``**``.
    """
    patterns = check_patterns(patterns, name) or []
    for p in patterns:
        if not p:
            raise InvalidInputError(f"{name} patterns must not be empty")
        if globstars(p) > MAX_GLOBSTARS:
            raise InvalidInputError(
                f"{name} pattern {p[:80]!r} holds {globstars(p)} runs of '**'; at most {MAX_GLOBSTARS} "
                "(matching more can take exponential time)"
            )
    return patterns


def matches_glob(rel: str, patterns: Sequence[str]) -> bool:
    """Whether a relative ``/`` path, or its bare name, matches any glob in ``patterns``."""
    name = rel.rsplit("/", 1)[-1]
    return any(_glob_regex(p).match(rel) or _glob_regex(p).match(name) for p in patterns)


# -- .gitignore ---------------------------------------------------------------------------------

_MAX_GITIGNORE_BYTES = 1_048_576

Ignores = list[tuple[str, pathspec.GitIgnoreSpec]]
"""The ``.gitignore`` files in force in a folder: (folder, spec) pairs, outermost first."""


def load_gitignore(folder: str) -> Ignores:
    """The ``.gitignore`` of ``folder`` as a one-item list, or ``[]`` (none, unreadable, huge)."""
    path = os.path.join(folder, ".gitignore")
    if not os.path.isfile(path):  # absent, or a FIFO/device/folder that open() would block on
        if os.path.lexists(path):
            logger.warning("%s: not a regular file, not used", path)
        return []
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_GITIGNORE_BYTES + 1)
    except OSError:
        return []
    if len(data) > _MAX_GITIGNORE_BYTES:
        logger.warning("%s: larger than %d bytes, not used", path, _MAX_GITIGNORE_BYTES)
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    slow = {n for n, line in enumerate(lines, 1) if not line.startswith("#") and globstars(line) > MAX_GLOBSTARS}
    if slow:  # a crafted repository must not stall the walk (MAX_GLOBSTARS)
        logger.warning(
            "%s: line(s) %s hold more than %d runs of '**' and are not used", path, sorted(slow)[:10], MAX_GLOBSTARS
        )
        lines = [line for n, line in enumerate(lines, 1) if n not in slow]
    try:
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        for pattern in spec.patterns:  # the same objects its matcher holds
            if pattern.regex is not None:
                pattern.regex = re.compile(atomic_stars(pattern.regex.pattern), pattern.regex.flags)
    except Exception:  # a malformed pattern must not abort an ingest
        logger.warning("%s: cannot be parsed, not used", path, exc_info=True)
        return []
    return [(folder, spec)] if spec.patterns else []


def parent_gitignores(root: str) -> Ignores:
    """``.gitignore`` files of the folders above ``root`` up to its repository's root (the first
    folder holding ``.git``), outermost first; ``[]`` when ``root`` is not inside a repository."""
    parents: list[str] = []
    folder = os.path.dirname(root)
    if os.path.lexists(os.path.join(root, ".git")):
        return []
    for _ in range(256):
        parents.append(folder)
        if os.path.lexists(os.path.join(folder, ".git")):
            return [spec for parent in reversed(parents) for spec in load_gitignore(parent)]
        up = os.path.dirname(folder)
        if up == folder:
            break
        folder = up
    return []


def gitignored(path: str, is_dir: bool, ignores: Ignores) -> bool:
    """Whether git would ignore ``path``: the deepest ``.gitignore`` with a matching pattern
    decides (its last matching pattern, so ``!keep.log`` re-includes)."""
    for folder, spec in reversed(ignores):
        rel = os.path.relpath(path, folder).replace(os.sep, "/")
        if rel.startswith("../"):
            continue
        result = spec.check_file(rel + "/" if is_dir else rel)
        if result.include is not None:
            return bool(result.include)
    return False
