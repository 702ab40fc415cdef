-- handler_text_spec.lua - a handler's text that is not UTF-8 (an error, a
-- discard's reason; progress() refuses such a note itself) is stored with
-- each bad byte as U+FFFD, on each backend alike (PostgreSQL refused the
-- completion, and the job ended dead after one attempt): the job is
-- retried as its
-- max_retries says, `show`, its JSON and the attempt history carry the
-- replaced text, and the other jobs of the same rounds complete, also
-- beside results the database does refuse (a follow-up push into no
-- batch: that job dies saying why).
local jr = require "jr"
local cjson = require "cjson"

local FFFD = "\239\191\189"

-- The first line of an error (a handler's error has a traceback after).
local function first(e)
  return type(e) == "string" and e:match("^[^\n]*") or e
end

local function count_ok(env)
  return env:query("SELECT count(*) AS n FROM jobs WHERE name = 'ok'")[1].n
end

local function show_json(env, id)
  local out, err, code = env:cli("show", tostring(id), "--json")
  assert.equal(0, code, err)
  return cjson.decode(out)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": a handler's text that is not UTF-8", function()
    local env = jr.test_env(backend)

    it("is stored with U+FFFD; retries, history and the round's other jobs are kept", function()
      env:script("bad", [[
        return { max_retries = 3, handle = function(job)
          error("bad \xff\xfe bytes", 0)
        end }]])
      env:script("gone", [[
        local jobrunner = require "jobrunner"
        return function(job) jobrunner.discard("gone \xc3(") end]])
      -- a result the database refuses (a follow-up into no batch): its
      -- job dies saying why, the round's others complete
      env:script("refused", [[
        local jobrunner = require "jobrunner"
        return function(job) jobrunner.push("ok", {}, { batch = 999 }) end]])
      env:script("ok", "return function(job) end")
      env:config("defaults = { backoff = 0 }")
      local ids, oks = {}, {}
      for i = 1, 3 do ids[i] = env:push("bad") end
      for i = 1, 30 do oks[i] = env:push("ok") end
      local gone = env:push("gone")
      local refused = {}
      for i = 1, 3 do refused[i] = env:push("refused") end
      for i = 31, 60 do oks[i] = env:push("ok") end
      env:start()
      for _, id in ipairs(ids) do
        local row = env:wait_state(id, "dead", 60)
        assert.equal(4, row.attempts)
        assert.equal("bad " .. FFFD .. FFFD .. " bytes", first(row.last_error))
        local j = show_json(env, id)
        assert.equal(4, #j.attempts)
        for _, a in ipairs(j.attempts) do
          assert.equal("bad " .. FFFD .. FFFD .. " bytes", first(a.error))
        end
        local out = env:cli("show", tostring(id))
        assert.truthy(out:find("bad " .. FFFD .. FFFD .. " bytes", 1, true), out)
      end
      local row = env:wait_state(gone, "dead", 30)
      assert.equal(1, row.attempts)
      assert.equal("gone " .. FFFD .. "(", first(row.last_error))
      for _, id in ipairs(refused) do
        row = env:wait_state(id, "dead", 30)
        assert.equal("follow-up push refused by the database: job 'ok': batch 999 does not exist",
          row.last_error)
      end
      jr.wait_for(function()
        return count_ok(env) == 0
      end, 30, "the plain jobs done")
      for _, id in ipairs(oks) do
        assert.is_nil(env:job(id))     -- a plain success deletes its row
      end
      assert.equal(0, env:stop())
    end)
  end)
end
