#!/bin/sh
# examples/thumbnails/run.sh [WORKDIR] - the whole pipeline once: draws a
# 256x256 test image, starts a runner on the handlers in scripts/, pushes
# one thumbnails.scale job, waits for it and its follow-up
# thumbnails.publish, stops the runner and shows what was made.
# Uses `jobrunner` from PATH, else the one built in this repository.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
JOBRUNNER=${JOBRUNNER:-$(command -v jobrunner || echo "$here/../../jobrunner")}
work=${1:-$(mktemp -d /tmp/thumbnails.XXXXXX)}
mkdir -p "$work/in"
cd "$work"

# The source image: a radial gradient, written as an ASCII PGM by awk.
awk 'BEGIN {
  print "P2"; print "# test image"; print 256, 256; print 255
  for (y = 0; y < 256; y++) {
    row = ""
    for (x = 0; x < 256; x++) {
      d = sqrt((x - 128) ^ 2 + (y - 128) ^ 2)
      row = row (x ? " " : "") (d > 127 ? 0 : int(255 - 2 * d))
    }
    print row
  }
}' > in/gradient.pgm

cat > jobrunner.lua <<CONF
return {
  backend = "sqlite:$work/jobs.db",
  scripts = "$here/scripts",
}
CONF
jr() { "$JOBRUNNER" -c "$work/jobrunner.lua" "$@"; }

# Started directly (not through jr) so that $! is the runner itself.
"$JOBRUNNER" -c "$work/jobrunner.lua" run > runner.out 2> runner.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
jr push thumbnails.scale > /dev/null \
  "{\"src\":\"$work/in/gradient.pgm\",\"out\":\"$work/out\",\"widths\":[128,64,32]}"

# Both jobs are done when the archive exists and nothing is queued or
# running; a dead job means a handler failed for good.
i=0
while :; do
  s=$(jr stats --json)
  case $s in
  *'"dead":0,'*) ;;
  *) echo "a job died:" >&2; jr dead list >&2; exit 1 ;;
  esac
  case $s in
  '{"queued":0,"ready":0,"scheduled":0,"running":0,'*)
    [ -f out/gradient-thumbs.tar.gz ] && break ;;
  esac
  i=$((i + 1))
  if [ $i -gt 300 ]; then
    echo "timed out; runner log:" >&2; cat runner.log >&2; exit 1
  fi
  sleep 0.1
done
kill $pid
wait $pid || true               # SIGTERM: it finishes and exits
trap - EXIT

(cd out && sha256sum -c SHA256SUMS)
tar tzf out/gradient-thumbs.tar.gz
echo "thumbnails in $work/out"
