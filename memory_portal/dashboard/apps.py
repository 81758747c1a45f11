from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "memory_portal.dashboard"
    label = "dashboard"
