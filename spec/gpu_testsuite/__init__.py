"""The official WebAssembly spec testsuite against wagogpu's GPU path (see __main__ for the command).

wast.py reads the scripts, literals.py their constants; binary.py, splice.py and guest.py turn each
pure i32/f32 function into a buffer kernel with a CPU runner; plan.py groups the cases;
runner.py drives one wagogpu.Host; check.py and floats.py judge and classify; report.py writes the
JSONL records and the Markdown table.
"""
