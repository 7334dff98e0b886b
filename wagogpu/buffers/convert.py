"""Between a buffer's stored bytes and the device's words (DESIGN decision 5: every element type
the GPU takes is one 32-bit word there; narrow types keep their low 8 or 16 bits)."""
from __future__ import annotations

import numpy as np

# Stored-format dtype per stored width.
_NARROW = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def words_to_stored(words: np.ndarray, stored_bytes: int) -> np.ndarray:
    """Device words -> stored bytes: narrow types keep the low 8/16 bits (abi.md §4.4 step 5)."""
    return words.astype(_NARROW[stored_bytes], copy=False).view(np.uint8)


def stored_to_words(raw: np.ndarray, stored_bytes: int) -> np.ndarray:
    """Stored bytes -> device words, narrow values zero-extended into the low bits (§4.5)."""
    return raw.view(_NARROW[stored_bytes]).astype(np.uint32, copy=False)
