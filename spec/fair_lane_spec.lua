-- fair_lane_spec.lua - PostgreSQL: a fair queue claimed alone (its one limit,
-- nothing capped) takes the second database round (runtime/master/lane.c)
-- as a plain queue does: both connections claim it by start tag, each from
-- the place its last batch ended (backends/postgres/fairclaim.c). Every job
-- still runs once, and the keys still take turns: a key pushed behind
-- another's backlog is not left for after it.
local jr = require "jr"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

local function rounds(log)
  return select(2, log:gsub("second connection: %d+ results, %d+ jobs claimed", ""))
end

describe("postgres: a fair queue alone on two connections", function()
  local env = jr.test_env("postgres")

  it("drains on both, every job once, the keys in turn", function()
    env:config('concurrency = 2, log = { level = "debug" }, ' ..
               'limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }')
    env:script("rec", [[
      return function(job)
        local f = assert(io.open(os.getenv("JR_LEDGER"), "a"))
        f:write(job.id, " ", job.payload.t, "\n")
        f:close()
      end]])
    env:cli("migrate")
    -- key a's backlog first, then b's and c's: pushed in that order
    env:exec("INSERT INTO jobs (name, queue, payload) SELECT 'rec', 'fq', " ..
             "jsonb_build_object('t', CASE WHEN g <= 4000 THEN 'a' " ..
             "WHEN g <= 5000 THEN 'b' ELSE 'c' END) " ..
             "FROM generate_series(1, 6000) g ORDER BY g")
    local ledger = env.dir .. "/ledger"
    local p = env:start(jr.ledger_env(ledger))
    jr.wait_for(function() return env:count() == 0 end, 60, "drain")
    assert.equal(0, env:stop("TERM", p))
    local log = env:log(p)
    assert.matches("a second connection records and claims", log, 1, true)
    assert.is_true(rounds(log) > 0, "no round on the second connection")
    assert.is_nil(log:match("not recorded"), log)
    local seen, n, first = {}, 0, {a = 0, b = 0, c = 0}
    for _, line in ipairs(jr.lines(ledger)) do
      local id, t = line:match("^(%d+) (%a)$")
      assert.is_nil(seen[id], "job " .. line .. " ran twice")
      seen[id] = true
      n = n + 1
      if n <= 1500 then
        first[t] = first[t] + 1
      end
    end
    assert.equal(6000, n)
    -- in turn, a third each; in push order, a's alone
    assert.is_true(first.b >= 400 and first.c >= 400,
                   ("first 1500 starts: a %d, b %d, c %d"):format(first.a, first.b, first.c))
  end)
end)
