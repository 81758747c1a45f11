"""The product's URLs and Django's admin at /django-admin/ (bench/peer_settings.py)."""

from django.contrib import admin
from django.urls import path

from memory_portal.urls import handler400, handler403, handler404, handler500  # noqa: F401
from memory_portal.urls import urlpatterns as product

urlpatterns = [path("django-admin/", admin.site.urls), *product]
