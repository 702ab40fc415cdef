-- json_redteam_spec.lua - what a careless producer or handler can hand the
-- runner's JSON paths: job.parents (and job.batch) reach a handler with
-- inflight above 1 as they reach a plain one, and a parents column a plain
-- SQL statement filled with something else than an object of job ids ends
-- the job dead with the reason, never kills its worker; on both backends.
-- A flow's document is JSON by the grammar (its numbers were read by
-- strtod: 0x10, 1. and 01 taken, a number past 63 characters refused) and
-- a job's refusal says once which job and why.
-- Floats are written with a '.' under a LC_NUMERIC whose point is a comma
-- (printf's: [1.5] was the valid [1,5]).
-- A text the worker sends for a text column (an error, a reason)
-- holds UTF-8 alone: a handler's error with a byte that is not UTF-8, or a
-- message cut inside a character, made PostgreSQL refuse the completion
-- and the job dead at once.
-- A flow's payload may be nested as deep as a push's (1000; 60 before).
-- A child and a batch callback read a parent's result and a batch payload
-- nested 1000 deep (the most the encoder and the push check take), though
-- job.parents and the callback's payload put them two levels deeper (the
-- callback was refused on SQLite, and its member's end never recorded).
-- A value whose keys a finalizer adds or removes while json.encode reads
-- it gives its text, never a corrupt heap.
local jr = require "jr"

-- the handler returns what it sees of job.parents and job.batch
local SEES = [[
  return { inflight = INFLIGHT, max_retries = 0, handle = function(job)
    local ids = {}
    for id, p in pairs(job.parents or {}) do
      ids[#ids + 1] = math.type(id) .. ":" .. tostring(id) .. "=" .. p.state ..
        "/" .. tostring(type(p.result) == "table" and p.result.n or p.result)
    end
    table.sort(ids)
    return { parents = table.concat(ids, " "), batch = job.batch or false }
  end }]]

local function result(env, id)
  return jr.wait_for(function()
    local r = env:query("SELECT state, result, last_error FROM jobs WHERE id = " .. id)[1]
    return r and r.state ~= "queued" and r.state ~= "running" and
      r.state ~= "waiting" and r
  end, 30, "job " .. id .. " ended")
end

-- Returns a table of five keys; while it is encoded, finalizers run by a
-- collector that never pauses add 100 keys (ADD) or remove them (else).
local SHIFTING = [[
  local function shifting(add)
    local t = {}
    for i = 1, 5 do t[("k%d"):rep(8):format(i, i, i, i, i, i, i, i)] = i end
    local n = 0
    local function arm()
      setmetatable({}, { __gc = function()
        n = n + 1
        if n > 200 then return end
        for i = 1, 100 do
          if add then t["g" .. n .. "_" .. i] = i else t[next(t) or 1] = nil end
        end
        arm()
      end })
    end
    collectgarbage("incremental", 0, 1000, 0)
    arm()
    return t
  end]]

-- A folder with de_DE.UTF-8 made by localedef (for LOCPATH), or nil.
local function comma_locale(dir)
  local _, _, code = jr.sh("localedef -i de_DE -f UTF-8 " .. jr.quote(dir .. "/de_DE.UTF-8"))
  return code == 0 and dir or nil
end

-- a stored result: JSON text on SQLite, decoded by the query on PostgreSQL
local function value(env, r)
  if env.backend == "postgres" then return r.result end
  return require("cjson").decode(r.result)
end

describe("json.encode", function()
  it("writes floats with a point under a numeric locale with a comma", function()
    local dir = jr.sh("mktemp -d /tmp/jrspec.XXXXXX"):gsub("%s+$", "")
    if not comma_locale(dir) then
      os.execute("rm -rf " .. jr.quote(dir))
      return pending("localedef cannot make de_DE.UTF-8 here")
    end
    jr.write_file(dir .. "/enc.lua", ("package.cpath = %q\n"):format(package.cpath) .. [[
      local json = require("jobrunner.client").json
      assert(os.setlocale("de_DE.UTF-8", "numeric"))
      print(tostring(0.5), json.encode({ 1.5, { x = 0.25, y = 1e300 } }))]])
    local out, err = jr.sh("LOCPATH=" .. jr.quote(dir) .. " lua5.4 " .. jr.quote(dir .. "/enc.lua"))
    os.execute("rm -rf " .. jr.quote(dir))
    assert.equal('0,5\t[1.5,{"x":0.25,"y":1e+300}]\n', out, err)
  end)

  it("takes a table whose keys a finalizer changes meanwhile", function()
    local file = os.tmpname()
    jr.write_file(file, ("package.cpath = %q\n"):format(package.cpath) .. SHIFTING .. [[
      local json = require("jobrunner.client").json
      local made = 0
      for round = 1, 400 do
        local v, err = json.encode(shifting(round % 2 == 0))
        assert(v, err)
        made = made + (v:match("^{.*}$") and 1 or 0)
      end
      print("encoded " .. made)]])
    local out, err, code = jr.sh("lua5.4 " .. jr.quote(file))
    os.remove(file)
    assert.equal("encoded 400\n", out, err)
    assert.equal(0, code)
  end)
end)

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " json red team:", function()
    local env = jr.test_env(backend)

    for _, inflight in ipairs({ 1, 4 }) do
      it("gives job.parents and job.batch to a handler with inflight " .. inflight, function()
        env:script("parent", [[return function(job) return { n = job.payload.n } end]])
        env:script("child", (SEES:gsub("INFLIGHT", inflight)))
        local a = env:push("parent", '{"n":9007199254740993}')
        local b = env:push("parent", '{"n":-9223372036854775808}')
        local c = env:push("child", "{}", "--after", a .. "," .. b)
        env:start()
        local r = result(env, c)
        assert.equal("completed", r.state)
        local got = value(env, r)
        assert.equal(("integer:%d=completed/9007199254740993 " ..
          "integer:%d=completed/-9223372036854775808"):format(a, b), got.parents)
        jr.write_file(env.dir .. "/flow.json", '{"jobs":[{"ref":"m","name":"child"}],' ..
          '"batch":{"on_complete":"parent"}}')
        local out, err, code = env:cli("push-flow", env.dir .. "/flow.json")
        assert.equal(0, code, err)
        local child = assert(tonumber(out:match("m (%d+)")), out)
        r = result(env, child)
        assert.equal("completed", r.state)
        assert.is_number(value(env, r).batch)
      end)
    end

    for _, inflight in ipairs({ 1, 4 }) do
      it("ends dead a job whose parents SQL set to no object of ids, inflight " .. inflight, function()
        env:script("child", (SEES:gsub("INFLIGHT", inflight)))
        local bad = {
          ['[1,2]'] = "job.parents cannot be decoded: key 1 is not a job id",
          ['{"x":{"state":"completed"}}'] = "job.parents cannot be decoded: key 'x' is not a job id",
          ['{"12abc":{"state":"completed"}}'] = "job.parents cannot be decoded: key '12abc' is not a job id",
          ['5'] = "job.parents cannot be decoded: not an object",
        }
        local good = env:push("child", "{}")   -- makes the schema
        local ids = {}
        for text, want in pairs(bad) do
          env:exec(("INSERT INTO jobs (name, payload, parents) VALUES ('child', '{}', '%s')"):format(text))
          ids[env:query("SELECT max(id) AS id FROM jobs")[1].id] = want
        end
        env:start()
        for id, want in pairs(ids) do
          local r = result(env, id)
          assert.equal("dead", r.state)
          assert.equal(want, r.last_error)
        end
        assert.equal("completed", result(env, good).state)
        assert.is_nil(env:log():find("worker died"), env:log())
        assert.is_nil(env:log():find("unprotected"), env:log())
      end)
    end

    it("stores a float result with a point when the handler set a comma locale", function()
      if not comma_locale(env.dir) then return pending("no localedef de_DE.UTF-8") end
      env:script("loc", [[
        local jobrunner = require "jobrunner"
        return { inflight = 2, handle = function(job)
          assert(os.setlocale("de_DE.UTF-8", "numeric"))
          jobrunner.push("loc", { 2.5 }, { run_in = 3600 })
          return { 1.5, tostring(0.5) }
        end }]])
      local id = env:push("loc", "{}")
      env:start("LOCPATH=" .. jr.quote(env.dir))
      local r = result(env, id)
      assert.equal("completed", r.state, r.last_error)
      assert.same({ 1.5, "0,5" }, value(env, r))
      local rows = env:query("SELECT payload FROM jobs WHERE id > " .. id)
      assert.equal(1, #rows)
      local p = rows[1].payload
      assert.same({ 2.5 }, type(p) == "string" and require("cjson").decode(p) or p)
    end)

    it("gives a batch callback its members' results and payload exact", function()
      env:script("member", [[
        local jobrunner = require "jobrunner"
        return function(job)
          local k = job.payload.k
          if k == 1 then return { 9007199254740993, math.mininteger, 0.1, -0.0 } end
          if k == 2 then return { e = jobrunner.array(), o = {}, n = jobrunner.null } end
          if k == 3 then return "\u{2028}é\"\\/\t" end
          return 1e300
        end]])
      env:script("done", [[
        local jobrunner = require "jobrunner"
        return function(job)
          local r, t = job.payload.results, {}
          for _, id in ipairs(job.payload.members) do
            t[#t + 1] = jobrunner.json.encode(r[tostring(id)])
          end
          t[#t + 1] = jobrunner.json.encode(job.payload.payload)
          return table.concat(t, " ")
        end]])
      local jobs = {}
      for k = 1, 4 do
        jobs[k] = ('{"ref":"m%d","name":"member","payload":{"k":%d}}'):format(k, k)
      end
      jr.write_file(env.dir .. "/flow.json", '{"jobs":[' .. table.concat(jobs, ",") ..
        '],"batch":{"on_complete":"done","results":true,' ..
        '"payload":{"big":-9223372036854775808,"f":2.5e-7,"s":"\\ud83d\\ude00"}}}')
      local out, err, code = env:cli("push-flow", env.dir .. "/flow.json")
      assert.equal(0, code, err)
      env:start()
      local r = jr.wait_for(function()
        return env:query("SELECT state, result FROM jobs WHERE name = 'done' AND " ..
          "state = 'completed'")[1]
      end, 30, "callback done")
      assert.equal('[9007199254740993,-9223372036854775808,0.1,0] ' ..
        '{"e":{},"n":null,"o":{}} "\u{2028}é\\"\\\\/\\t" 1e+300 ' ..
        '{"big":-9223372036854775808,"f":2.5e-07,"s":"😀"}', value(env, r))
    end)

    it("keeps a handler's error and reason to UTF-8", function()
      env:script("u", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 1, handle = function(job)
          local k = job.payload.k
          if k == "error" then error("bad \xff byte", 0) end
          if k == "discard" then jobrunner.discard("gone \xc3") end
          return { ["a" .. ("é"):rep(40)] = print }
        end }]])
      local err = env:push("u", '{"k":"error"}')
      local dis = env:push("u", '{"k":"discard"}')
      local cut = env:push("u", '{"k":"cut"}', "--result-ttl", "1h")
      env:start()
      local r = jr.wait_for(function()
        local row = env:job(err)
        return row.attempts == 1 and row.state == "queued" and row
      end, 30, "job retried")
      assert.equal("bad \u{FFFD} byte\n", r.last_error:match("^[^\n]*\n"))
      r = result(env, dis)
      assert.equal("dead", r.state)
      assert.equal("gone \u{FFFD}", r.last_error)
      r = result(env, cut)
      assert.equal("completed", r.state)
      assert.equal("result not stored: result.a" .. ("é"):rep(31) .. "\u{FFFD}: cannot " ..
        "encode a function (JSON has tables, strings, numbers, booleans and " ..
        "jobrunner.null)", r.last_error)
    end)

    it("takes a flow whose payloads are nested as deep as a push's", function()
      env:script("deep", [[
        return function(job)
          local d, v = 0, job.payload
          while type(v) == "table" do d, v = d + 1, v[1] end
          return { depth = d }
        end]])
      local deep = ("["):rep(1000) .. "1" .. ("]"):rep(1000)
      jr.write_file(env.dir .. "/flow.json", '{"jobs":[{"ref":"p","name":"deep","payload":' ..
        deep .. '}],"batch":{"on_complete":"deep","payload":[[[1]]]}}')
      local out, err, code = env:cli("push-flow", env.dir .. "/flow.json")
      assert.equal(0, code, err)
      local id = assert(tonumber(out:match("p (%d+)")), out)
      jr.write_file(env.dir .. "/flow.json", '{"jobs":[{"name":"deep","payload":[' ..
        deep .. ']}]}')
      out, err, code = env:cli("push-flow", env.dir .. "/flow.json")
      assert.equal(2, code, out)
      assert.matches("^jobrunner: flow: invalid JSON at byte %d+: nested deeper than 1003\n$", err)
      env:start()
      local r = result(env, id)
      assert.equal("completed", r.state, r.last_error)
      assert.same({ depth = 1000 }, value(env, r))
    end)

    it("gives a child and a callback results and payloads nested 1000 deep", function()
      env:script("deep", [[
        return function(job)
          local t = {}
          for _ = 2, 1000 do t = { t } end
          return t
        end]])
      -- the depths of the parents' results, the batch results, the batch payload
      env:script("count", [[
        return function(job)
          local function depth(v)
            local d = 0
            if type(v) ~= "table" then return 0 end
            for _, x in pairs(v) do d = math.max(d, depth(x)) end
            return d + 1
          end
          local parents, results = {}, {}
          for _, p in pairs(job.parents or {}) do parents[#parents + 1] = depth(p.result) end
          for _, x in pairs(job.payload.results or {}) do results[#results + 1] = depth(x) end
          table.sort(results)
          return { parents = parents, results = results,
                   payload = job.payload.payload and depth(job.payload.payload) or false }
        end]])
      local deep = ("["):rep(1000) .. ("]"):rep(1000)
      jr.write_file(env.dir .. "/flow.json", '{"jobs":[{"ref":"p","name":"deep"},' ..
        '{"ref":"c","name":"count","after":["p"]}],' ..
        '"batch":{"on_complete":"count","results":true,"payload":' .. deep .. '}}')
      local out, err, code = env:cli("push-flow", env.dir .. "/flow.json")
      assert.equal(0, code, err)
      local child = assert(tonumber(out:match("c (%d+)")), out)
      env:start()
      local r = result(env, child)
      assert.equal("completed", r.state, r.last_error)
      assert.same({ parents = { 1000 }, results = {}, payload = false }, value(env, r))
      r = jr.wait_for(function()
        return env:query("SELECT state, result, last_error FROM jobs WHERE id > " .. child ..
          " AND state <> 'queued' AND state <> 'running'")[1]
      end, 30, "callback ended")
      assert.equal("completed", r.state, r.last_error)
      assert.same({ parents = {}, results = { 2, 1000 }, payload = 1000 }, value(env, r))
    end)

    it("reads a flow's numbers as JSON does, and names a refused job once", function()
      env:config("max_payload = 200")
      env:script("a", [[return function(job) return { t = math.type(job.payload.n) } end]])
      env:push("a", "{}")
      local function flow(doc)
        local file = env.dir .. "/flow.json"
        jr.write_file(file, doc)
        return env:cli("push-flow", file)
      end
      for _, p in ipairs({ "0x10", "1.", "01", "-inf", "-" }) do
        local out, err, code = flow('{"jobs":[{"name":"a","priority":' .. p .. "}]}")
        assert.equal(2, code, p .. ": " .. out)
        assert.matches("^jobrunner: flow: invalid JSON at byte %d+: ", err)
      end
      local long = "1" .. ("0"):rep(99)
      local out, err, code = flow('{"jobs":[{"ref":"r","name":"a","priority":-1E+1,' ..
        '"payload":{"n":' .. long .. "}}]}")
      assert.equal(0, code, err)
      local id = assert(tonumber(out:match("r (%d+)")), out)
      local row = env:query("SELECT priority FROM jobs WHERE id = " .. id)[1]
      assert.equal(-10, row.priority)
      _, err, code = flow('{"jobs":[{"ref":"r","name":"a","payload":{"s":"\\ud800"}}]}')
      assert.equal(2, code)
      assert.equal("jobrunner: flow: job 'r': job 'a': invalid JSON payload: byte 7: " ..
        "\\ud800: a high surrogate without a low one\n", err)
      local ok, msg = jr.client(env):flow({ jobs = { { ref = "r", name = "a",
        payload = { s = ("x"):rep(300) } } } })
      assert.is_nil(ok)
      assert.equal("flow: job 'r': job 'a': payload of 308 bytes is over the limit " ..
        "of 200 (max_payload)", msg)
      env:start()
      assert.same({ t = "float" }, value(env, result(env, id)))
    end)
  end)
end
