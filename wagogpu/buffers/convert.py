"""Between a buffer's stored bytes and the device's words (DESIGN decision 5: every element type up
to 32 bits is one 32-bit word there, narrow types keeping their low 8 or 16 bits; a 64-bit element
is two words, its stored bytes as they are)."""
from __future__ import annotations

import numpy as np

# Stored-format dtype per stored width of a narrow type.
_NARROW = {1: np.uint8, 2: np.uint16}


def words_to_stored(words: np.ndarray, stored_bytes: int) -> np.ndarray:
    """Device words -> stored bytes: narrow types keep the low 8/16 bits (docs/design/abi.md §4.4 step 5)."""
    if stored_bytes >= 4:
        return words.view(np.uint8)
    return words.astype(_NARROW[stored_bytes]).view(np.uint8)


def stored_to_words(raw: np.ndarray, stored_bytes: int) -> np.ndarray:
    """Stored bytes -> device words, narrow values zero-extended into the low bits (docs/design/abi.md §4.5)."""
    if stored_bytes >= 4:
        return raw.view(np.uint32)
    return raw.view(_NARROW[stored_bytes]).astype(np.uint32)
