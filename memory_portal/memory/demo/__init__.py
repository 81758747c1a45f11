"""The demo world of `manage.py memory_demo`: its scenarios (data) and the loader that plays them
through the services."""
