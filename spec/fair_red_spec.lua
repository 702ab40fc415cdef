-- fair_red_spec.lua - fair share's inputs as an attacker or a careless
-- user writes them (docs/queues.md, "Fair share", "Keyed by a job
-- name"), on each backend: a payload path or a weight key with a NUL
-- byte inside (which C would cut short, silently keying at another
-- path or weighting another key), a weight key that is not UTF-8 (which
-- PostgreSQL refuses at each claim, stalling every queue of the runner)
-- are refused where they are written, naming the file and the key.
local jr = require "jr"

local FAIR = [[limits = { ["queue:fq"] = { fair = { key = "payload.t"%s } } }]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair share under bad input:", function()
    local env = jr.test_env(backend)

    it("refuses a handler's fair or sequence path with a NUL byte inside, naming the file", function()
      env:config(FAIR:format(""))
      env:script("nul.f", [[return { fair = "payload.a\0b", handle = function() end }]])
      env:script("nul.s", [[return { sequence = "payload.a\0b", handle = function() end }]])
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("nul/f.lua: 'fair' must be a payload path", out .. err, 1, true)
      assert.matches("nul/s.lua: 'sequence' must be a payload path", out .. err, 1, true)
    end)

    it("says a path is refused for its length when it is only too long", function()
      env:config(FAIR:format(""))
      env:script("long", ('return { fair = "payload.%s", handle = function() end }'):format(("a"):rep(200)))
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("long.lua: 'fair' must be a payload path .* 200 bytes at most%)", out .. err)
    end)

    it("refuses a queue's fair key path with a NUL byte inside, naming the key", function()
      env:config([[limits = { ["queue:fq"] = { fair = { key = "payload.t\0u" } } }]])
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("'limits.queue:fq.fair.key' holds a NUL byte", out .. err, 1, true)
    end)

    it("refuses config weight keys that are not UTF-8 or hold a NUL, naming the key", function()
      env:config(FAIR:format(", weights = { [\"a\\xffb\"] = 3 }"))
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("'limits.queue:fq.fair.weights' keys must be UTF-8 strings",
        out .. err, 1, true)
      env:config(FAIR:format(", weights = { [\"a\\0b\"] = 3 }"))
      out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("'limits.queue:fq.fair.weights' has a key holding a NUL byte",
        out .. err, 1, true)
    end)

    it("refuses such weight keys from jobrunner.limits.set and keeps the queue's weights", function()
      env:config(FAIR:format(", weights = { acme = 2 }") .. ([[,
        hooks = { on_start = function()
          local limits = require "jobrunner.limits"
          local f = io.open(%q, "a")
          for _, k in ipairs({ "a\0b", "a\xffb" }) do
            local ok, err = limits.set("queue:fq", { fair = { weights = { [k] = 3 } } })
            f:write(tostring(ok), " ", tostring(err), "\n")
          end
          f:write(limits.get("queue:fq").fair.weights, "\n")
          f:close()
        end }]]):format(env.dir .. "/seen"))
      env:script("w", jr.LEDGER)
      env:start(jr.ledger_env(env.dir .. "/ledger"))
      jr.wait_for(function() return #jr.lines(env.dir .. "/seen") >= 3 end, 30, "hook ran")
      local seen = jr.lines(env.dir .. "/seen")
      for i = 1, 2 do
        assert.matches("^nil jobrunner.limits.set: 'limits.queue:fq.fair.weights' keys must be UTF%-8",
          seen[i])
      end
      assert.equal('{"acme":2}', seen[3])
      -- and the runner claims as before, the fair queue's jobs and the others
      env:push("w", '{"t": "acme"}', "--queue", "fq")
      env:push("w", '{"t": "b"}')
      jr.wait_for(function() return jr.ledger_count(env.dir .. "/ledger") == 2 end, 30, "2 jobs ran")
    end)

    it("refuses fair set of a KEY that is not UTF-8, as no payload holds it", function()
      env:config(FAIR:format(""))
      assert.equal(0, select(3, env:cli("migrate")))
      local out, err, code = env:cli("fair", "set", "fq", "a\255b", "3")
      assert.equal(2, code, out .. err)
      assert.matches("fair set: the KEY must be UTF-8 text", err, 1, true)
      assert.equal(0, #env:query("SELECT key FROM fair_keys"))
    end)

    it("notes that fair set's queue is not fair in the config (a misspelt name)", function()
      env:config(FAIR:format(""))
      assert.equal(0, select(3, env:cli("migrate")))
      local out, err, code = env:cli("fair", "set", "f", "acme", "3")
      assert.equal(0, code, out .. err)
      assert.matches("queue 'f' is not fair in this config", err, 1, true)
      out, err, code = env:cli("fair", "set", "fq", "acme", "3")
      assert.equal(0, code, out .. err)
      assert.equal("", err)
    end)
  end)
end

-- The fair queue's key path changed in the config, over queued jobs: a
-- name with a fair path of its own keeps it (it was re-keyed at the
-- queue's path, while its new pushes went by its own), and the path is
-- recorded only with the queue's jobs keyed (on PostgreSQL the two were
-- two statements: a re-key that failed, or a runner killed between them,
-- left the path recorded over jobs keyed NULL, which the fair claim
-- never takes, and the next start saw the path unchanged).
for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue's key path changed over queued jobs:", function()
    local env = jr.test_env(backend)
    local SCRIPT = [[return { fair = "payload.a", handle = ]] .. jr.LEDGER:match("return (.*)$") .. " }"

    local function key_of(id)
      return env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. math.tointeger(id))[1].k
    end

    it("keeps a name's own path for its jobs when the queue's path changes", function()
      env:config("concurrency = 1, " .. FAIR:format(""))
      env:script("w", SCRIPT)
      env:start(jr.ledger_env(env.dir .. "/ledger"))
      jr.wait_for(function()
        return #env:query("SELECT name FROM fair_names WHERE name = 'w'") == 1
      end, 30, "the runner recorded w's fair path")
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      local named = env:push("w", '{"a": "A", "t": "T", "u": "U"}', "--queue", "fq")
      local other = env:push("v", '{"a": "A", "t": "T", "u": "U"}', "--queue", "fq")
      assert.equal("A", key_of(named))
      assert.equal(0, env:stop())
      env:config("concurrency = 1, " .. FAIR:format(""):gsub("payload%.t", "payload.u"))
      env:start(jr.ledger_env(env.dir .. "/ledger"))
      jr.wait_for(function()
        return key_of(other) == "U"
      end, 30, "the queue's jobs keyed at its new path")
      assert.equal("A", key_of(named))
    end)

    it("records a new path only with its queue's jobs keyed, and runs them once it can", function()
      env:config("concurrency = 1")
      env:script("w", jr.LEDGER)
      assert.equal(0, select(3, env:cli("migrate")))
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      env:push("w", '{"t": "boom"}', "--queue", "fq")
      env:push("w", '{"t": "fine"}', "--queue", "fq")
      if backend == "postgres" then
        env:exec([[CREATE FUNCTION red_boom() RETURNS trigger LANGUAGE plpgsql AS
          $$BEGIN IF NEW.fair_key = 'boom' THEN RAISE EXCEPTION 'red boom'; END IF;
          RETURN NEW; END$$;
          CREATE TRIGGER red_boom BEFORE UPDATE OF fair_key ON jobs
          FOR EACH ROW EXECUTE FUNCTION red_boom()]])
      else
        env:exec([[CREATE TRIGGER red_boom BEFORE UPDATE OF fair_key ON jobs
          WHEN NEW.fair_key = 'boom' BEGIN SELECT RAISE(ABORT, 'red boom'); END]])
      end
      env:config("concurrency = 1, " .. FAIR:format(""))
      local p = env:start(jr.ledger_env(env.dir .. "/ledger"), { wait = false })
      jr.wait_for(function() return env:log(p):find("red boom", 1, true) end, 30,
        "the re-key's failure logged")
      env:stop(nil, p)
      assert.same({}, env:query("SELECT queue FROM fair_paths"))
      env:exec("DROP TRIGGER red_boom" .. (backend == "postgres" and " ON jobs" or ""))
      env:start(jr.ledger_env(env.dir .. "/ledger"))
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      jr.wait_for(function() return jr.ledger_count(env.dir .. "/ledger") == 2 end, 30, "both jobs ran")
    end)
  end)
end

-- A key longer than an index entry holds (about 2,700 bytes that do not
-- compress) on PostgreSQL failed the push into a fair queue with "index
-- row size ... exceeds btree version 4 maximum 2704 for index jobs_fair"
-- (naming neither the fair key nor the job), and a handler reload that
-- added a path over such a queued job failed to record the path. The
-- stamped key is capped at its first 512 characters (on both engines,
-- and in `fair set`), so the push goes in and the reload keys the
-- name's jobs.
if jr.pg_url then
  describe("postgres fair share, a key longer than an index entry:", function()
    local env = jr.test_env("postgres")
    local function big()
      local t = {}
      for i = 1, 1200 do t[i] = string.format("%x", math.random(0, 0xffffff)) end
      return table.concat(t)
    end

    it("pushes the job (its key capped) and keys the name's jobs after a reload", function()
      env:config("concurrency = 1, " .. FAIR:format(""))
      env:script("w", jr.LEDGER)
      env:start(jr.ledger_env(env.dir .. "/ledger"))
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      local q = jr.client(env)
      local t = big()
      local ok, err = q:push("w", { t = t }, { queue = "fq" })
      assert.truthy(ok, err)
      assert.equal(t:sub(1, 512), env:query("SELECT fair_key AS k FROM jobs WHERE id = "
        .. math.tointeger(ok))[1].k)
      -- a job whose future key is big, then a path over it
      assert(q:push("w", { t = "s", a = big() }, { queue = "fq" }))
      local small = assert(q:push("w", { t = "s", a = "acct" }, { queue = "fq" }))
      q:close()
      env:script("w", "return { fair = 'payload.a', handle = " .. jr.LEDGER:match("return (.*)$") .. " }")
      env:stop()
      env:start(jr.ledger_env(env.dir .. "/ledger"))
      jr.wait_for(function()
        return #env:query("SELECT name FROM fair_names WHERE name = 'w'") == 1
      end, 30, "the runner recorded w's fair path: " .. env:log())
      assert.equal("acct", env:query("SELECT fair_key AS k FROM jobs WHERE id = "
        .. math.tointeger(small))[1].k)
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      jr.wait_for(function() return jr.ledger_count(env.dir .. "/ledger") == 3 end, 30, "3 jobs ran")
    end)
  end)
end

-- Each step of a fair key path is a field of an object, on both engines
-- (docs/queues.md, "Fair share"): "payload.a.0" over {"a": ["x", "y"]}
-- finds no field "0" (the key ""), over {"a": {"0": "z"}} it does.
for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair key through an array:", function()
    local env = jr.test_env(backend)

    it("keys payload.a.0 over an array as a field, as the other engine does", function()
      env:config(FAIR:format(""))
      env:script("arr", [[return { fair = "payload.a.0", handle = function() end }]])
      env:start()
      jr.wait_for(function()
        return #env:query("SELECT name FROM fair_names WHERE name = 'arr'") == 1
      end, 30, "the runner recorded the handler's fair path")
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      local id = env:push("arr", '{"a": ["x", "y"], "t": "q"}', "--queue", "fq")
      local f = env:push("arr", '{"a": {"0": "z"}, "t": "q"}', "--queue", "fq")
      assert.equal("", env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. id)[1].k)
      assert.equal("z", env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. f)[1].k)
    end)
  end)
end

-- A fair key's value of each JSON type, as each engine stamps it: the
-- docs key a job by "a string or a number" at the path, and `fair set
-- QUEUE KEY` (text) names a key, so the string "1" and the number 1 are
-- one key on both engines (PostgreSQL's #>> and SQLite's json_extract
-- give the text 1 for both), as a per-key limit's key is (docs/limits.md);
-- a job without the path, or with JSON null there, is under "".
for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair key of each JSON type:", function()
    local env = jr.test_env(backend)

    local function keys(payloads)
      env:config(FAIR:format(""))
      assert.equal(0, select(3, env:cli("migrate")))
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      local q = jr.client(env)
      local out = {}
      for i, p in ipairs(payloads) do
        local id = assert(q:push("w", p, { queue = "fq" }))
        out[i] = env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. math.tointeger(id))[1].k
      end
      q:close()
      return out
    end

    it("keys the string \"1\" and the number 1 alike, and a missing or null value as \"\"", function()
      local huge = ("x"):rep(100000)
      local wide = ("\u{e9}"):rep(600)               -- 2 bytes a character
      -- (a value holding 0x1F has one in front: no name's scoped key)
      assert.same({ "1", "1", "1.5", "", "\31a\1\n\t\31b", huge:sub(1, 512), "", "",
                    wide:sub(1, 1024) },
        keys({ { t = 1 }, { t = "1" }, { t = 1.5 }, { t = "" }, { t = "a\1\n\t\31b" },
               { t = huge }, {}, { u = 1 }, { t = wide } }))
      local null = env:push("w", '{"t": null}', "--queue", "fq")
      assert.equal("", env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. null)[1].k)
    end)

    -- true and false are the words on both engines (SQLite's
    -- json_extract gives 1 and 0: the key is spelt out there), not the
    -- key of the number 1 or 0. A number is keyed by its value (1e2 and
    -- 100.0 as "100", not SQLite's "100.0"), an object or an array as "".
    it("names with fair set a long KEY's capped key, as its jobs are keyed", function()
      local long = ("k"):rep(500) .. ("\u{e9}"):rep(100) -- 512 characters: 524 bytes
      local id = keys({ { t = long } })
      assert.equal(long:sub(1, 524), id[1])
      local out, err, code = env:cli("fair", "set", "fq", long, "3")
      assert.equal(0, code, out .. err)
      assert.same({ { k = long:sub(1, 524), w = 3 } },
        env:query("SELECT key AS k, weight AS w FROM fair_keys WHERE weight IS NOT NULL"))
    end)

    it("keys true and false apart from 1 and 0, as the words", function()
      assert.same({ "true", "false", "1", "0" },
        keys({ { t = true }, { t = false }, { t = 1 }, { t = 0 } }))
    end)

    it("keys a number by its value and an object or an array as \"\"", function()
      keys({})
      local want = { ['1e2'] = "100", ['100.0'] = "100", ['-0.0'] = "0",
                     ['0.1'] = "0.1", ['1.5e-7'] = "1.5e-07", ['1e20'] = "1e+20",
                     ['123456789012345678'] = "123456789012345678",
                     ['3.141592653589793'] = "3.141592653589793",
                     ['0.1234567890123456'] = "0.1234567890123456",
                     ['1e400'] = "Inf", ['[1, 2]'] = "", ['{"a": 1}'] = "" }
      for lit, k in pairs(want) do
        local id = env:push("w", '{"t": ' .. lit .. '}', "--queue", "fq")
        assert.equal(k, env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. id)[1].k, lit)
      end
    end)
  end)
end
