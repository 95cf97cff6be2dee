"""Deterministic keyword extraction: the offline "AveFact" key (Mem^p) and note keywords.

Content words are ranked by frequency, then by how early they first appear; ties keep text order,
so the same text always yields the same keywords.

>>> extract_keywords("Put a clean apple in the fridge, then close the fridge.")
['fridge', 'put', 'clean', 'apple', 'close']
>>> keyword_key(["fridge", "apple"])
'fridge, apple'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_STOP_TEXT = """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each either else even ever every few for from further get gets
    got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
    him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's its itself
    just let's like may me might more most must mustn't my myself need no nor not now of off on
    once one only or other ought our ours ourselves out over own please same shall shan't she
    she'd she'll she's should shouldn't so some such than that that's the their theirs them
    themselves then there there's these they they'd they'll they're they've this those though
    through to too under until up upon us use used using very via was wasn't we we'd we'll we're
    we've were weren't what what's when when's where where's whether which while who who's whom
    why why's will with within without won't would wouldn't yes yet you you'd you'll you're
    you've your yours yourself yourselves etc e.g i.e thing things something anything way ok okay
    """
STOP_WORDS = frozenset(_STOP_TEXT.split())
"""English function words (and a few fillers) that never make a keyword."""

_WORD = re.compile(r"[a-z][a-z0-9]*(?:['-][a-z0-9]+)*")

DEFAULT_MAX_KEYWORDS = 8

MAX_KEYWORD_CHARS = 64
"""A longer token (a pasted hash, a megabyte without spaces) is no keyword, tag or key word."""


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stop words or one-letter tokens, in text order."""
    words = _WORD.findall(text.lower())
    return [w for w in words if 1 < len(w) <= MAX_KEYWORD_CHARS and w not in STOP_WORDS]


def extract_keywords(text: str, max_keywords: int = DEFAULT_MAX_KEYWORDS) -> list[str]:
    """The ``max_keywords`` most salient content words of ``text`` (stable, deterministic).

    Score = occurrences + a small bonus for appearing early (task statements lead with what
    matters); ties fall back to first position.
    """
    words = content_words(text)
    if not words or max_keywords <= 0:
        return []
    first: dict[str, int] = {}
    count: dict[str, int] = {}
    for pos, word in enumerate(words):
        first.setdefault(word, pos)
        count[word] = count.get(word, 0) + 1
    n = len(words)

    def score(word: str) -> tuple[float, int]:
        early = 1.0 - first[word] / n  # in (0, 1]: worth less than one extra occurrence
        return (count[word] + 0.5 * early, -first[word])

    ranked = sorted(first, key=score, reverse=True)
    return ranked[:max_keywords]


def clean_keywords(keywords: Iterable[str], max_keywords: int = 10) -> list[str]:
    """Normalise keywords from any source: trimmed, lower-cased, de-duplicated, non-empty, at
    most :data:`MAX_KEYWORD_CHARS` long (a longer one is dropped)."""
    out: list[str] = []
    seen: set[str] = set()
    for raw in keywords:
        word = " ".join(str(raw).split()).strip(" .,;:'\"#").lower()
        if word and len(word) <= MAX_KEYWORD_CHARS and word not in seen:
            seen.add(word)
            out.append(word)
        if len(out) >= max_keywords:
            break
    return out


def keyword_key(keywords: Iterable[str]) -> str:
    """The retrieval-key text made of keywords (KeyMode.KEYWORDS); retrieval uses the same form."""
    return ", ".join(clean_keywords(keywords, max_keywords=64))


def keywords_key_for(text: str, max_keywords: int = DEFAULT_MAX_KEYWORDS) -> str:
    """Deterministic keyword key of a text, falling back to the text itself if it has none."""
    key = keyword_key(extract_keywords(text, max_keywords))
    return key or " ".join(text.split())
