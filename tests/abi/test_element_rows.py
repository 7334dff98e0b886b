"""The element-type rows of abi_v1.json agree with themselves and with what reads them."""
from __future__ import annotations

import numpy as np

from wagogpu.abi.table import TYPE_INFO, ElementType, NumberKind
from wagogpu.compiler.optable import OPCODES

MNEMONICS = {row.name for row in OPCODES.values()}


def test_every_row_is_consistent() -> None:
    assert set(TYPE_INFO) == set(ElementType)
    for t, info in TYPE_INFO.items():
        dtype = np.dtype(info.numpy)
        assert dtype.itemsize == info.stored_bytes, t
        assert dtype.kind == {NumberKind.INT: "i", NumberKind.UINT: "u", NumberKind.FLOAT: "f"}[info.kind], t
        assert info.gpu_words * 4 == max(4, info.stored_bytes), t
        assert info.wasm_load in MNEMONICS and info.wasm_store in MNEMONICS, t
        # the memory ops move exactly the stored bytes
        width = info.stored_bytes * 8
        assert info.wasm_store.endswith(f"store{width}") or info.wasm_store == f"{info.scalar}.store", t
        assert "{}" in info.wgsl_load and "{}" in info.wgsl_store, t


def test_signed_narrow_loads_sign_extend_and_unsigned_ones_do_not() -> None:
    for t, info in TYPE_INFO.items():
        if info.stored_bytes < 4 and not info.half:
            suffix = "_s" if info.kind is NumberKind.INT else "_u"
            assert info.wasm_load.endswith(suffix), t
            assert ("bitcast<i32>" in info.wgsl_load) == (info.kind is NumberKind.INT), t
