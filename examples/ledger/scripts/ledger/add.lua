-- ledger.add {cents = N}: one ledger row keyed by the job's id, and the
-- counter moved by as much, both committed with the job's success. A
-- re-run after a lost attempt writes them then: never twice (the job's
-- id is the key), never without the job ending.
local jobrunner = require "jobrunner"

return function(job)
  local cents = math.tointeger(job.payload.cents)
  if not cents then
    jobrunner.discard("cents must be an integer")
  end
  jobrunner.sql{
    { "INSERT INTO ledger (job, cents) VALUES (?1, ?2)", job.id, cents },
    { "UPDATE counter SET n = n + 1, cents = cents + ?1 WHERE name = 'total'",
      cents },
  }
end
