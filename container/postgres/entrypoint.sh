#!/bin/sh
# First start on an empty volume: a cluster with the user, password and database the
# environment names (password auth over the network). Then PostgreSQL in the foreground.
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$db" != "postgres" ]; then
    pg_ctl -w -o "-c listen_addresses=''" start >/dev/null
    createdb --username="$user" "$db"
    pg_ctl -w stop >/dev/null
  fi
fi
exec postgres -c listen_addresses='*'
