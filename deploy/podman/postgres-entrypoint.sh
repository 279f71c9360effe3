#!/bin/bash
# The offline PostgreSQL image's entrypoint (postgres.Containerfile): what docker-compose.yml
# uses of the official postgres image's. The first start, on an empty data directory, makes the
# cluster with POSTGRES_USER (default postgres) and POSTGRES_PASSWORD as its superuser and
# POSTGRES_DB as its database, then runs /docker-entrypoint-initdb.d/*.sql in order, with
# ON_ERROR_STOP, on a server that listens on its socket only; a failure leaves no half-made
# cluster behind. Later starts find the cluster and start it.
set -euo pipefail

if [ "${1:-}" != postgres ]; then
  exec "$@"
fi
shift

# PGDATA is a folder inside the volume (/var/lib/postgresql): made on a volume made elsewhere.
mkdir -p "$PGDATA"
chmod 0700 "$PGDATA"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set}"
  user="${POSTGRES_USER:-postgres}"
  database="${POSTGRES_DB:-$user}"
  pwfile="$(mktemp)"
  # The server of the init listens on a socket of its own, so that no healthcheck (pg_isready on
  # the usual socket) calls the database ready before its scripts ran.
  socket="$(mktemp -d)"
  trap 'rm -rf "$pwfile" "$socket"' EXIT
  printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
  # Made aside and moved in once complete, so that an init that fails is started afresh.
  staging="$PGDATA/.init"
  rm -rf "$staging"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 -D "$staging" >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$staging/pg_hba.conf"
  pg_ctl -D "$staging" -w -o "-c listen_addresses='' -c unix_socket_directories=$socket" \
    start >/dev/null
  export PGHOST="$socket"
  if [ "$database" != postgres ]; then
    createdb --username="$user" "$database"
  fi
  for script in /docker-entrypoint-initdb.d/*.sql; do
    [ -e "$script" ] || continue
    echo "[postgres] running $script"
    psql -v ON_ERROR_STOP=1 --no-psqlrc --username="$user" --dbname="$database" -f "$script"
  done
  pg_ctl -D "$staging" -m fast -w stop >/dev/null
  unset PGHOST
  # The data directory stays (it can be a mount point): its contents move. What
  # a move cut short left is replaced, and PG_VERSION, which says the cluster is there, last.
  find "$staging" -mindepth 1 -maxdepth 1 ! -name PG_VERSION -exec sh -c \
    'for entry; do rm -rf "$0/${entry##*/}"; mv "$entry" "$0/"; done' "$PGDATA" {} +
  mv "$staging/PG_VERSION" "$PGDATA/PG_VERSION"
  rmdir "$staging"
  echo "[postgres] cluster made"
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
