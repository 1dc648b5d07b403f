"""Identifiers agents send (external ids): one spelling each, and look-alikes made visible.

NFKC folds compatibility forms (full-width digits, ligatures, superscripts) into one
spelling, so "T‐１０４２" and "T-1042"-style variants that differ only in form are one
workflow. A Cyrillic "о" in a Latin id is a different letter, not a different form: NFKC
keeps it, and the console marks such mixed-script ids where they are shown.
"""

from __future__ import annotations

import unicodedata


def normalized(identifier: str) -> str:
    return unicodedata.normalize("NFKC", identifier)


def scripts(identifier: str) -> set[str]:
    """The scripts of the letters in ``identifier`` (LATIN, CYRILLIC, GREEK, …); digits and marks have none."""
    found = set()
    for ch in identifier:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            found.add(name.split(" ")[0] if name else "UNKNOWN")
    return found


def is_mixed_script(identifier: str) -> bool:
    return len(scripts(identifier)) > 1
