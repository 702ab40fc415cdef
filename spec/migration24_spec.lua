-- migration24_spec.lua - migration 24 (encrypted payloads stored as
-- bytes: docs/operations.md, "Encryption"). A database of schema 23
-- holding jobs in every state, a queued one with a payload sealed as
-- schema 23 stored it (the envelope's text, {"$jr_enc":"v1:ID:BASE64"}),
-- is brought forward by `jobrunner migrate` with every job intact (each
-- payload's text as it was, no bytes beside it); that envelope still
-- opens (show, and the handler sees it clear), and a new encrypted push
-- goes in as its stub and bytes and runs too.
local jr = require "jr"
local cjson = require "cjson"

local HANDLER = [[
  return function(job)
    local f = assert(io.open(os.getenv("PWD") .. "/seen", "a"))
    f:write(tostring(job.payload.secret or job.payload.n), "\n")
    f:close()
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 24 (encrypted payloads as bytes)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-23 database: envelopes stored as text stay and open, new ones go in as bytes",
      function()
      local kf = env.dir .. "/keys"
      local _, err, code = env:cli("keys", "new", kf)
      assert.equal(0, code, err)
      -- an envelope as schema 23 stored it: sealed by a producer in a
      -- scratch database, read back as its text
      local s = jr.env(backend)
      s:config(('encryption = { key_file = %q }'):format(kf))
      local envelope = jr.stored_payload(s, s:push("m24", '{"secret":"tiger-old"}'))
      s:cleanup()
      assert.matches('^{"%$jr_enc":"v1:', envelope)
      jr.make_schema(env, 23)
      local past, later = jr.past_later(env)
      env:exec(([[
        INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                          locked_by, locked_until, last_error, died_at, finished_at)
        VALUES ('m24', '%s', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
               ('m24', '{"n": 2}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL),
               ('m24', '{"n": 3}', 'other', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s),
               ('m24', '{"n": 4}', 'other', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s),
               ('m24', '{"n": 5}', 'other', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s)
      ]]):format(envelope, past, past, later, past, past, past, past, past, past, past))
      local before = jr.job_snapshot(env)
      env:config(('encryption = { key_file = %q }'):format(kf))
      local out, err2, code2 = env:cli("migrate")
      assert.are.equal(0, code2, out .. err2)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE sealed IS NOT NULL"))
      assert.are.same(cjson.decode(envelope), cjson.decode(jr.stored_payload(env, 1)))
      -- the envelope stored as text opens
      out, err2, code2 = env:cli("show", "1", "--json")
      assert.are.equal(0, code2, err2)
      assert.are.equal("tiger-old", cjson.decode(out).payload.secret)
      -- a new encrypted push goes in as its stub and its bytes: neither
      -- holds the text, nor its length beyond the cipher's block
      local new = env:push("m24", '{"secret":"tiger-new"}')
      local pg = backend == "postgres"
      local row = env:query(("SELECT payload%s AS p, length(sealed) AS n FROM jobs WHERE id = %d")
        :format(pg and "::text" or "", new))[1]
      assert.matches('^{"%$jr_enc": ?"v1:[%w._-]+:sealed"}$', row.p)
      assert.are.equal(12 + 32 + 16, tonumber(row.n))
      assert.is_nil(jr.stored_payload(env, new):find("tiger", 1, true))
      -- a runner runs both, its handler seeing them clear
      env:script("m24", HANDLER)
      env:start(nil, { args = { "--queues", "default" } })
      jr.wait_for(function()
        local seen = jr.read_file(env.dir .. "/seen") or ""
        return seen:find("tiger-old", 1, true) and seen:find("tiger-new", 1, true)
      end, 30, "both sealed jobs run")
      assert.are.equal(0, env:stop())
    end)
  end)
end
