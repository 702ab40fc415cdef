-- operations_spec: what docs/operations.md tells an operator to do, done.
-- The Prometheus rules of examples/prometheus pass `promtool check rules`
-- and their unit tests, and name only metrics the runner exports; the
-- Grafana dashboard of examples/grafana has a dashboard's shape, and the
-- rules and it name only metrics a real runner's /metrics holds; the
-- SQLite backups (sqlite3 .backup, VACUUM INTO) taken under a running
-- runner open with every job; examples/migrate/sqlite-to-postgres.sh moves
-- a database with jobs in every state to PostgreSQL (when spec/run started
-- one), refuses a file a runner holds and a schema that has jobs; make
-- run's package list (DEB_RUN_PKGS) holds what the build needs and no
-- test tool, make deps adds them.
local h = require "jr"
local cjson = require "cjson"
local q = h.quote

local PROM = h.root .. "/examples/prometheus"
local MOVE = h.root .. "/examples/migrate/sqlite-to-postgres.sh"

local function decode(s) return cjson.decode(s) end

describe("the Prometheus rules in examples/prometheus", function()
  local has = select(3, h.sh("command -v promtool")) == 0

  it("pass promtool check rules and their unit tests", function()
    assert.is_true(has, "promtool not found (make deps installs prometheus)")
    local out, err, code = h.sh("promtool check rules " ..
      q(PROM .. "/jobrunner.rules.yml"))
    assert.equal(0, code, out .. err)
    assert.matches("SUCCESS: %d+ rules found", out .. err)
    out, err, code = h.sh(("cd %s && promtool test rules " ..
      "jobrunner.rules.test.yml"):format(q(PROM)))
    assert.equal(0, code, out .. err)
    assert.matches("SUCCESS", out .. err)
  end)

  it("name only metrics the runner exports", function()
    local rules = assert(h.read_file(PROM .. "/jobrunner.rules.yml"))
    local src = h.sh("cat " .. q(h.root) .. "/runtime/*/*.c")
    local n = 0
    for m in rules:gmatch("jobrunner_[a-z_]+") do
      local base = m:gsub("_bucket$", ""):gsub("_count$", ""):gsub("_sum$", "")
      assert.is_truthy(src:find('"' .. base .. '[^a-z_]'),
        m .. " is not a metric the runner writes (runtime/)")
      n = n + 1
    end
    assert.is_true(n >= 10)
  end)
end)

local GRAFANA = h.root .. "/examples/grafana/jobrunner-dashboard.json"

-- The metric names in text: jobrunner_* names.
local function names_in(text, into)
  for m in text:gmatch("jobrunner_[a-z_]+") do into[m] = true end
  return into
end

describe("the Grafana dashboard in examples/grafana", function()
  it("loads and has a dashboard's shape: panels with a grid place and queries", function()
    local d = cjson.decode((assert(h.read_file(GRAFANA))))
    assert.equal("string", type(d.title))
    assert.equal("string", type(d.uid))
    assert.equal("number", type(d.schemaVersion))
    assert.equal("table", type(d.panels))
    assert.equal("DS_PROMETHEUS", d.__inputs[1].name)
    local ids, queries, exprs = {}, 0, {}
    for _, p in ipairs(d.panels) do
      assert.equal("string", type(p.type))
      assert.equal("string", type(p.title))
      assert.is_nil(ids[p.id], "panel id " .. tostring(p.id) .. " twice")
      ids[p.id] = true
      for _, k in ipairs({ "h", "w", "x", "y" }) do
        assert.equal("number", type(p.gridPos[k]), p.title .. ": gridPos." .. k)
      end
      assert.is_true(p.gridPos.x + p.gridPos.w <= 24, p.title)
      if p.type ~= "row" then
        assert.equal("${DS_PROMETHEUS}", p.datasource.uid, p.title)
        assert.is_true(#p.targets > 0, p.title .. ": no query")
        local refs = {}
        for _, t in ipairs(p.targets) do
          assert.equal("string", type(t.expr), p.title)
          assert.matches("jobrunner_", t.expr)
          assert.is_nil(refs[t.refId], p.title .. ": refId twice")
          refs[t.refId] = true
          queries = queries + 1
          exprs[#exprs + 1] = t.expr
        end
      end
    end
    assert.is_true(queries >= 15)
    for _, want in ipairs({ 'jobrunner_queue_jobs{job=~"$job", state="ready"}',
                            "jobrunner_queue_oldest_ready_seconds",
                            'outcome=~"failed|dead"', 'state="dead"',
                            "jobrunner_lease_rescues_total" }) do
      assert.truthy(table.concat(exprs, "\n"):find(want, 1, true), want)
    end
  end)
end)

describe("the metrics the examples name", function()
  local env = h.test_env("sqlite")

  it("are all in a real runner's /metrics", function()
    local H = require "jrhttp"
    env:script("ok", "return function() end")
    env:script("bad", "return function() error('no') end")
    local base = H.start(env, "defaults = { max_retries = 0 }")
    local ok, bad = env:push("ok"), env:push("bad")
    env:push("nobody")
    env:wait_state(bad, "dead", 30)
    h.wait_for(function() return env:job(ok) == nil end, 30, "ok done")
    local code, text = H.req(base .. "/metrics", { token = true })
    assert.equal(200, code)
    local exported = {}
    for line in text:gmatch("[^\n]+") do
      local m = line:match("^# TYPE (jobrunner_[a-z_]+) ") or line:match("^(jobrunner_[a-z_]+)")
      if m then exported[m] = true end
    end
    assert.is_true(exported.jobrunner_queue_oldest_ready_seconds)
    local used = names_in(assert(h.read_file(GRAFANA)), {})
    names_in(assert(h.read_file(PROM .. "/jobrunner.rules.yml")), used)
    local n = 0
    for m in pairs(used) do
      local family = m:gsub("_bucket$", ""):gsub("_count$", ""):gsub("_sum$", "")
      assert.is_true(exported[m] or exported[family] or false,
        m .. " is not in the runner's /metrics")
      n = n + 1
    end
    assert.is_true(n >= 15)
  end)
end)

describe("SQLite backups", function()
  local env = h.test_env("sqlite")

  it("sqlite3 .backup and VACUUM INTO copy every job while a runner runs", function()
    env:script("slow", "return function(job) os.execute('sleep 0.2') end")
    local ids = {}
    for i = 1, 20 do ids[i] = env:push("later", ('{"i":%d}'):format(i), "--in", "1h") end
    local p = env:start()
    for _ = 1, 5 do env:push("slow") end
    local db = env:sqlite_path()
    local b1, b2 = env.dir .. "/backup.db", env.dir .. "/vacuum.db"
    local _, err, code = h.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(q(db),
      q(".backup " .. b1)))
    assert.equal(0, code, err)
    _, err, code = h.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(q(db),
      q("VACUUM INTO '" .. b2 .. "'")))
    assert.equal(0, code, err)
    env:stop(nil, p)
    for _, b in ipairs({ b1, b2 }) do
      assert.equal("ok\n", (h.sh("sqlite3 " .. q(b) .. " 'PRAGMA integrity_check'")))
      local out, lerr, lcode = h.sh(("%s --backend %s list --name later " ..
        "--limit 0 --json"):format(q(h.bin), q("sqlite:" .. b)))
      assert.equal(0, lcode, lerr)
      local got = {}
      for _, j in ipairs(decode(out)) do got[#got + 1] = j.id end
      table.sort(got)
      assert.same(ids, got)
    end
  end)
end)

-- Every job as list --json gives it, with its payload (show), by id, and
-- the queues as queue list --json gives them.
local function snapshot(env)
  local function cli(args)
    local out, err, code = h.sh(("cd %s && %s -c %s %s"):format(q(env.dir),
      q(h.bin), q(env.config_file), args))
    assert(code == 0, args .. ": " .. err)
    return decode(out)
  end
  local jobs = {}
  for _, j in ipairs(cli("list --limit 0 --json")) do
    j.payload = cli(("show %d --json"):format(j.id)).payload
    jobs[j.id] = j
  end
  return jobs, cli("queue list --json")
end

if h.pg_url then
  describe("sqlite-to-postgres.sh", function()
    local lite, pg

    before_each(function()
      lite = h.env("sqlite", { config = 'defaults = { max_retries = 0 }, ' ..
        'retention = { completed = 3600, cancelled = 3600 }, ' ..
        'schedules = { { name = "tick", every = "1s" } }' })
      pg = h.env("postgres")
    end)

    after_each(function()
      lite:cleanup()
      pg:cleanup()
    end)

    local function move(schema)
      return h.sh(("JOBRUNNER=%s sh %s %s %s %s"):format(q(h.bin), q(MOVE),
        q(lite:sqlite_path()), q(h.pg_url), q(schema or pg.schema)))
    end

    it("moves jobs in every state, queues, fires and keys; ids go on", function()
      lite:script("tick", "return function() end")
      lite:script("ok", "return function() end")
      lite:script("bad", "return function() error('boom at ' .. 42) end")
      lite:script("wait", "return function() end")
      local done = lite:push("ok")
      local dead = lite:push("bad", '{"why":"x"}')
      local p = lite:start()
      lite:wait_state(done, "completed")
      lite:wait_state(dead, "dead")
      h.wait_for(function()
        return lite:query("SELECT count(*) AS n FROM schedule_fires")[1].n > 0
      end, 10, "a schedule fire")
      lite:stop(nil, p)
      lite:push("wait", '{"s":"line\\nbreak \\"q\\" \\\\ é","n":[1,2.5,null]}')
      lite:push("wait", "{}", "--in", "1h", "--priority", "3", "--queue", "mail")
      local uniq = lite:push("wait", "{}", "--unique-key", "u1",
        "--unique-for", "1h")
      local cancelled = lite:push("wait")
      assert(select(3, lite:cli("cancel", tostring(cancelled))) == 0)
      assert(select(3, lite:cli("queue", "pause", "mail")) == 0)
      -- an encrypted payload (stored as its stub and bytes) in the paused
      -- queue: it moves, and opens on PostgreSQL
      local kf = lite.dir .. "/keys"
      assert(select(3, lite:cli("keys", "new", kf)) == 0)
      local function keyed(env)
        local f = env.dir .. "/keyed.lua"
        h.write_file(f, ("return { backend = %q, %s scripts = %q, " ..
          "encryption = { key_file = %q } }"):format(env.url, env.schema and
          ("schema = %q,"):format(env.schema) or "", env.dir .. "/scripts", kf))
        return f
      end
      local out0, err0, code0 = h.sh(("%s -c %s push wait '{\"secret\":\"tiger\"}' " ..
        "--queue mail"):format(q(h.bin), q(keyed(lite))))
      assert.equal(0, code0, err0)
      local sealed = assert(tonumber(out0:match("%d+")))
      assert.equal(1, lite:query("SELECT count(*) AS n FROM jobs WHERE id = " ..
        sealed .. " AND sealed IS NOT NULL")[1].n)
      local before, queues = snapshot(lite)

      local out, err, code = move()
      assert.equal(0, code, out .. err)
      assert.matches("jobs: %d+ rows", out)
      local states = {}
      for _, j in pairs(before) do states[j.state] = true end
      assert.same({ queued = true, dead = true, completed = true,
                    cancelled = true }, states)
      local after, pqueues = snapshot(pg)
      assert.same(before, after)
      assert.same(queues, pqueues)
      out = h.sh(("%s -c %s show %d --json"):format(q(h.bin), q(keyed(pg)), sealed))
      assert.equal("tiger", decode(out).payload.secret)
      local fires = lite:query("SELECT count(*) AS n FROM schedule_fires")[1].n
      assert.equal(fires, pg:query(
        "SELECT count(*) AS n FROM " .. pg.schema .. ".schedule_fires")[1].n)
      -- the held key is held, new ids come after the old ones
      out = pg:cli("push", "wait", "{}", "--unique-key", "u1")
      assert.equal(uniq .. " duplicate", (out:gsub("%s+$", "")))
      assert.is_true(pg:push("wait") > cancelled)
      -- and a runner on PostgreSQL runs what was queued
      pg:script("wait", "return function() end")
      pg:script("tick", "return function() end")
      local p2 = pg:start()
      h.wait_for(function() return pg:count("queued") == 2 end, 20,
        "the moved jobs run (the paused queue's two stay)")
      pg:stop(nil, p2)
    end)

    it("refuses a file a runner holds, and a schema that has jobs", function()
      lite:script("wait", "return function() os.execute('sleep 30') end")
      local id = lite:push("wait")
      local p = lite:start()
      lite:wait_state(id, "running")
      local out, err, code = move()
      assert.are_not.equal(0, code)
      assert.matches("a runner is running %(pid %d+", out .. err)
      -- a killed runner leaves its pid file (a dead pid) and its job
      -- running: the job still refuses
      lite:stop("KILL", p)
      out, err, code = move()
      assert.are_not.equal(0, code)
      assert.matches("1 jobs are running: stop every runner on it first", out .. err)
      -- nothing was made in PostgreSQL
      assert.equal(0, pg:query("SELECT count(*) AS n FROM " ..
        "information_schema.tables WHERE table_schema = '" .. pg.schema ..
        "'")[1].n)
      -- the job comes back when its lease is over; then the schema has one
      lite:exec("UPDATE jobs SET state = 'queued', locked_by = NULL, " ..
        "locked_until = NULL")
      pg:push("other")
      out, err, code = move()
      assert.are_not.equal(0, code)
      assert.matches("already holds 1 jobs: move into an empty schema", out .. err)
    end)
  end)
end

describe("the set-up (Makefile)", function()
  -- the packages a target's apt_install names, from make -n
  local function pkgs(target)
    local out = h.sh(("cd %s && env -u MAKEFLAGS make -s -n %s"):format(
      q(h.root), target))
    local set = {}
    for list in out:gmatch("for p in ([^;]+); do") do
      for p in list:gmatch("%S+") do set[p] = true end
    end
    return set
  end

  it("make run installs what building and running need, no test tool", function()
    local run = pkgs("deps-run")
    for _, p in ipairs({ "gcc", "make", "pkg-config", "liblua5.4-dev",
                         "libsqlite3-dev", "libpq-dev", "libevent-dev",
                         "tzdata" }) do
      assert.is_true(run[p], p .. " missing from DEB_RUN_PKGS")
    end
    for _, p in ipairs({ "lua-busted", "postgresql-15", "chromium",
                         "prometheus", "nodejs", "clang", "lintian",
                         "debhelper", "devscripts", "luarocks" }) do
      assert.is_nil(run[p], p .. " is a test tool in DEB_RUN_PKGS")
    end
    -- what debian/control builds with is what make run installs
    local control = assert(h.read_file(h.root .. "/debian/control"))
    local bd = control:match("Build%-Depends:(.-)\n%S")
    for p in bd:gmatch("([%w%.%-+]+)[^,]*") do
      if p ~= "debhelper-compat" then
        assert.is_true(run[p], p .. " (Build-Depends) not in DEB_RUN_PKGS")
      end
    end
  end)

  it("make test adds the test tools", function()
    local all = pkgs("deps-test")
    for _, p in ipairs({ "lua-busted", "lua-cjson", "postgresql-15",
                         "chromium", "prometheus", "nodejs", "lintian",
                         "debhelper", "devscripts", "gcc" }) do
      assert.is_true(all[p], p .. " missing from make deps")
    end
  end)
end)
