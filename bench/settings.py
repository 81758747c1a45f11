"""The product's settings with the benchmarks' commands installed (`python -m bench`)."""

from memory_portal.settings import *  # noqa: F403
from memory_portal.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench"]
