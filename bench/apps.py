from django.apps import AppConfig


class BenchConfig(AppConfig):
    """The benchmarks' and quality evaluations' commands (`python -m bench COMMAND`). Installed
    only by `bench.settings`; the product never imports this package."""

    name = "bench"
    label = "bench"
