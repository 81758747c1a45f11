"""`manage.py create_api_token USERNAME [--scope read|write]`: mint a person's API token and
print it on one line, nothing else (scripts capture it)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memory_portal.memory import services


class Command(BaseCommand):
    help = "Create an API token for a user and print it once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--scope", choices=["read", "write"], default="write")

    def handle(self, *args, username: str, scope: str, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
        _, plaintext = services.token_create(actor=None, user=user, can_write=scope == "write")
        self.stdout.write(plaintext)
