"""The container's health: /readyz of the server in this container answers 200 (the database
answers, the process can serve). Sent to 127.0.0.1 with a host ALLOWED_HOSTS accepts."""

import os
import sys
import urllib.request

hosts = [h.strip().lstrip(".") for h in os.environ.get("ALLOWED_HOSTS", "").split(",")]
host = next((h for h in hosts if h and h != "*"), "localhost")
port = os.environ.get("MEMORY_PORTAL_BIND", "0.0.0.0:8000").rpartition(":")[2]
request = urllib.request.Request(f"http://127.0.0.1:{port}/readyz", headers={"Host": host})
try:
    with urllib.request.urlopen(request, timeout=4) as response:
        sys.exit(0 if response.status == 200 else 1)
except Exception as exc:  # any failure is "unhealthy", said on stderr
    print(f"readyz: {exc}", file=sys.stderr)
    sys.exit(1)
