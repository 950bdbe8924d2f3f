"""Look-alike letters from other scripts, normalised to the Latin letters they imitate.

Models (and copy-pasted prompts) sometimes put a Cyrillic "с" or a Greek "ο" inside a Latin
word: ``Аlex is a bеmpus`` reads as ``Alex is a bempus`` to a person and to nothing else. Each
non-ASCII letter is looked up once in Unicode's confusables data through the maintained
``confusable-homoglyphs`` package (``confusables.is_confusable`` with the Latin script
preferred); a letter with a Latin ASCII homoglyph is replaced by it, anything else (accents,
typographic quotes, other scripts' letters with no Latin twin) is left as it is.
"""

from __future__ import annotations

from functools import lru_cache

from confusable_homoglyphs import confusables


@lru_cache(maxsize=4096)
def latin_twin(char: str) -> str | None:
    """The ASCII Latin letter ``char`` imitates (Cyrillic ``с`` -> ``c``), or None."""
    found = confusables.is_confusable(char, preferred_aliases=["latin"])
    if not found:
        return None
    for entry in found:
        for glyph in entry.get("homoglyphs", ()):
            c = glyph.get("c", "")
            if len(c) == 1 and c.isascii() and c.isalpha():
                return str(c)
    return None


def normalise_letters(text: str) -> str:
    """``text`` with every look-alike letter from another script replaced by its Latin twin."""
    if text.isascii():
        return text
    out = []
    for char in text:
        twin = latin_twin(char) if not char.isascii() and char.isalpha() else None
        out.append(twin if twin is not None else char)
    return "".join(out)
