"""`make fuzz`: the long fuzz run (fuzz/run.py)."""
