"""The benchmarks' settings plus Django's admin, the peer the notes page is measured against
(`memory_bench_scale`): the admin at /django-admin/ with a plain ModelAdmin of the notes
(bench/admin.py). Never the product's: the product ships no Django admin."""

from bench.settings import *  # noqa: F403
from bench.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django.contrib.admin"]
ROOT_URLCONF = "bench.peer_urls"
