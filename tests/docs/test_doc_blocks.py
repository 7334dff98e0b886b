"""Every ```python block of README.md and docs/ runs as written (the convention: doc_blocks.py).

The blocks of one file share a namespace and run in order; a test that runs out of order first runs
the blocks before it. A skipped block is reported as a skip with its stated reason, never a pass."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .doc_blocks import ROOT, Block, Mark, all_blocks, blocks_of

BLOCKS = all_blocks()
_NAMESPACES: dict[Path, tuple[dict, int]] = {}   # file -> (namespace, blocks of it already run)


def _run(block: Block) -> None:
    exec(compile(block.source, block.name, "exec"), _NAMESPACES[block.path][0])  # noqa: S102


def _run_in_order(block: Block) -> None:
    siblings = [b for b in BLOCKS if b.path == block.path]
    namespace, done = _NAMESPACES.setdefault(block.path, ({"__name__": "__docs__"}, 0))
    position = siblings.index(block)
    for earlier in siblings[done:position]:
        if earlier.mark is Mark.RUN:
            _run(earlier)
    _NAMESPACES[block.path] = (namespace, position + 1)
    _run(block)


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_doc_block_runs(block: Block, monkeypatch) -> None:
    if block.mark is Mark.SKIP:
        pytest.skip(f"{block.name}: {block.argument}")
    if block.mark is Mark.NEEDS:
        pytest.importorskip(block.argument, exc_type=ImportError)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    _run_in_order(block)


def test_the_docs_have_blocks_to_run() -> None:
    """The collector finds the README's example; an empty list would make the test above vacuous."""
    assert any(block.path == Path("README.md") and block.mark is Mark.RUN for block in BLOCKS)


def test_markers_and_fences_are_read() -> None:
    text = ("intro\n```python\nx = 1\n```\n<!-- docs-test: skip needs an NVIDIA adapter -->\n\n"
            "```python\ny = 2\n```\n<!-- docs-test: needs ray -->\n```python\nimport ray\n```\n"
            "```text\nnot python\n```\n")
    found = blocks_of(Path("x.md"), text)
    assert [(b.line, b.mark, b.argument, b.source) for b in found] == [
        (2, Mark.RUN, "", "x = 1\n"),
        (7, Mark.SKIP, "needs an NVIDIA adapter", "y = 2\n"),
        (11, Mark.NEEDS, "ray", "import ray\n"),
    ]
    with pytest.raises(ValueError, match="never closed"):
        blocks_of(Path("x.md"), "```python\nx = 1\n")
