from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "memory_portal.api"
    label = "api"
