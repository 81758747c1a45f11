"""`manage.py memory_create_database`: create the PostgreSQL database DATABASE_URL names when it
does not exist yet, so a benchmark's database of its own (`make bench-scale`) needs no
`createdb` first. Connects to the server's `postgres` maintenance database with the same host,
port, user and password; does nothing when the database is there (or on SQLite)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from psycopg import errors, sql


class Command(BaseCommand):
    help = "Create the PostgreSQL database DATABASE_URL names, if it does not exist yet."

    def handle(self, *args, **options) -> None:
        if connection.vendor != "postgresql":
            self.stdout.write("SQLite: the database file is created on first use.")
            return
        params = connection.get_connection_params()
        name = connection.settings_dict["NAME"]
        maintenance = {**params, "dbname": "postgres", "autocommit": True}
        try:
            with connection.Database.connect(**maintenance) as admin:
                exists = admin.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [name]
                ).fetchone()
                if exists:
                    self.stdout.write(f"database {name} exists")
                    return
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except errors.DuplicateDatabase:  # created by someone else in between: there now
            self.stdout.write(f"database {name} exists")
            return
        except connection.Database.Error as exc:
            raise CommandError(f"cannot create database {name}: {exc}") from exc
        self.stdout.write(f"database {name} created")
