"""The fault suite: the production server on a PostgreSQL cluster of its own, under injected
failures (`make faults`; `python -m faults.run`)."""
