"""The production server's configuration (gunicorn.conf.py) with one change, for
`memory_bench_reads`'s "unrecorded" side only: each worker's `services.reads_record` is
replaced by a no-op, so the same calls run without their read records' INSERT. The product
has no such switch (no record, no answer); only this benchmark's server leaves it out."""

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
globals().update({k: v for k, v in _conf.items() if not k.startswith("__")})
_product_post_worker_init = _conf["post_worker_init"]


def post_worker_init(worker):  # noqa: F811 - the product's, plus the one change
    _product_post_worker_init(worker)
    from memory_portal.memory import services

    services.reads_record = lambda **kwargs: 0
