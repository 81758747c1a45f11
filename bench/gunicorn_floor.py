"""The production server's configuration (gunicorn.conf.py) for the framework's floor
(bench/floor.py, `memory_bench_floor`): the same workers, threads, keep-alive and timeouts,
without the product's worker start-up (its secret rules and sentence model), which the
hello-world has no use for."""

from pathlib import Path

_conf = {}
exec(  # noqa: S102 - the product's own configuration file
    compile(
        (Path(__file__).resolve().parents[1] / "gunicorn.conf.py").read_text(),
        "gunicorn.conf.py",
        "exec",
    ),
    _conf,
)
globals().update(
    {k: v for k, v in _conf.items() if not k.startswith("__") and k != "post_worker_init"}
)
