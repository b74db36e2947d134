"""Glob and .gitignore matching without exponential backtracking: the same matches, fast."""

from __future__ import annotations

import random
import re
import time

import pathspec

from titans_agent.ingest.patterns import _glob_regex, atomic_stars, matches_glob


def _random_pattern(rng: random.Random) -> str:
    tokens = ["a", "b", "ab", "*", "*", "?", "[ab]", "[!a]", "/", "**/", "\\*"]
    return "".join(rng.choice(tokens) for _ in range(rng.randint(1, 7))).lstrip("/") or "a"


def _random_path(rng: random.Random) -> str:
    return "/".join("".join(rng.choice("ab*") for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 3)))


def test_atomic_stars_match_what_the_backtracking_expressions_match():
    rng = random.Random(7)
    checked = 0
    for _ in range(3000):
        pattern, path = _random_pattern(rng), _random_path(rng)
        for regex in [p.regex.pattern for p in pathspec.GitIgnoreSpec.from_lines([pattern]).patterns if p.regex]:
            plain, atomic = re.compile(regex), re.compile(atomic_stars(regex))
            for candidate in (path, path + "/"):
                assert bool(plain.match(candidate)) == bool(atomic.match(candidate)), (pattern, candidate, regex)
                checked += 1
    assert checked > 3000
    # our own globs: the same against the expression before the rewrite
    for _ in range(2000):
        pattern, path = _random_pattern(rng), _random_path(rng)
        fast = _glob_regex(pattern)
        slow = re.compile(fast.pattern.replace("(?>[^/]*?", "(?:[^/]*"), re.DOTALL)  # undo the atomic groups
        assert bool(fast.match(path)) == bool(slow.match(path)), (pattern, path)


def test_a_crafted_pattern_matches_in_linear_time():
    crafted = "*a*a*a*a*a*a*a*a*a*a*a*a*b"  # exponential for a backtracking matcher on a run of 'a'
    spec = pathspec.GitIgnoreSpec.from_lines([crafted])
    for p in spec.patterns:
        p.regex = re.compile(atomic_stars(p.regex.pattern))
    t0 = time.perf_counter()
    assert not spec.match_file("a" * 250)
    assert not matches_glob("a" * 250, [crafted])
    assert spec.match_file("a" * 250 + "b") and matches_glob("a" * 250 + "b", [crafted])
    assert time.perf_counter() - t0 < 5  # a regression takes hours, not seconds


def test_a_run_of_stars_is_one_globstar_however_long():
    import time

    from titans_agent.ingest.patterns import check_globs, matches_glob

    pattern = "*" * 24 + "b"
    assert check_globs([pattern], "include") == [pattern]  # one run of '**'
    started = time.perf_counter()
    assert not matches_glob("a" * 200 + "/" + "c" * 200, [pattern])
    assert time.perf_counter() - started < 1.0  # 12 adjacent '.*' took minutes
    assert matches_glob("src/x/a.py", ["***/x/****.py"]) and matches_glob("x/a.py", ["***/x/*.py"])
