#!/usr/bin/env bash
# A PostgreSQL streaming replica of this machine's Debian cluster, for the read-replica tests
# (test/api/read-replicas.test.ts) and bench/replicas.ts. Idempotent: a replica already streaming is left alone, a
# stopped one is started, a broken one (not a standby, or not receiving WAL) is made again with pg_basebackup.
#
#   scripts/test-replica.sh            # prints the replica's URL (for TEST_REPLICA_URL) as its last line
#
# Environment: PG_VERSION (default: the only version under /etc/postgresql), PRIMARY_PORT (5432), REPLICA_PORT
# (5433), REPLICA_CLUSTER (replica), DATABASE (test: the database in the printed URL). Needs root (or the postgres
# user) and Debian's postgresql-common tools; exits 1 saying why when it cannot make the replica.
set -euo pipefail

PRIMARY_PORT="${PRIMARY_PORT:-5432}"
REPLICA_PORT="${REPLICA_PORT:-5433}"
CLUSTER="${REPLICA_CLUSTER:-replica}"
DATABASE="${DATABASE:-test}"
say() { echo "test-replica: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

command -v pg_lsclusters >/dev/null 2>&1 || fail "Debian's postgresql-common tools are not installed"
VERSION="${PG_VERSION:-$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)}"
[ -n "$VERSION" ] || fail "no PostgreSQL cluster under /etc/postgresql"
BIN="/usr/lib/postgresql/$VERSION/bin"
[ -x "$BIN/pg_basebackup" ] || fail "$BIN/pg_basebackup is missing"
pg_isready -h 127.0.0.1 -p "$PRIMARY_PORT" -q || fail "the primary at 127.0.0.1:$PRIMARY_PORT is not answering"

as_postgres() {
  if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}
psql_at() { psql -h 127.0.0.1 -p "$1" -U postgres -d postgres -XAtqc "$2"; }

# The primary must accept replication connections from 127.0.0.1 (`host all` does not cover them).
primary_hba="$(psql_at "$PRIMARY_PORT" 'SHOW hba_file')"
if ! psql_at "$PRIMARY_PORT" "SELECT 1 FROM pg_hba_file_rules WHERE 'replication' = ANY(database) AND address = '127.0.0.1' AND auth_method = 'trust'" | grep -q 1; then
  say "allowing replication from 127.0.0.1 in $primary_hba"
  printf '\n# Read-replica tests (scripts/test-replica.sh)\nhost replication all 127.0.0.1/32 trust\n' >>"$primary_hba"
  psql_at "$PRIMARY_PORT" 'SELECT pg_reload_conf()' >/dev/null
fi
[ "$(psql_at "$PRIMARY_PORT" 'SHOW wal_level')" != minimal ] || fail "the primary's wal_level is minimal"

SLOT="cinder_${CLUSTER//[^a-z0-9_]/_}"
drop_slot() {
  psql_at "$PRIMARY_PORT" "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND NOT active" >/dev/null
}
# A slot holds WAL while its replica is down: bound it, so that a replica left stopped cannot fill the primary's
# disk (its slot is then invalidated and this script makes the replica again).
if [ "$(psql_at "$PRIMARY_PORT" 'SHOW max_slot_wal_keep_size')" = -1 ]; then
  say "bounding the WAL kept for replication slots: max_slot_wal_keep_size = 4GB"
  psql_at "$PRIMARY_PORT" "ALTER SYSTEM SET max_slot_wal_keep_size = '4GB'" >/dev/null
  psql_at "$PRIMARY_PORT" 'SELECT pg_reload_conf()' >/dev/null
fi

replica_ok() {
  [ "$(psql_at "$REPLICA_PORT" 'SELECT pg_is_in_recovery()' 2>/dev/null)" = t ] || return 1
  # Streaming from the primary (a replica cut off from it would never catch up).
  for _ in $(seq 1 20); do
    [ "$(psql_at "$REPLICA_PORT" "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'" 2>/dev/null)" = 1 ] && return 0
    sleep 0.5
  done
  return 1
}

status="$(pg_lsclusters -h 2>/dev/null | awk -v v="$VERSION" -v c="$CLUSTER" '$1 == v && $2 == c { print $4 }')"
if [ -n "$status" ]; then
  if [ "${status%%,*}" != online ]; then
    say "starting cluster $VERSION/$CLUSTER"
    pg_ctlcluster "$VERSION" "$CLUSTER" start || true
  fi
  if replica_ok; then
    # A test that paused replay (pg_wal_replay_pause) and was killed before resuming it.
    psql_at "$REPLICA_PORT" 'SELECT pg_wal_replay_resume() WHERE pg_is_wal_replay_paused()' >/dev/null
    echo "postgres://postgres@127.0.0.1:$REPLICA_PORT/$DATABASE"
    exit 0
  fi
  say "cluster $VERSION/$CLUSTER is not a streaming standby: making it again"
  pg_dropcluster --stop "$VERSION" "$CLUSTER"
fi
drop_slot

# A fresh cluster (for its configuration files under /etc/postgresql), whose data directory is then replaced by a
# base backup of the primary; -R writes primary_conninfo and standby.signal.
say "creating cluster $VERSION/$CLUSTER on port $REPLICA_PORT"
pg_createcluster "$VERSION" "$CLUSTER" -p "$REPLICA_PORT" >/dev/null
conf="/etc/postgresql/$VERSION/$CLUSTER"
data="$(awk -F"'" '/^data_directory/ { print $2 }' "$conf/postgresql.conf")"
[ -n "$data" ] || fail "no data_directory in $conf/postgresql.conf"
rm -rf "$data"
install -d -m 700 -o postgres -g postgres "$data"
say "pg_basebackup of 127.0.0.1:$PRIMARY_PORT into $data"
# Through a replication slot: the primary keeps the WAL the replica has not received yet (on a busy machine the
# segments after the backup are otherwise recycled before the replica starts, and it never catches up).
as_postgres "$BIN/pg_basebackup" -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -D "$data" -R -X stream -c fast \
  -C -S "$SLOT"
# The replica's own access rules (Debian keeps them beside its configuration): trust from this machine, as the
# primary's.
cp "$primary_hba" "$conf/pg_hba.conf"
chown postgres:postgres "$conf/pg_hba.conf"
# Small: the replica shares the machine. hot_standby_feedback keeps the primary from removing rows a replica query
# still reads (fewer "conflict with recovery" cancellations).
cat >>"$conf/postgresql.conf" <<EOF

# scripts/test-replica.sh
hot_standby = on
hot_standby_feedback = on
shared_buffers = 64MB
max_connections = 100
EOF
pg_ctlcluster "$VERSION" "$CLUSTER" start
replica_ok || fail "cluster $VERSION/$CLUSTER started but is not streaming from the primary"
say "replica streaming on 127.0.0.1:$REPLICA_PORT"
echo "postgres://postgres@127.0.0.1:$REPLICA_PORT/$DATABASE"
