"""The corpus's source languages (a leaf: build.py imports it without numpy or wagogpu)."""
from __future__ import annotations

from enum import Enum


class Language(Enum):
    """The source languages of the corpus."""

    C = "c"
    ZIG = "zig"
    AS = "as"
    GO = "go"


ALL = frozenset(Language)
NOT_GO = frozenset({Language.C, Language.ZIG, Language.AS})
