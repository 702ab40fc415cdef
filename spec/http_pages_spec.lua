-- http_pages_spec.lua - the JSON API behind the dashboard's pages, on each
-- backend: the job list paged by keyset (before_id, after_id) with no job
-- skipped or repeated, the payload filter (payload.a.b = VALUE) typed as
-- JSON and refused with the reason when malformed, bulk cancel, retry and
-- purge on what a filter selects (counted, never without a filter), and
-- GET /api/limits.
local jr = require "jr"
local H = require "jrhttp"
local client = require "jobrunner"
local cjson = require "cjson"

local function url_escape(s)
  return (s:gsub("[^%w%-_.~]", function(c) return ("%%%02X"):format(c:byte()) end))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " dashboard API:", function()
    local env = jr.test_env(backend)

    local function push_many(n, make)
      local c = assert(client.open(env.url, { schema = env.schema }))
      local items = {}
      for i = 1, n do items[i] = make(i) end
      local ids = assert(c:push_many(items))
      c:close()
      return ids
    end

    it("pages through every job by keyset, both ways, with no job skipped or repeated", function()
      local base = H.start(env, "")
      local ids = push_many(230, function(i) return { "page", { i = i } } end)
      local seen, pages, before = {}, 0, nil
      repeat
        local list = H.json(base .. "/api/jobs?limit=50" ..
          (before and ("&before_id=" .. before) or ""))
        for k, j in ipairs(list) do
          assert.is_nil(seen[j.id], "job " .. j.id .. " twice")
          seen[j.id] = true
          if k > 1 then assert.is_true(j.id < list[k - 1].id) end
        end
        pages = pages + 1
        before = #list > 0 and ("%d"):format(list[#list].id) or nil
      until #list < 50
      assert.equal(5, pages)
      for _, id in ipairs(ids) do assert.is_true(seen[id], "job " .. id .. " missed") end
      -- a page back: after_id gives the 50 above it, newest first
      local back = H.json(base .. ("/api/jobs?limit=50&after_id=%d"):format(ids[100]))
      assert.equal(50, #back)
      assert.equal(ids[150], back[1].id)
      assert.equal(ids[101], back[50].id)
      local code, body = H.req(base .. "/api/jobs?before_id=5&after_id=2", { token = true })
      assert.equal(400, code)
      assert.matches("before_id or after_id", body)
      code, body = H.req(base .. "/api/jobs?before_id=x1", { token = true })
      assert.equal(400, code)
      assert.matches("before_id 'x1': want a job id", body, 1, true)
    end)

    it("filters on a payload field as typed JSON, and says what is wrong with a bad filter", function()
      local base = H.start(env, "")
      push_many(60, function(i)
        return { "f", { user_id = i % 3, name = "u" .. (i % 3),
                        deep = { ok = i % 2 == 0 }, s = tostring(i % 3) } }
      end)
      local function count(where)
        return #H.json(base .. "/api/jobs?limit=1000&where=" .. url_escape(where))
      end
      assert.equal(20, count("payload.user_id = 1"))
      assert.equal(20, count("payload.user_id=1.0"))
      assert.equal(0, count('payload.user_id = "1"'))     -- a string is not the number
      assert.equal(20, count('payload.s = "1"'))
      assert.equal(20, count("payload.name = u2"))         -- a bare word is a string
      assert.equal(30, count("payload.deep.ok = true"))
      assert.equal(30, count("payload.deep.ok = false"))
      assert.equal(0, count("payload.missing = null"))
      -- with the other filters
      assert.equal(20, #H.json(base .. "/api/jobs?limit=1000&name=f&state=ready&where=" ..
        url_escape("payload.user_id = 0")))
      for where, why in pairs({
        ["user_id = 1"] = "byte 1: the path starts with 'payload'",
        ["payload = 1"] = "expected '.KEY' after 'payload'",
        ["payload.user-id = 1"] = "expected '=' after the path",
        ["payload.1a = 1"] = "a key starts with a letter",
        ["payload.a > 1"] = "expected '=' after the path (the only operator)",
        ["payload.a ="] = "expected a value after '='",
        ["payload.a = {\"x\":1}"] = "quote a value holding this character",
        ['payload.a = "x'] = "byte 13",
        ["payload.a = 1x"] = "byte 13",
        ["payload.a'; DROP TABLE jobs; -- = 1"] = "expected '=' after the path",
      }) do
        local code, body = H.req(base .. "/api/jobs?where=" .. url_escape(where),
          { token = true })
        assert.equal(400, code, where)
        assert.matches(why, body, 1, true)
        assert.matches("payload filter", body, 1, true)
      end
      assert.equal(60, env:count())
    end)

    it("bulk-cancels, retries and purges what a filter selects, counted, never without a filter", function()
      env:script("dies", 'return function(job) error("no") end')
      local base = H.start(env, "defaults = { max_retries = 0 }")
      push_many(1500, function(i) return { "bulk", { user_id = i % 2 } } end)
      local dead = push_many(4, function(i) return { "dies", { user_id = i % 2 } } end)
      for _, id in ipairs(dead) do env:wait_state(id, "dead") end
      local code, body = H.req(base .. "/api/bulk/cancel", { method = "POST", token = true })
      assert.equal(400, code)
      assert.matches("give a filter", body)
      code = H.req(base .. "/api/bulk/cancel?where=" .. url_escape("payload.user_id = 1"),
        { method = "POST" })
      assert.equal(401, code)              -- writes take the token
      local r = H.json(base .. "/api/bulk/cancel?name=bulk&where=" ..
        url_escape("payload.user_id = 1"), 200, { method = "POST" })
      assert.equal(750, r.matched)
      assert.equal(750, r.cancelled)
      assert.equal(0, r.finished)
      assert.equal(750, env:count("cancelled"))
      -- again: every one is finished now
      r = H.json(base .. "/api/bulk/cancel?name=bulk&where=" ..
        url_escape("payload.user_id = 1"), 200, { method = "POST" })
      assert.equal(750, r.finished)
      assert.equal(0, r.cancelled)
      -- retry: only dead jobs; the filter picks two of the four
      r = H.json(base .. "/api/bulk/retry?where=" .. url_escape("payload.user_id = 1"),
        200, { method = "POST" })
      assert.same({ matched = 2, retried = 2 }, r)
      for _, id in ipairs(dead) do env:wait_state(id, "dead") end
      r = H.json(base .. "/api/bulk/purge?name=dies&where=" .. url_escape("payload.user_id = 0"),
        200, { method = "POST" })
      assert.same({ matched = 2, purged = 2 }, r)
      assert.equal(2, env:count("dead"))
      code, body = H.req(base .. "/api/bulk/purge?name=dies", { method = "POST", token = true,
        body = '{"ids":[1]}' })
      assert.equal(400, code)
      assert.matches("no body", body)
    end)

    it("lists each limit with its use and busiest keys, a read open on loopback without a token", function()
      local base = H.start(env, [[limits = { ["lim"] = { key = "payload.account",
        concurrency = 3, rate = "10/1s", per_key = { concurrency = 1, rate = "2/1s" } } }]],
        { token = false })
      push_many(5, function(i) return { "lim", { account = i <= 3 and "a" or "b" } } end)
      jr.wait_for(function()
        local l = H.json(base .. "/api/limits", 200, { token = false })
        return l[1] and l[1].waiting == 5
      end, 10, "the limit's waiting jobs")
      local l = H.json(base .. "/api/limits", 200, { token = false })
      assert.equal(1, #l)
      assert.equal("lim", l[1].name)
      assert.equal("account", l[1].key)
      assert.equal(3, l[1].limit.concurrency)
      assert.equal("10/1s", l[1].limit.rate)
      assert.equal(1, l[1].per_key.concurrency)
      assert.equal("2/1s", l[1].per_key.rate)
      assert.equal(0, l[1].running)
      assert.is_number(l[1].tokens)
      assert.equal("a", l[1].top_keys[1].key)
      assert.equal(3, l[1].top_keys[1].waiting)
      assert.equal("b", l[1].top_keys[2].key)
      assert.equal(2, l[1].top_keys[1].tokens)         -- no claim yet: a full bucket
      assert.equal(10, l[1].tokens)
    end)

    it("shows a busy key's tokens going down as its jobs run", function()
      env:script("lr", "return function(job) end")
      local base = H.start(env, [[limits = { ["lr"] = { key = "payload.k",
        per_key = { rate = "2/1h" } } }]], { token = false })
      push_many(3, function() return { "lr", { k = "a" } } end)
      jr.wait_for(function() return env:count("queued") == 1 end, 10, "two of three ran")
      local l = H.json(base .. "/api/limits", 200, { token = false })
      assert.equal("a", l[1].top_keys[1].key)
      assert.equal(1, l[1].top_keys[1].waiting)
      assert.is_true(l[1].top_keys[1].tokens < 0.1, "tokens " .. l[1].top_keys[1].tokens)
      assert.equal(cjson.null, l[1].tokens)              -- no rate of its own
      local out = env:cli("limits")
      assert.matches("key a%s+0 running%s+1 waiting%s+0%.0 tokens", out)
    end)
  end)
end
