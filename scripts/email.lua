-- email: a handler table with options. A failure (error) is retried with
-- backoff; after max_retries it goes to the dead queue.
local jobrunner = require "jobrunner"

return {
  max_retries = 5,
  timeout = 30,
  backoff = function(attempt) return 10 * 2 ^ attempt end,
  handle = function(job)
    local to = job.payload.to
    if type(to) ~= "string" or not to:find("@") then
      -- a bad address will not get better: no retries
      jobrunner.discard("invalid recipient: " .. tostring(to))
    end
    jobrunner.log("info", "sending to", to)
    -- a real handler would talk to an SMTP server here
  end,
}
