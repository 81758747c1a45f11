"""Benchmarks and quality evaluations of Memory Portal, beside the product (like `faults/` and
`fuzz/`): the scale loader, the benchmark server, the raw-SQL floors, the `memory_bench_*`
commands and the recall and secret-scanner evaluations. Run through `python -m bench`; the
product package never imports it and the wheel does not ship it."""
