#!/bin/sh
# pgcluster.sh - a throwaway PostgreSQL 15 cluster for tests, reachable only
# through a unix socket inside its own directory.
#
#   pgcluster.sh start [DIR]   init + start; prints a libpq URL on stdout
#                              (DIR defaults to a new mktemp -d under /tmp)
#   pgcluster.sh restart DIR   restart it (pg_ctl restart -m fast)
#   pgcluster.sh stop DIR      stop it (pg_ctl stop -m fast) and remove DIR
#   pgcluster.sh kill DIR      crash it: SIGKILL to the postmaster and every
#                              server process (what a power cut leaves to
#                              crash recovery, bar the page cache)
#   pgcluster.sh resume DIR    start it again after a kill (crash recovery)
#
# PGCLUSTER_EXTRA: lines added to postgresql.conf at start (e.g. to log slow
# statements' plans with auto_explain while `make bench` runs).
#
# Runs as root (initdb refuses root, so the server runs as user postgres via
# runuser) or as any other user (the server then runs as that user). DIR and
# its parents must be traversable by the server's user.
set -eu

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

die() {
    echo "pgcluster.sh: $*" >&2
    exit 1
}

# as_pg CMD...: runs CMD as the cluster owner.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

url() {
    echo "postgresql:///postgres?host=$1&user=postgres"
}

start() {
    dir=$1
    [ -x "$PGBIN/initdb" ] ||
        die "no initdb in $PGBIN (apt install postgresql-15)"
    case $dir in
        /*) ;;
        *) die "'$dir': DIR must be an absolute path" ;;
    esac
    case $dir in
        *[!A-Za-z0-9_./-]*) die "'$dir': DIR may hold only [A-Za-z0-9_./-]" ;;
    esac
    mkdir -p "$dir"
    [ -z "$(ls -A "$dir")" ] || die "'$dir' is not empty"
    chmod 755 "$dir"
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 ||
            die "no user 'postgres' to run the server"
        chown postgres: "$dir"
        as_pg test -x "$dir" ||
            die "'$dir' is not reachable by user postgres (check its parents)"
    fi
    : >"$dir/.pgcluster"
    as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
        --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
        die "initdb failed, see $dir/initdb.log"
    cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
max_connections = 130
${PGCLUSTER_EXTRA:-}
EOF
    as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        start >/dev/null || die "server did not start, see $dir/server.log"
    url "$dir"
}

# check DIR: refuses anything that start did not make.
check() {
    [ -n "$1" ] && [ "$1" != / ] || die "empty or root DIR"
    [ -f "$1/.pgcluster" ] || die "'$1' is not a pgcluster.sh directory"
}

cmd=${1:-}
case $cmd in
    start)
        if [ $# -ge 2 ]; then
            start "$2"
        else
            start "$(mktemp -d /tmp/jrpg.XXXXXX)"
        fi
        ;;
    restart)
        [ $# -eq 2 ] || die "usage: pgcluster.sh restart DIR"
        check "$2"
        as_pg "$PGBIN/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 \
            -m fast restart >/dev/null ||
            die "server did not restart, see $2/server.log"
        ;;
    kill)
        [ $# -eq 2 ] || die "usage: pgcluster.sh kill DIR"
        check "$2"
        pid=$(head -n 1 "$2/data/postmaster.pid" 2>/dev/null) ||
            die "no postmaster.pid in '$2/data'"
        # the children first would let the postmaster start a recovery;
        # stopped first, it forks no child between the list and the kill
        # (a backend forked in between lived on attached to the shared
        # memory, and the next start refused: "another server might be
        # running ... could not start server")
        kill -STOP "$pid" 2>/dev/null || true
        kids=$(pgrep -P "$pid" || true)
        kill -9 "$pid" $kids 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null ||
            { [ -n "$kids" ] && kill -0 $kids 2>/dev/null; }; do
            sleep 0.01
        done
        # every process of the cluster is gone: its lock files name a pid
        # that another process may take before the next start (pid_max is
        # 32768 here, and the suite forks by the thousand), and one owned
        # by postgres would make the server refuse to start as if it still ran
        rm -f "$2/data/postmaster.pid" "$2"/.s.PGSQL.*.lock
        ;;
    resume)
        [ $# -eq 2 ] || die "usage: pgcluster.sh resume DIR"
        check "$2"
        as_pg "$PGBIN/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 \
            start >/dev/null ||
            die "server did not start; $2/server.log ends: $(tail -n 5 \
                "$2/server.log" 2>/dev/null)"
        ;;
    stop)
        [ $# -eq 2 ] || die "usage: pgcluster.sh stop DIR"
        check "$2"
        if [ -f "$2/data/postmaster.pid" ]; then
            as_pg "$PGBIN/pg_ctl" -D "$2/data" -w -t 60 -m fast stop \
                >/dev/null || die "server in '$2' did not stop"
        fi
        rm -rf "$2"
        ;;
    *)
        echo "usage: pgcluster.sh start [DIR] | restart DIR | kill DIR |" \
            "resume DIR | stop DIR" >&2
        exit 2
        ;;
esac
