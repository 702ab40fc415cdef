-- thumbnails.scale: makes thumbnails of one greyscale PGM image, one per
-- requested width, by running awk over the image (a box filter) with
-- jobrunner.exec, the widths at once (jobrunner.all), then queues
-- thumbnails.publish for them. The follow-up is pushed with
-- jobrunner.push, so it exists only if this job succeeds. inflight = 4:
-- a worker scales four images at once while their awk processes run.
--
-- payload: { src = "in/photo.pgm", out = "out", widths = { 128, 64 } }
local jobrunner = require "jobrunner"
local sh = require "thumbnails._sh"

-- An awk program: reads an ASCII (P2) PGM (the file named after it),
-- writes a P2 PGM W pixels wide (aspect kept), each pixel the mean of the
-- ones it covers.
local SCALE = [[
function tok() {
  while (ti > tn) {
    if ((getline line) <= 0) { print "truncated PGM" > "/dev/stderr"; exit 2 }
    sub(/#.*/, "", line); tn = split(line, t); ti = 1
  }
  return t[ti++]
}
BEGIN {
  ti = 1; tn = 0
  if (tok() != "P2") { print "not a P2 (ASCII) PGM" > "/dev/stderr"; exit 2 }
  w = tok() + 0; h = tok() + 0; max = tok() + 0
  if (w < 1 || h < 1 || W < 1) { print "bad size" > "/dev/stderr"; exit 2 }
  if (W > w) W = w
  H = int(h * W / w); if (H < 1) H = 1
  for (y = 0; y < h; y++)
    for (x = 0; x < w; x++) {
      X = int(x * W / w); Y = int(y * H / h)
      sum[Y, X] += tok(); n[Y, X]++
    }
  print "P2"; print W, H; print max
  for (Y = 0; Y < H; Y++) {
    row = ""
    for (X = 0; X < W; X++)
      row = row (X ? " " : "") int(sum[Y, X] / n[Y, X] + 0.5)
    print row
  }
}
]]

return {
  max_retries = 3,
  timeout = 120,
  inflight = 4,
  handle = function(job)
    local p = job.payload
    assert(type(p.src) == "string", "payload.src: the image to scale")
    local out = p.out or "out"
    local base = p.src:match("([^/]+)%.pgm$") or "image"
    sh.run({ "mkdir", "-p", out })
    local branches = {}
    for i, w in ipairs(p.widths or { 64 }) do
      branches[i] = function()
        local dest = ("%s/%s-%d.pgm"):format(out, base, w)
        sh.write(dest, sh.run({ "awk", "-v", "W=" .. w, SCALE, p.src }))
        return dest
      end
    end
    local files = {}
    for i, r in ipairs(jobrunner.all(branches)) do
      if not r.ok then error(r.error, 0) end
      files[i] = r[1]
    end
    jobrunner.log("info", "scaled", p.src, "into", #files, "thumbnails")
    jobrunner.push("thumbnails.publish", { dir = out, files = files,
      archive = p.archive or (out .. "/" .. base .. "-thumbs.tar.gz") })
  end,
}
