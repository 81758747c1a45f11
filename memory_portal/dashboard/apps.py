from django.apps import AppConfig
from django.core import checks


class DashboardConfig(AppConfig):
    name = "memory_portal.dashboard"
    label = "dashboard"

    def ready(self) -> None:
        from memory_portal.checks import (
            email_configured,
            one_process_on_sqlite,
            sign_on_over_https,
            static_files_collected,
        )

        # Deployment checks: development (DEBUG) serves plain names and never needs it.
        checks.register(static_files_collected, checks.Tags.staticfiles, deploy=True)
        checks.register(one_process_on_sqlite, checks.Tags.database, deploy=True)
        checks.register(email_configured, checks.Tags.mail, deploy=True)
        checks.register(sign_on_over_https, checks.Tags.security, deploy=True)
