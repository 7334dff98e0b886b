"""Bounded binary reader shared by both compilers (docs/design/compiler.md §1.1).

Every read checks the remaining bytes first, and every vector count is checked against a named
limit before anything is allocated for it, so no input can make the compiler use unbounded time
or memory. A malformed encoding raises ReaderError (a plain message the caller wraps into the
right CompileError kind); a count over its limit raises CompileError(LIMIT) directly.
"""
from __future__ import annotations

from .contract import CompileError, CompileErrorKind

# ---- Named limits (docs/design/compiler.md §3). Read at call time so tests can lower them. ----
MAX_MODULE_BYTES = 4 * 1024 * 1024  # whole module
MAX_ENTRIES = 16384  # entries of any decoded vector (count())
MAX_TYPES = 16384  # expanded types, rec-group members included
MAX_BODY_BYTES = 16384  # the selected kernel body
MAX_INSTRUCTIONS = 4096  # instructions of a kernel body, final end included
MAX_LOCALS = 4096  # locals of a kernel, param 0 included
MAX_STACK = 4096  # operand stack entries
MAX_NODES = 8192  # value nodes (loads + arithmetic)
MAX_BODY_CODE = 1024 * 1024  # generated statement text of one kernel
MAX_WGSL_BYTES = 512 * 1024  # one kernel's WGSL
MAX_COMPILATION_WGSL = 8 * 1024 * 1024  # all kernels of one inspect_module call
MAX_DEPTH = 6  # deferred arithmetic chain depth (bounds recursion)
MAX_BLOCK_DEPTH = 48  # open block/loop/if frames (each adds at most two WGSL brace levels; WGSL allows 127)
MAX_BR_TABLE_CASES = 1000  # br_table entries other than the default's target (WGSL: 1023 case selectors)
# Loop iterations one invocation may run, counted over all its loops together: every pass through
# the head of a loop that a branch can re-enter uses one. The shader that runs out sets the error
# word (KernelError.LOOP_BUDGET), so the dispatch commits nothing and falls back to the CPU runner.
LOOP_BUDGET = 1 << 20
# Calls to defined functions are inlined (inline.py). Every call site inlines its callee anew, so
# these bound what one kernel may expand to: call nesting, callee body bytes and instructions
# lowered over all inlined calls together.
MAX_INLINE_DEPTH = 16
MAX_INLINE_BYTES = 256 * 1024
MAX_INLINE_INSTRUCTIONS = 65536
# The shadow stack (shadow.py): how far below its entry value a kernel may move the stack pointer,
# how many distinct frame offsets it may store to, and how many lowering passes may refine which
# of them live in WGSL vars.
MAX_FRAME_BYTES = 64 * 1024
MAX_FRAME_SLOTS = 1024
MAX_FRAME_PASSES = 4
# Guest-memory loads (memload.py) read a snapshot of at most this many bytes, from the lowest
# address the module's data segments or the kernel's constant addresses name.
MAX_SNAPSHOT_BYTES = 1024 * 1024

WASM_HEADER = b"\x00asm\x01\x00\x00\x00"
MEMORY_INDEX_FLAG = 0x40  # a memarg's alignment bit 6: a memory index follows (multi-memory)

# ---- Reader messages (quoted exactly by the spec). ----
TRUNCATED = "truncated Wasm"
BAD_U32 = "invalid u32 LEB128"
LEB_OVERFLOW = "LEB128 overflow"
SIGNED_LEB_OVERFLOW = "signed LEB128 overflow"
LEB_UNTERMINATED = "unterminated LEB128"
ENTRY_LIMIT = "section entry limit exceeded"


class ReaderError(Exception):
    """A malformed or truncated encoding; .message is the spec's reader text."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def entry_limit_error() -> CompileError:
    return CompileError(CompileErrorKind.LIMIT, ENTRY_LIMIT)


class Reader:
    """A cursor over data[pos:end]; reads never look past end."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def byte(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise ReaderError(TRUNCATED)
        self.pos = pos + 1
        return self.data[pos]

    def skip(self, n: int) -> int:
        """Advance over n bytes and return where they start."""
        pos = self.pos
        if n > self.end - pos:
            raise ReaderError(TRUNCATED)
        self.pos = pos + n
        return pos

    def take(self, n: int) -> bytes:
        start = self.skip(n)
        return self.data[start:start + n]

    def memarg(self) -> tuple[int, int, int]:
        """A load's or store's memarg: (memory index, alignment log2, offset); the one reading of
        it for the lowering, the pre-scan, the instruction walk and the CPU rewrite."""
        flags = self.u32()
        if flags & MEMORY_INDEX_FLAG:
            return self.u32(), flags & ~MEMORY_INDEX_FLAG, self.leb(64, False)
        return 0, flags, self.leb(64, False)

    def u32(self) -> int:
        """Unsigned LEB128 of at most 5 bytes whose 5th byte is at most 0x0F (non-minimal allowed)."""
        data, pos, end = self.data, self.pos, self.end
        if pos < end:
            b = data[pos]
            if b < 0x80:  # the common one-byte case
                self.pos = pos + 1
                return b
        result = 0
        shift = 0
        while True:
            if pos >= end:
                raise ReaderError(TRUNCATED)
            b = data[pos]
            pos += 1
            if shift == 28:
                if b > 0x0F:
                    raise ReaderError(BAD_U32)
                self.pos = pos
                return result | (b << 28)
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7

    def count(self) -> int:
        """A u32 vector count, at most MAX_ENTRIES; checked before the caller allocates anything."""
        n = self.u32()
        if n > MAX_ENTRIES:
            raise entry_limit_error()
        return n

    def leb(self, bits: int, signed: bool) -> int:
        """Generic LEB128 of at most ceil(bits/7) bytes, no payload bits beyond `bits`.

        Signed results are sign-extended to a Python int; the caller masks if it wants a pattern.
        """
        data, pos, end = self.data, self.pos, self.end
        max_bytes = (bits + 6) // 7
        result = 0
        shift = 0
        for i in range(max_bytes):
            if pos >= end:
                raise ReaderError(TRUNCATED)
            b = data[pos]
            pos += 1
            payload = b & 0x7F
            if i == max_bytes - 1:
                if b & 0x80:
                    raise ReaderError(LEB_UNTERMINATED)
                width = bits - shift  # payload bits still inside the value
                if width < 7:
                    high = payload >> width
                    if signed:
                        sign = (payload >> (width - 1)) & 1
                        if high != (((1 << (7 - width)) - 1) if sign else 0):
                            raise ReaderError(SIGNED_LEB_OVERFLOW)
                    elif high:
                        raise ReaderError(LEB_OVERFLOW)
            result |= payload << shift
            shift += 7
            if not b & 0x80:
                self.pos = pos
                if signed and payload & 0x40:  # sign-extend from the last payload bit
                    result -= 1 << shift
                return result
        raise ReaderError(LEB_UNTERMINATED)  # unreachable: the last byte either ends or raises

    def i32(self) -> int:
        """A signed LEB128 i32 immediate as its 32-bit pattern (the one-byte case read inline)."""
        pos = self.pos
        if pos < self.end:
            b = self.data[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b if b < 0x40 else b + 0xFFFFFF80  # sign-extended from bit 6
        return self.leb(32, True) & 0xFFFFFFFF

    def u32_le(self) -> int:
        """Four little-endian bytes (an f32.const pattern)."""
        pos = self.pos
        if self.end - pos < 4:
            raise ReaderError(TRUNCATED)
        self.pos = pos + 4
        return int.from_bytes(self.data[pos:pos + 4], "little")
