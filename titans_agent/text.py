"""The one lexicon: how titans-agent reads words, everywhere it reads them.

Pure functions and constants, no I/O. Every module that tokenises, normalises or filters words
(the write's exact-repeat and near-duplicate checks, the lexical query, knowledge-update detection,
recall's locality and demotions) takes them from here, so one change of a word list or of the token
rule changes them all alike.

- a **token** is a maximal run of Unicode word characters (``\\w+``) of the lower-cased text
  (:func:`tokens`);
- the **normal form** of a text (:func:`normalise`) is NFC, case-folded, with runs of white space as
  one space; its sha256 (:func:`text_hash`) identifies an exact repeat;
- an **index term** (:func:`index_terms`) is what the lexical signal counts: a maximal run of
  letters and digits (an underscore separates, as in ``render_progress``) of the lower-cased text,
  diacritics removed, then Porter-stemmed when it has 3 to 64 characters (the rules of SQLite
  FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer, which this index replaced), and a
  compound identifier (``render_progress``) also whole;
  :func:`query_terms` are a query's distinct tokens without stopwords;
- :data:`STOPWORDS` are English function words; :data:`FILLER_WORDS` add what carries no content in
  a conversation turn; :data:`FIRST_PERSON` and :data:`FIRST_PERSON_SINGULAR` mark a speaker talking
  about themself;
- :data:`LONE_SURROGATE` finds a character that UTF-8 cannot encode.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from functools import lru_cache
from urllib.parse import unquote

import snowballstemmer

__all__ = [
    "FILLER_WORDS",
    "FIRST_PERSON",
    "FIRST_PERSON_SINGULAR",
    "LONE_SURROGATE",
    "MAX_QUERY_TERMS",
    "STOPWORDS",
    "WORD",
    "content_words",
    "index_terms",
    "name_words",
    "normalise",
    "query_terms",
    "text_hash",
    "tokens",
    "word_set",
]

WORD = re.compile(r"\w+", re.UNICODE)
"""A token: a maximal run of Unicode word characters."""

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point, which in a ``str`` is always a lone one (a ``str`` holds no pairs): text
that UTF-8 cannot encode, so it cannot be stored, hashed or tokenised as it is. The checks
(:mod:`titans_agent.validation`, :mod:`titans_agent.filters`) refuse it or replace it."""

# English function words: in an OR query each one matches nearly every record, and a rank fusion
# would then rank those records as lexical hits. (The list of Salton's SMART system, abridged.)
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me might more most must my myself no nor not now of off on once only or other our ours ourselves
    out over own same shall she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves""".split()
)

# Words that carry no content of their own in a conversation turn: function words and
# acknowledgements, greetings and interjections.
FILLER_WORDS = STOPWORDS | frozenset(
    """ok okay k kk yes yeah yep yup no nope sure right alright thanks thank thx ty please hi hello hey
    bye goodbye cool nice great good fine awesome wow oh ah uh um hmm haha hahaha lol lmao omg yay
    indeed exactly totally absolutely definitely really true agreed same too also well""".split()
)

FIRST_PERSON = frozenset({"i", "my", "me", "mine", "we", "our", "ours"})
"""The speaker's own words, plural included: a statement with one states the speaker's fact
(knowledge updates, :func:`titans_agent.updates.states_own_fact`)."""

FIRST_PERSON_SINGULAR = frozenset({"i", "my", "me", "mine", "myself"})
"""A question with one asks about the asker ("Who is my manager?"; recall's demotion of records
about other people)."""


def tokens(text: str) -> list[str]:
    """The lower-cased tokens of ``text`` in order (``\\w+`` runs; repeats kept). Text that is not
    ASCII is composed first (NFC), so a letter written with a combining accent ("re\\u0301sume\\u0301")
    stays one word, as its precomposed form does."""
    return WORD.findall(_composed(text).lower())


def _composed(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFC", text)


MAX_QUERY_TERMS = 512
"""A query keeps at most this many distinct words for the lexical signal: a long issue with its
traceback keeps its identifiers and file names (64 kept only the first ones; on SWE-bench Lite
file-level R@10 went from .775 to .875, benchmarks/code.py), a pasted book does not make a query
of every word of the language."""


def query_terms(query: str, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The query's distinct tokens (:func:`tokens`) in order, without stopwords (a query made only
    of stopwords keeps them all); at most ``max_terms``. Empty when the query has no word
    characters."""
    words = list(dict.fromkeys(tokens(query)))  # distinct, in order (linear: a pasted log has many)
    content = [w for w in words if w not in STOPWORDS]
    return (content or words)[:max_terms]


_TERM = re.compile(r"[^\W_]+", re.UNICODE)
_local = threading.local()  # a snowball stemmer keeps state between calls: one per thread


@lru_cache(maxsize=1 << 18)
def _stem(word: str) -> str:
    """The Porter stem of a lower-cased word of 3 to 64 characters, diacritics removed; shorter
    and longer words unchanged (as FTS5's porter tokenizer leaves them)."""
    if not word.isascii():
        word = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
    if len(word) < 3 or len(word) > 64:
        return word
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = snowballstemmer.stemmer("porter")
    return stemmer.stemWord(word)


def index_terms(text: str) -> list[str]:
    """The index terms of ``text`` in order, repeats kept (see the module docstring): what the
    lexical signal counts in a record and looks up for a query word. A compound identifier joined
    by underscores also stands whole after its parts, lower-cased, unstemmed, its underscores
    collapsed and trimmed (``_basic_auth_str`` -> ``basic``, ``auth``, ``str``,
    ``basic_auth_str``), so the identifier a query names outranks records that only share its
    parts. Pure; never raises."""
    out: list[str] = []
    for run in WORD.findall(_composed(text).lower()):
        if "_" not in run:
            out.append(_stem(run))
            continue
        parts = _TERM.findall(run)
        out.extend(_stem(w) for w in parts)
        if len(parts) > 1:
            out.append(_fold("_".join(parts)))
    return out


@lru_cache(maxsize=1 << 16)
def _fold(word: str) -> str:
    """``word`` without diacritics (as :func:`_stem` folds them), not stemmed."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def normalise(text: str) -> str:
    """The normal form: NFC, case-folded, white space collapsed to single spaces, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def text_hash(text: str) -> str:
    """sha256 (hex) of the normal form: equal for texts that differ only in case and spacing."""
    return hashlib.sha256(normalise(text).encode("utf-8", "surrogatepass")).hexdigest()


def word_set(text: str) -> frozenset[str]:
    """The distinct tokens of the normal form (words and numbers): two near-duplicate texts merge
    only when these are equal."""
    return frozenset(WORD.findall(normalise(text)))


def content_words(text: str) -> int:
    """How many tokens of ``text`` are not :data:`FILLER_WORDS`."""
    return sum(1 for w in tokens(text) if w not in FILLER_WORDS)


_SEPARATORS = re.compile(r"[\W_]+", re.UNICODE)
# a lower-to-upper or letter-digit step, or the last capital of an acronym before a capitalised
# word: "NonDisclosure" -> Non|Disclosure, "EFCAConfidentiality" -> EFCA|Confidentiality, "V1" -> V|1
_CASE_STEP = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")


def name_words(name: str) -> str:
    """The words of a file name or path, for full-text search: percent-escapes decoded
    ("DBT%20Mutual%20NDA.txt"), separators (``/ \\ . _ -`` and every other non-word character)
    made spaces, and each camel-case or letter-digit compound kept and also split into its parts
    ("EFCAConfidentialityAgreement" -> "EFCAConfidentialityAgreement EFCA Confidentiality
    Agreement"), so a query naming "EFCA" or "Confidentiality" finds the file. Case is kept (the
    full-text index folds it). Pure; never raises."""
    out: list[str] = []
    for part in _SEPARATORS.split(unquote(name, errors="replace")):
        if not part:
            continue
        out.append(part)
        pieces = [p for p in _CASE_STEP.split(part) if p]
        if len(pieces) > 1:
            out.extend(pieces)
    return " ".join(out)
