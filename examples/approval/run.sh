#!/bin/sh
# examples/approval/run.sh [WORKDIR] - two expenses wait for a decision:
# starts a runner on the handler in scripts/, pushes two approval.request
# jobs, answers them with `jobrunner signal` once they wait, waits until
# both ended, stops the runner and shows what happened.
# Uses `jobrunner` from PATH, else the one built in this repository.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
JOBRUNNER=${JOBRUNNER:-$(command -v jobrunner || echo "$here/../../build/jobrunner")}
work=${1:-$(mktemp -d /tmp/approval.XXXXXX)}
mkdir -p "$work"
cd "$work"

cat > jobrunner.lua <<CONF
return {
  backend = "sqlite:$work/jobs.db",
  scripts = "$here/scripts",
  concurrency = 1,
}
CONF
jr() { "$JOBRUNNER" -c "$work/jobrunner.lua" "$@"; }

# Started directly (not through jr) so that $! is the runner itself.
"$JOBRUNNER" -c "$work/jobrunner.lua" run > runner.out 2> runner.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
a=$(jr push approval.request '{"expense": 1, "amount": 120}')
b=$(jr push approval.request '{"expense": 2, "amount": 9000}')

# state of job $1, from show --json
state() { jr show "$1" --json | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'; }
until_state() {
  n=0
  while [ "$(state "$1")" != "$2" ]; do
    n=$((n + 1))
    [ $n -lt 300 ] || { echo "job $1 never $2" >&2; exit 1; }
    sleep 0.1
  done
}

until_state "$a" waiting
until_state "$b" waiting
jr stats
jr show "$a" | grep waiting_for
jr signal "$a" decision '{"approved": true, "by": "ada"}'
jr signal "$b" decision '{"approved": false, "by": "grace"}'
until_state "$a" completed
until_state "$b" completed

kill $pid
wait $pid || true
trap - EXIT
echo "--- requests.log"; cat requests.log
echo "--- paid.log"; cat paid.log
jr show "$a" | grep '^result'
jr show "$b" | grep '^result'
