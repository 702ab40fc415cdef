#!/bin/sh
# sqlite-to-postgres.sh - moves a jobrunner SQLite database to PostgreSQL:
# every job with its id, state, attempts, errors, times, payload and keys,
# the queues (paused ones stay paused), the schedules' past fires (so no
# schedule fires twice), the held unique keys and every other table both
# schemas have (a job's attempt history, say), then the id sequence, so
# that new ids continue after every id the SQLite file ever gave.
#
#   sh sqlite-to-postgres.sh DB.sqlite POSTGRES_URL [SCHEMA]
#
# SCHEMA is the config's `schema` (default jobrunner). Stop every runner
# on DB first: a stopped runner gives its claimed jobs back, and the move
# refuses a file with running jobs or a live runner's pid file. The
# PostgreSQL schema is created (jobrunner migrate) and must hold no job;
# everything is written in one transaction, so a failure leaves it empty.
# The SQLite file is only read (after jobrunner migrate brought it to the
# same schema version). Rate-limit buckets and limit paths are not moved:
# runners write them again at start. Needs jobrunner (JOBRUNNER=path),
# sqlite3 and psql. Documented in docs/operations.md, tested by
# spec/operations_spec.lua.
set -eu

die() { echo "sqlite-to-postgres: $*" >&2; exit 1; }

[ $# -ge 2 ] && [ $# -le 3 ] ||
    die "usage: sqlite-to-postgres.sh DB.sqlite POSTGRES_URL [SCHEMA]"
db=$1
url=$2
schema=${3:-jobrunner}
JOBRUNNER=${JOBRUNNER:-jobrunner}
ident='^[a-z_][a-z0-9_]*$'

[ -f "$db" ] || die "$db: no such file"
case $db in
*'"'*|*'\'*) die "$db: a path with a quote or a backslash is refused" ;;
esac
echo "$schema" | grep -Eq "$ident" ||
    die "schema '$schema': use a lower-case name of letters, digits and _"
for tool in sqlite3 psql "$JOBRUNNER"; do
    command -v "$tool" >/dev/null || die "$tool not found"
done

tmp=$(mktemp -d /tmp/jrmove.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
chmod 700 "$tmp"

lite() { sqlite3 -bail -batch "$db" "$@"; }
pg() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$url" "$@"; }

# a runner on the file: its pid file (next to the database) names a live
# process, or jobs are running
if [ -f "$db.pid" ]; then
    pid=$(head -c 64 "$db.pid" | tr -cd '0-9')
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        die "$db: a runner is running (pid $pid, $db.pid): stop it first"
    fi
fi
running=$(lite "SELECT count(*) FROM jobs WHERE state = 'running'")
[ "$running" = 0 ] ||
    die "$db: $running jobs are running: stop every runner on it first"

# both schemas at the version of this jobrunner
umask 077
printf 'return { backend = "sqlite:%s" }\n' "$db" > "$tmp/lite.lua"
"$JOBRUNNER" -c "$tmp/lite.lua" migrate >/dev/null
printf 'return { schema = "%s" }\n' "$schema" > "$tmp/pg.lua"
JOBRUNNER_BACKEND=$url "$JOBRUNNER" -c "$tmp/pg.lua" migrate >/dev/null

n=$(pg -c "SELECT count(*) FROM $schema.jobs")
[ "$n" = 0 ] || die "$schema.jobs already holds $n jobs: move into an empty schema"

# The tables: queues first (a job's insert adds its queue, unpaused),
# jobs, then the rest (they may refer to jobs). limit_buckets,
# limit_paths, fair_paths, sequence_paths and fair_names are the runners'
# to write (from their config and handlers, at start).
tables=$(lite "SELECT name FROM sqlite_master WHERE type = 'table'
               AND name NOT LIKE 'sqlite_%'
               AND name NOT IN ('queues', 'jobs', 'limit_buckets',
                                'limit_paths', 'limit_sizes',
                                'fair_paths', 'sequence_paths',
                                'fair_names', 'schedule_defs_rev')
               ORDER BY name")
tables="queues jobs $tables"

script=$tmp/move.sql
: > "$script"
last=0
for t in $tables; do
    echo "$t" | grep -Eq "$ident" || die "table '$t': unexpected name"
    pg -F '|' -c "SELECT column_name, data_type FROM information_schema.columns
                  WHERE table_schema = '$schema' AND table_name = '$t'
                    AND is_generated = 'NEVER'" > "$tmp/$t.pgcols"
    [ -s "$tmp/$t.pgcols" ] ||
        die "table $t has no counterpart in PostgreSQL's $schema: not moved"
    export_cols=
    insert_cols=
    select_cols=
    for c in $(lite "SELECT name FROM pragma_table_info('$t')"); do
        echo "$c" | grep -Eq "$ident" || die "column $t.$c: unexpected name"
        # SQLite's own: the mark of a sequence's last job, for its index
        # of heads (PostgreSQL finds the last by seq_no)
        case $t.$c in jobs.seq_last) continue ;; esac
        type=$(awk -F'|' -v c="$c" '$1 == c { print $2 }' "$tmp/$t.pgcols")
        [ -n "$type" ] || die "column $t.$c has no counterpart in $schema.$t"
        v="(r->>'$c')"
        case $type in
        "timestamp with time zone")
            # epoch seconds, to the microsecond
            ex="CASE WHEN $c IS NULL THEN NULL ELSE printf('%.6f', $c) END"
            sel="to_timestamp($v::float8)" ;;
        boolean) ex=$c; sel="$v::int::boolean" ;;
        bytea)  # an encrypted payload's bytes (docs/operations.md)
            ex="CASE WHEN $c IS NULL THEN NULL ELSE hex($c) END"
            sel="decode($v, 'hex')" ;;
        jsonb|json|text|bigint|integer|smallint|"double precision"|real|numeric)
            ex=$c; sel="$v::$type" ;;
        *) die "column $t.$c: PostgreSQL type '$type' is not handled" ;;
        esac
        export_cols="$export_cols${export_cols:+, }'$c', $ex"
        insert_cols="$insert_cols${insert_cols:+, }$c"
        select_cols="$select_cols${select_cols:+, }$sel"
    done
    # one JSON object a line; COPY's csv mode with quote and delimiter
    # bytes JSON never holds reads each line as it is
    lite "SELECT json_object($export_cols) FROM $t" > "$tmp/$t.jsonl"
    cat >> "$script" <<EOF
CREATE TEMP TABLE imp_$t (r jsonb);
\\copy imp_$t FROM '$tmp/$t.jsonl' WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')
INSERT INTO $schema.$t ($insert_cols) OVERRIDING SYSTEM VALUE
SELECT $select_cols FROM imp_$t;
EOF
    # generated ids (jobs.id, and any other identity or serial column)
    # continue after every id SQLite gave, deleted ones included
    for c in $(pg -c "SELECT column_name FROM information_schema.columns
                      WHERE table_schema = '$schema' AND table_name = '$t'
                        AND (is_identity = 'YES'
                             OR column_default LIKE 'nextval(%')"); do
        case ", $insert_cols, " in *", $c, "*) ;; *) continue ;; esac
        top=$(lite "SELECT max(coalesce( (SELECT seq FROM sqlite_sequence
                                         WHERE name = '$t'), 0),
                                coalesce( (SELECT max($c) FROM $t), 0))")
        [ "$t" != jobs ] || last=$top
        [ "$top" -gt 0 ] || continue
        echo "SELECT setval(pg_get_serial_sequence('$schema.$t', '$c')," \
             "$top) \\g /dev/null" >> "$script"
    done
done

# the count of run-time schedule changes goes on from SQLite's (its one
# row is the migration's); limit_sizes and limit_paths are the config's,
# written again by the runner's start
rev=$(lite "SELECT coalesce(max(rev), 0) FROM schedule_defs_rev")
case $rev in ''|*[!0-9]*) die "schedule_defs_rev: unexpected count '$rev'" ;; esac
echo "UPDATE $schema.schedule_defs_rev SET rev = ${rev:-0};" >> "$script"

pg --single-transaction -f "$script"

# the same number of rows on both sides
for t in $tables; do
    a=$(lite "SELECT count(*) FROM $t")
    b=$(pg -c "SELECT count(*) FROM $schema.$t")
    [ "$a" = "$b" ] || die "$t: $a rows in $db but $b in $schema.$t"
    echo "$t: $b rows"
done
echo "moved $db to $schema; next ids after $last. Point the runners'" \
     "backend at PostgreSQL and start them."
