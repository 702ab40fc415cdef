-- thumbnails.publish: the follow-up of thumbnails.scale. Writes a
-- SHA256SUMS manifest of the thumbnails with sha256sum and packs them and
-- the manifest into a .tar.gz with tar, as a CDN upload step would.
--
-- payload: { dir = "out", files = { "out/a-64.pgm", ... },
--            archive = "out/a-thumbs.tar.gz" }
local sh = require "thumbnails._sh"

return function(job)
  local p = job.payload
  local names = {}
  for i, f in ipairs(p.files) do
    -- sha256sum and tar run inside dir, so the manifest has plain names
    names[i] = f:match("[^/]+$")
  end
  local sums = sh.run({ "sha256sum", table.unpack(names) }, { cwd = p.dir })
  sh.write(p.dir .. "/SHA256SUMS", sums)
  local archive = p.archive:match("[^/]+$")
  sh.run({ "tar", "czf", archive, "SHA256SUMS", table.unpack(names) },
    { cwd = p.dir })
  require("jobrunner").log("info", "published", archive)
end
