-- report.daily (scripts/report/daily.lua): pushes follow-up jobs, which
-- are committed only if this job succeeds.
local jobrunner = require "jobrunner"
local format = require "_format"

return function(job)
  local size = job.payload.size or 1024
  jobrunner.log("info", "report of", format.bytes(size))
  jobrunner.push("email", { to = job.payload.mail_to or "ops@example.com",
                            subject = "daily report" })
end
