from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory_portal.memory"
    label = "memory"
    verbose_name = "Memory"
