#!/bin/sh
# examples/import/run.sh [WORKDIR] - an import with a cursor that survives
# a deploy: writes 1,000 rows, starts a runner, pushes one import.rows job,
# stops the runner with SIGTERM half-way (the job goes back at its next
# checkpoint, its attempt not counted), starts another and checks that
# every row was copied once, in order.
# Uses `jobrunner` from PATH, else the one built in this repository.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
JOBRUNNER=${JOBRUNNER:-$(command -v jobrunner || echo "$here/../../jobrunner")}
work=${1:-$(mktemp -d /tmp/import.XXXXXX)}
mkdir -p "$work"
cd "$work"
rm -f out.txt
awk 'BEGIN { for (i = 1; i <= 1000; i++) print "row " i }' > rows.txt

cat > jobrunner.lua <<CONF
return {
  backend = "sqlite:$work/jobs.db",
  scripts = "$here/scripts",
  shutdown_timeout = 30,
}
CONF
jr() { "$JOBRUNNER" -c "$work/jobrunner.lua" "$@"; }

id=$(jr push import.rows "{\"src\":\"$work/rows.txt\",\"out\":\"$work/out.txt\"}")
"$JOBRUNNER" -c "$work/jobrunner.lua" run > runner.out 2> runner.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
# the deploy: once some rows are in, SIGTERM
i=0
until [ -f out.txt ] && [ "$(wc -l < out.txt)" -ge 200 ]; do
  i=$((i + 1)); [ $i -le 600 ] || { echo "no rows" >&2; exit 1; }
  sleep 0.05
done
kill $pid
wait $pid || true
echo "stopped after $(wc -l < out.txt) rows; the job is handed back:"
jr show "$id" | grep -E '^(state|attempt) |checkpoint'

"$JOBRUNNER" -c "$work/jobrunner.lua" run > runner2.out 2> runner2.log &
pid=$!
i=0
until jr show "$id" 2>/dev/null | grep -q '^state  *completed'; do
  i=$((i + 1)); [ $i -le 1200 ] || { echo "not done" >&2; exit 1; }
  sleep 0.05
done
kill $pid
wait $pid || true
trap - EXIT
jr show "$id" | grep -E '^(state|attempt|result) |recorded'
awk '{ print toupper($0) }' rows.txt | cmp - out.txt
echo "1000 rows copied once each, in order, across a restart"
