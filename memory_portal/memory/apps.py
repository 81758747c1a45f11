from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory_portal.memory"
    label = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from memory_portal.database import start_session

        connection_created.connect(start_session, dispatch_uid="memory_portal.database")
