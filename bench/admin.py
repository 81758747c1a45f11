"""A plain ModelAdmin of the notes: Django's admin changelist as the notes page's peer
(`memory_bench_scale`, bench/peer_settings.py). Defaults throughout, but for the columns a
reviewer needs and 50 rows a page, as the notes page shows."""

from django.contrib import admin

from memory_portal.memory.models import Note


@admin.register(Note)
class PlainNoteAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "content", "trust", "status", "scope", "tags_text", "created_at")
    list_per_page = 50

    def lookup_allowed(self, lookup, value, request=None):
        # One project's notes, as the notes page shows them.
        return lookup == "project__id__exact" or super().lookup_allowed(lookup, value, request)
