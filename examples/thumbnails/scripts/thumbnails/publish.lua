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
    names[i] = sh.quote(f:match("[^/]+$"))
  end
  local list = table.concat(names, " ")
  local cd = "cd " .. sh.quote(p.dir) .. " && "
  sh.run(cd .. "sha256sum " .. list .. " > SHA256SUMS")
  local archive = p.archive:match("[^/]+$")
  sh.run(cd .. "tar czf " .. sh.quote(archive) .. " SHA256SUMS " .. list)
  require("jobrunner").log("info", "published", archive)
end
