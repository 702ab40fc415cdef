-- fair_replace_spec.lua - a fair queue's job replaced by a newer push of
-- its unique key (on_conflict = "replace" or "cancel_running", the
-- debounce of docs/schedules.md) or of its sequence: the replacement's
-- payload and run time are the job's now, so are its fair key, its turn
-- and its limit key. A job moved to later takes no turn of its key while
-- it waits (a job not yet due takes none, docs/queues.md), and a key
-- changed by the new payload is the job's key from then on. The turn its
-- old tag took goes back to its key when it was the key's last one given
-- (the key's next job takes that tag); one with later jobs of the key
-- after it stays spent (a hole in the key's tags: those jobs keep theirs,
-- and a job pushed after is behind them, never behind the replaced one,
-- which holds no tag). Both engines; asserts stored rows.
local jr = require "jr"
local cjson = require "cjson"

local function rows(env)
  local n = env.backend == "postgres" and "(payload -> 'n')"
    or "json_extract(payload, '$.n')"
  return env:query(("SELECT id, %s AS n, fair_key AS k, fair_tag AS tag,"
    .. " limit_key AS lk FROM jobs WHERE queue = 'fq' ORDER BY id"):format(n))
end

local function null(v) return v == nil or v == cjson.null end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue, a job replaced:", function()
    local env
    before_each(function()
      env = jr.env(backend)
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      local out, err, code = env:cli("migrate")
      assert.equal(0, code, out .. err)
    end)
    after_each(function() env:cleanup() end)

    local function push(q, t, n, o)
      o.queue = "fq"
      return assert(q:push("rf.w", { t = t, n = n }, o))
    end

    it("moved to later by a replace gives its key's turn back", function()
      local q = jr.client(env)
      push(q, "a", 1, { unique_key = "u", on_conflict = "replace" })
      local r = rows(env)
      assert.is_false(null(r[1].tag), "the due job is tagged")
      push(q, "a", 2, { unique_key = "u", on_conflict = "replace", run_in = 3600 })
      -- a's next due job starts from the clock, as if the replaced one
      -- had never been
      push(q, "a", 3, {})
      q:close()
      r = rows(env)
      assert.equal(2, #r)
      assert.equal(2, math.tointeger(r[1].n))
      assert.is_true(null(r[1].tag), "the job due in an hour kept tag " .. tostring(r[1].tag))
      assert.equal(0, r[2].tag)
    end)

    it("takes the key of its new payload", function()
      local q = jr.client(env)
      push(q, "a", 1, { unique_key = "u", on_conflict = "replace" })
      push(q, "b", 2, { unique_key = "u", on_conflict = "replace" })
      -- a's turn came back: its next job takes the tag the replaced had
      push(q, "a", 3, {})
      q:close()
      local r = rows(env)
      assert.equal(2, #r)
      assert.equal("b", r[1].k)
      assert.equal(0, r[1].tag)
      assert.equal("a", r[2].k)
      assert.equal(0, r[2].tag)
    end)

    it("moved to later by a sequence replace gives its key's turn back", function()
      local q = jr.client(env)
      push(q, "a", 1, { sequence = "s", on_conflict = "replace", run_in = 3600 })
      push(q, "a", 2, { sequence = "s", on_conflict = "replace" })
      push(q, "a", 3, { sequence = "s", on_conflict = "replace", run_in = 3600 })
      push(q, "a", 4, {})
      q:close()
      local r = rows(env)
      assert.equal(2, #r)
      assert.equal(3, math.tointeger(r[1].n))
      assert.is_true(null(r[1].tag), "the job due in an hour tagged " .. tostring(r[1].tag))
      -- neither the replaced job nor the pushes dropped into it kept a turn
      assert.equal(0, r[2].tag)
    end)

    it("replaced by a due push of its key keeps its turn", function()
      local q = jr.client(env)
      push(q, "a", 1, { unique_key = "u", on_conflict = "replace" })
      push(q, "a", 2, { unique_key = "u", on_conflict = "replace" })
      push(q, "a", 3, { unique_key = "u", on_conflict = "cancel_running" })
      push(q, "a", 4, {})
      q:close()
      local r = rows(env)
      assert.equal(2, #r)
      assert.equal(3, math.tointeger(r[1].n))
      assert.equal(0, r[1].tag)
      assert.equal(1, r[2].tag)
    end)

    it("with later jobs of its key tagged keeps that turn spent", function()
      local q = jr.client(env)
      push(q, "a", 1, { unique_key = "u", on_conflict = "replace" })
      push(q, "a", 2, {})
      push(q, "a", 3, { unique_key = "u", on_conflict = "replace", run_in = 3600 })
      push(q, "a", 4, {})
      q:close()
      local r = rows(env)
      assert.equal(3, #r)
      assert.is_true(null(r[1].tag), "the job due in an hour tagged " .. tostring(r[1].tag))
      assert.equal(1, r[2].tag)         -- kept
      assert.equal(2, r[3].tag)         -- behind it, not behind a tag 0 hole
    end)

    it("takes the key at its name's own path", function()
      env:exec(env.backend == "postgres"
        and "INSERT INTO fair_names (name, path) VALUES ('rf.w', '{m}')"
        or "INSERT INTO fair_names (name, path) VALUES ('rf.w', '$.m')")
      local q = jr.client(env)
      assert(q:push("rf.w", { t = "a", m = "x", n = 1 },
                    { queue = "fq", unique_key = "u", on_conflict = "replace" }))
      assert(q:push("rf.w", { t = "a", m = "y", n = 2 },
                    { queue = "fq", unique_key = "u", on_conflict = "replace" }))
      q:close()
      local r = rows(env)
      assert.equal(1, #r)
      assert.equal("y", r[1].k)
      assert.equal(0, r[1].tag)
    end)

    it("takes the limit key of its new payload", function()
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } },
                   ["rf.w"] = { key = "payload.t", per_key = { concurrency = 1 } } }]])
      local out, err, code = env:cli("migrate")
      assert.equal(0, code, out .. err)
      local q = jr.client(env)
      push(q, "a", 1, { unique_key = "u", on_conflict = "replace" })
      push(q, "b", 2, { unique_key = "u", on_conflict = "replace" })
      push(q, "a", 3, { sequence = "s", on_conflict = "replace", run_in = 3600 })
      push(q, "c", 4, { sequence = "s", on_conflict = "replace" })
      push(q, "d", 5, { unique_key = "v", on_conflict = "replace" })
      push(q, "e", 6, { unique_key = "v", on_conflict = "replace", key = "given" })
      q:close()
      local r = rows(env)
      assert.equal(3, #r)
      assert.same({ "b", "b" }, { r[1].k, r[1].lk })
      assert.same({ "c", "c" }, { r[2].k, r[2].lk })
      assert.same({ "e", "given" }, { r[3].k, r[3].lk })
    end)
  end)
end
