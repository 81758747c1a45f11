"""`python -m bench COMMAND [ARGS…]`: `manage.py` with the benchmarks' commands installed
(`memory_bench_*`, `memory_load_scale`, `memory_create_database`, `memory_recall_eval`,
`memory_secrets_eval`). See docs/PERFORMANCE.md."""

import os
import sys

from django.core.management import execute_from_command_line

if __name__ == "__main__":
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    execute_from_command_line([f"{sys.executable} -m bench", *sys.argv[1:]])
