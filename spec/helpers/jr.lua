-- jr.lua - drives the real jobrunner binary from specs. Each env is a temp
-- directory with its own scripts/, config file and database (a SQLite file,
-- or its own schema in the throwaway PostgreSQL cluster spec/run started),
-- so specs are isolated and pass in any order.
--
--   local jr = require "jr"
--   for _, backend in ipairs(jr.backends()) do
--     describe(backend .. ":", function()
--       local env = jr.test_env(backend)   -- a fresh env for each test
--       it("runs a job", function()
--         env:script("hello", "return function(job) end")
--         env:start()
--         local id = env:push("hello", '{"a":1}')
--         env:wait_for(function() return env:count() == 0 end)
--       end)
--     end)
--   end
local cjson = require "cjson"

local M = {}

M.root = os.getenv("JR_ROOT") or io.popen("pwd"):read("l")
M.bin = os.getenv("JOBRUNNER_BIN") or (M.root .. "/jobrunner")
M.pg_url = os.getenv("JR_PG_URL")

local function q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.quote = q

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
M.read_file = read_file

local function write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end
M.write_file = write_file

-- Runs a shell command; returns stdout, stderr, exit status.
function M.sh(cmd)
  local errf = os.tmpname()
  local p = assert(io.popen(cmd .. " 2>" .. q(errf)))
  local out = p:read("a")
  local _, _, code = p:close()
  local err = read_file(errf) or ""
  os.remove(errf)
  return out, err, code
end

-- The clock and sleep of luasystem (busted's own dependency), in this
-- process: a wait_for polls 20 times a second, and a `sleep` and a `date`
-- started each time (a shell and a program each) cost the specs beside it
-- more CPU than the runners they wait on. Without it, the programs.
local sys_ok, system = pcall(require, "system")
if not (sys_ok and system.gettime and system.sleep) then system = nil end

function M.sleep(s)
  if system then
    system.sleep(tonumber(s))
  else
    os.execute("sleep " .. s)
  end
end

function M.now()
  if system then return system.gettime() end
  local p = io.popen("date +%s.%N")
  local t = tonumber(p:read("l"))
  p:close()
  return t
end

-- The backends specs run on: sqlite always, postgres when spec/run started
-- a cluster (JR_PG_URL). JR_BACKENDS=sqlite limits them.
function M.backends()
  local only = os.getenv("JR_BACKENDS")
  local list = {}
  for _, b in ipairs({ "sqlite", "postgres" }) do
    if (b ~= "postgres" or M.pg_url) and (not only or only:find(b, 1, true)) then
      list[#list + 1] = b
    end
  end
  return list
end

-- A loopback TCP port for a runner that must keep one across restarts
-- (port 0 gives a new one at each start): drawn from /dev/urandom, not
-- math.random (busted seeds it with the second it started, so the two
-- halves of a spec started together drew the same port and the second
-- runner's listen failed), below the ephemeral ports (32768 on) that
-- clients take, and not one any socket of this machine holds now.
function M.free_port()
  local used = {}
  for _, f in ipairs({ "/proc/net/tcp", "/proc/net/tcp6" }) do
    for line in (read_file(f) or ""):gmatch("[^\n]+") do
      local p = line:match("^%s*%d+: %x+:(%x+) ")
      if p then used[tonumber(p, 16)] = true end
    end
  end
  local r = assert(io.open("/dev/urandom", "rb"))
  local port
  repeat
    port = 20000 + string.unpack("I2", r:read(2)) % 12000
  until not used[port]
  r:close()
  return port
end

-- Polls fn until it returns a true value or the deadline passes (never a
-- fixed sleep). Returns fn's value or raises with msg.
function M.wait_for(fn, timeout, msg)
  local deadline = M.now() + (timeout or 20)
  while true do
    local v = fn()
    if v then return v end
    if M.now() > deadline then
      error((msg or "condition not met") .. " within " .. (timeout or 20) .. "s", 2)
    end
    M.sleep(0.05)
  end
end

-- Waits until the file at path has content and returns it. A handler's
-- io.open(path, "w") makes the file before its write, so waiting for the
-- file alone read it empty now and then.
function M.wait_file(path, timeout, msg)
  return M.wait_for(function()
    local s = M.read_file(path)
    return s ~= nil and s ~= "" and s
  end, timeout, msg or ("content in " .. path))
end

-- Lines of a file (none if it does not exist).
function M.lines(path)
  local t = {}
  for l in (read_file(path) or ""):gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

-- Handler source defining record(file, line): appends a line to a file in
-- the runner's working directory (the env dir).
M.RECORD = [[
  local function record(file, line)
    local f = assert(io.open(os.getenv("PWD") .. "/" .. file, "a"))
    f:write(line, "\n")
    f:close()
  end
]]

-- A handler that appends its job's id to the file named by JR_LEDGER
-- (start the runner with M.ledger_env(path)), and how many ids a ledger
-- holds so far.
M.LEDGER = [[
  return function(job)
    local f = assert(io.open(os.getenv("JR_LEDGER"), "a"))
    f:write(job.id, "\n")
    f:close()
  end]]

function M.ledger_env(path)
  return "JR_LEDGER=" .. q(path)
end

function M.ledger_count(path)
  local text = read_file(path)
  return text and select(2, text:gsub("\n", "")) or 0
end

local Env = {}
Env.__index = Env

-- Waits until job id is in state; returns its row.
function Env:wait_state(id, state, timeout)
  return M.wait_for(function()
    local r = self:job(id)
    return r and r.state == state and r
  end, timeout, ("job %d %s"):format(id, state))
end

local counter = 0

function M.env(backend, opts)
  opts = opts or {}
  counter = counter + 1
  local dir = M.sh("mktemp -d /tmp/jrspec.XXXXXX"):gsub("%s+$", "")
  local env = setmetatable({ backend = backend, dir = dir, procs = {} }, Env)
  os.execute("mkdir -p " .. q(dir .. "/scripts"))
  if backend == "postgres" then
    env.schema = ("t_%d_%d"):format(os.time() % 100000, math.random(1, 1e9))
    env.url = M.pg_url
  else
    env.url = "sqlite:" .. dir .. "/jobs.db"
  end
  env:config(opts.config or "")
  return env
end

-- The preamble of a describe block in one line: a new env (M.env(backend,
-- opts)) before each test, cleaned up after it. Returns a stand-in for the
-- env of the test that runs: its fields and methods are that env's, so
-- `env:start()`, `env.dir` and `env.url = ...` work as on the env itself.
-- Call it in a describe body (it registers before_each and after_each).
function M.test_env(backend, opts)
  local busted = require "busted"   -- its API: not globals of this module
  local cur
  local proxy = {}
  busted.before_each(function() cur = M.env(backend, opts) end)
  busted.after_each(function()
    local e = cur
    cur = nil
    if e then e:cleanup() end
  end)
  local function current()
    return cur or error("jr.test_env: no env outside a test", 3)
  end
  return setmetatable(proxy, {
    __index = function(_, k)
      local v = current()[k]
      if type(v) ~= "function" then return v end
      return function(self, ...)
        if self == proxy then self = cur end
        return v(self, ...)
      end
    end,
    __newindex = function(_, k, v) current()[k] = v end,
  })
end

-- Writes jobrunner.lua: backend (and schema) plus the extra fields given
-- as Lua source, e.g. "concurrency = 2, lease = 1".
function Env:config(extra)
  local lines = { "return {", ("  backend = %q,"):format(self.url) }
  if self.schema then
    lines[#lines + 1] = ("  schema = %q,"):format(self.schema)
  end
  lines[#lines + 1] = ("  scripts = %q,"):format(self.dir .. "/scripts")
  if extra and extra ~= "" then
    lines[#lines + 1] = "  " .. extra .. ","
  end
  lines[#lines + 1] = "}"
  self.config_file = self.dir .. "/jobrunner.lua"
  write_file(self.config_file, table.concat(lines, "\n") .. "\n")
end

-- Writes scripts/NAME.lua (a.b goes to scripts/a/b.lua).
function Env:script(name, source)
  local path = self.dir .. "/scripts/" .. name:gsub("%.", "/") .. ".lua"
  os.execute("mkdir -p " .. q(path:match("^(.*)/")))
  write_file(path, source)
  return path
end

function Env:remove_script(name)
  os.remove(self.dir .. "/scripts/" .. name:gsub("%.", "/") .. ".lua")
end

-- Runs the CLI with -c config; returns stdout, stderr, status.
local function cli(env, bin, ...)
  local args = { "cd", q(env.dir), "&&", q(bin), "-c", q(env.config_file) }
  for _, a in ipairs({ ... }) do
    args[#args + 1] = q(a)
  end
  return M.sh(table.concat(args, " "))
end

function Env:cli(...)
  return cli(self, M.bin, ...)
end

-- The binary of Env:push: JR_HELPER_BIN, else the one under test. Env:push
-- makes the jobs a test needs; a test of push itself calls env:cli("push",
-- ...). make asan points it at the plain build: a sanitized process takes
-- about 22 ms more CPU to start, and the suite pushes thousands of jobs.
M.push_bin = os.getenv("JR_HELPER_BIN") or M.bin
if M.push_bin == "" then M.push_bin = M.bin end

-- Pushes a job through the CLI; returns its id. Extra args are options.
function Env:push(name, json, ...)
  local args = { "push", name }
  if json then args[#args + 1] = json end
  for _, a in ipairs({ ... }) do args[#args + 1] = a end
  local out, err, code = cli(self, M.push_bin, table.unpack(args))
  assert(code == 0, ("push %s failed (%s): %s"):format(name, tostring(code), err))
  return assert(tonumber(out:match("%d+")), "no id printed: " .. out)
end

-- Starts `jobrunner run` in the background, prefixed by extra_env (e.g.
-- "VAR=x" or a command such as setpriv). Waits for its handlers to load
-- unless opts.wait is false (it may be waiting for the database);
-- opts.args are more arguments of `run` (e.g. { "--queues", "mail" }).
-- Returns a process handle with pid, out and err files.
function Env:start(extra_env, opts)
  local n = #self.procs + 1
  local p = {
    pidfile = ("%s/runner%d.pid"):format(self.dir, n),
    statusfile = ("%s/runner%d.status"):format(self.dir, n),
    out = ("%s/runner%d.out"):format(self.dir, n),
    err = ("%s/runner%d.err"):format(self.dir, n),
  }
  local args = {}
  for _, a in ipairs(opts and opts.args or {}) do args[#args + 1] = q(a) end
  local cmd = ("cd %s && %s %s -c %s run %s >%s 2>%s"):format(q(self.dir),
    extra_env or "", q(M.bin), q(self.config_file), table.concat(args, " "),
    q(p.out), q(p.err))
  os.execute(("sh -c %s >/dev/null 2>&1 &"):format(q(
    cmd .. " & echo $! > " .. q(p.pidfile) .. "; wait $!; echo $? > " .. q(p.statusfile))))
  p.pid = M.wait_for(function()
    local s = read_file(p.pidfile)
    return s and tonumber(s:match("%d+"))
  end, 5, "runner pid")
  self.procs[n] = p
  self.proc = p
  if opts and opts.wait == false then
    return p
  end
  M.wait_for(function()
    return (read_file(p.err) or ""):find("loaded %d+ handler") or
           not self:alive(p)
  end, 20, "runner start")
  return p
end

-- A runner is alive until its last thread is gone: a killed one's main
-- thread shows as a zombie while its other threads still exit, and
-- holding its files (the pid file's lock: a runner started then found it
-- held)
function Env:alive(p)
  p = p or self.proc
  local stat = read_file("/proc/" .. p.pid .. "/stat")
  if stat == nil then return false end
  if not stat:match("^%d+ %b() [ZX]") then return true end
  local status = read_file("/proc/" .. p.pid .. "/status") or ""
  return (tonumber(status:match("\nThreads:%s*(%d+)")) or 1) > 1
end

function Env:signal(sig, p)
  p = p or self.proc
  os.execute(("kill -%s %d 2>/dev/null"):format(sig, p.pid))
end

-- Sends sig (default TERM) and waits for the runner to exit; returns its
-- exit status.
function Env:stop(sig, p, timeout)
  p = p or self.proc
  self:signal(sig or "TERM", p)
  M.wait_for(function() return not self:alive(p) end, timeout or 40, "runner exit")
  -- the shell creates the file before it writes the status into it
  local s = M.wait_for(function()
    return (read_file(p.statusfile) or ""):match("%d+")
  end, 5, "status")
  return tonumber(s)
end

function Env:log(p)
  return read_file((p or self.proc).err) or ""
end

function Env:output(p)
  return read_file((p or self.proc).out) or ""
end

-- The SQLite file of this env (its backend URL without "sqlite:").
function Env:sqlite_path()
  return (self.url:gsub("^sqlite:", ""))
end

-- Runs sql on the test PostgreSQL as psql -A -t prints it (unaligned,
-- no headers), asserting it succeeded.
function M.psql(sql)
  local out, err, code = M.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s"):format(
    q(M.pg_url), q(sql)))
  assert(code == 0, sql .. ": " .. err)
  return out
end

-- One psql session for this process's reads (Env:query): a poll of a
-- job's state through a psql of its own each time cost a shell, a psql and
-- a server process (about 6 ms of CPU), and the specs poll thousands of
-- times on the two cores their runners need. psql reads the queries from
-- one fifo and answers into another, each answer ended by a line of END.
-- Nothing here waits for a process: the runners a spec starts inherit
-- these descriptors (Lua opens files without close-on-exec), and a
-- pclose would wait for them. The shell around psql keeps the input open
-- and drains it once psql is gone, so a write never meets a fifo without
-- a reader (SIGPIPE); it ends when every copy of the writing end is
-- closed. A session that ends (the server restarted, its connection
-- terminated) is opened again at the next read, that read going through
-- a psql of its own.
local END = "__jrspec_end__"
local pgs, pgs_fails = nil, 0

local function pgs_close()
  if not pgs then return end
  pgs.w:close()
  pgs.r:close()
  pgs = nil
end

local function pgs_open()
  if pgs_fails >= 3 or os.getenv("JR_SPEC_PSQL_EACH") == "1" then return nil end
  local dir = M.sh("mktemp -d /tmp/jrpsql.XXXXXX"):gsub("%s+$", "")
  local i, o = dir .. "/in", dir .. "/out"
  if dir == "" or not os.execute(("mkfifo %s %s"):format(q(i), q(o))) then
    pgs_fails = pgs_fails + 1
    if dir ~= "" then os.execute("rm -rf " .. q(dir)) end
    return nil
  end
  local script = ("exec 3<%s; PGAPPNAME=jrspec stdbuf -oL psql -X -q -A -t " ..
    "-v ON_ERROR_STOP=0 %s <&3 >%s 2>&1; exec cat <&3 >/dev/null"):format(
    q(i), q(M.pg_url), q(o))
  os.execute("sh -c " .. q(script) .. " </dev/null >/dev/null 2>&1 &")
  local w = io.open(i, "w")         -- (both opens wait for the other end)
  local r = w and io.open(o, "r")
  os.execute("rm -rf " .. q(dir))   -- open now: the names can go
  if not r then
    if w then w:close() end
    pgs_fails = pgs_fails + 1
    return nil
  end
  pgs = { r = r, w = w, url = M.pg_url }
  return pgs
end

-- psql's answer to script, whose answer is one line that starts with
-- "R:", or nil when the session could not be had or gave no answer (no
-- error: the caller asks again elsewhere). What psql says around that
-- line (a notice, a lost connection and its reset) is not taken for it;
-- an ERROR of the script's own is the error.
local function pgs_query(script)
  if pgs and pgs.url ~= M.pg_url then pgs_close() end   -- another cluster
  local s = pgs or pgs_open()
  if not s then return nil end
  s.w:write(script, "\n\\echo ", END, "\n")
  s.w:flush()
  local value, errs = nil, {}
  while true do
    local l = s.r:read("l")
    if l == nil then                -- psql is gone: no answer
      pgs_close()
      pgs_fails = pgs_fails + 1
      return nil
    end
    if l == END then break end
    if l:sub(1, 2) == "R:" and not value then
      value = l:sub(3)
    elseif l:match("^psql:<stdin>:%d+: ERROR:") then
      errs[#errs + 1] = l
    end
  end
  if value then
    pgs_fails = 0
    return value, ""
  end
  if #errs > 0 then return "", table.concat(errs, "\n") end
  pgs_close()                       -- neither: something else went on
  pgs_fails = pgs_fails + 1
  return nil
end

-- Runs SQL and returns rows as tables. Column names as selected. On SQLite
-- the shell waits up to 10 s for a runner's write lock instead of failing
-- at once with "database is locked".
function Env:query(sql)
  local out, err, code
  if self.backend == "postgres" then
    local wrapped = ("SET search_path TO %s; SELECT coalesce(json_agg(t), '[]') FROM (%s) t"):format(self.schema, sql)
    -- in the session, the rows' JSON on one line after "R:": a raw
    -- newline in JSON text is only ever white space between its tokens
    out, err = pgs_query(("SET search_path TO %s;\nSELECT 'R:' || " ..
      "replace(coalesce(json_agg(t), '[]')::text, E'\\n', ' ') FROM (%s\n) t;")
      :format(self.schema, sql))
    if out then
      code = err == "" and 0 or 1
    else
      out, err, code = M.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s"):format(
        q(M.pg_url), q(wrapped)))
    end
  else
    out, err, code = M.sh(("sqlite3 -cmd '.timeout 10000' -json %s %s"):format(q(self:sqlite_path()), q(sql)))
    if out == "" then out = "[]" end
  end
  assert(code == 0, "query failed: " .. sql .. ": " .. err)
  return cjson.decode(out)
end

-- Runs SQL for its effect.
function Env:exec(sql)
  local err, code, _
  if self.backend == "postgres" then
    _, err, code = M.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
      q(M.pg_url), q(("SET search_path TO %s; %s"):format(self.schema, sql))))
  else
    _, err, code = M.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(q(self:sqlite_path()), q(sql)))
  end
  assert(code == 0, "exec failed: " .. sql .. ": " .. err)
end

-- All job rows, with times as epoch seconds, ordered by id.
function Env:jobs(where)
  local cols
  if self.backend == "postgres" then
    cols = "id, name, payload::text AS payload, queue, priority, state, attempts, " ..
      "max_retries, last_error, generation, locked_by, " ..
      "extract(epoch from run_at)::float8 AS run_at, " ..
      "extract(epoch from died_at)::float8 AS died_at, " ..
      "extract(epoch from now())::float8 AS db_now"
  else
    cols = "id, name, payload, queue, priority, state, attempts, max_retries, " ..
      "last_error, generation, locked_by, run_at, died_at, " ..
      "(julianday('now') - 2440587.5) * 86400.0 AS db_now"
  end
  return self:query(("SELECT %s FROM jobs %s ORDER BY id"):format(cols,
    where and ("WHERE " .. where) or ""))
end

function Env:job(id)
  return self:jobs("id = " .. math.tointeger(id))[1]
end

-- Number of rows, optionally in one state.
function Env:count(state)
  local rows = self:query("SELECT count(*) AS n FROM jobs" ..
    (state and (" WHERE state = '" .. state .. "'") or ""))
  return rows[1].n
end

-- Number of rows in any of the states given, read in one statement: two
-- counts read one after the other can miss jobs that a running one
-- pushes at its success in between (queued 0 while it runs, running 0
-- once it has ended and before its pushes are claimed).
function Env:count_in(...)
  local states = {}
  for i, s in ipairs({ ... }) do states[i] = "'" .. s .. "'" end
  return self:query("SELECT count(*) AS n FROM jobs WHERE state IN ("
    .. table.concat(states, ", ") .. ")")[1].n
end

-- 1 when no job is queued or running (one read; see count_in).
function Env:idle()
  return self:count_in("queued", "running") == 0
end

-- jobrunner stats --json, decoded.
function Env:stats()
  local out, err, code = self:cli("stats", "--json")
  assert(code == 0, "stats failed: " .. err)
  return cjson.decode(out)
end

function Env:cleanup()
  for _, p in ipairs(self.procs) do
    if self:alive(p) then
      self:signal("KILL", p)
      M.wait_for(function() return not self:alive(p) end, 10, "runner kill")
    end
  end
  if self.backend == "postgres" and self.schema then
    M.sh(("psql -X -q %s -c %s"):format(q(M.pg_url),
      q("DROP SCHEMA IF EXISTS " .. self.schema .. " CASCADE")))
  end
  if not os.getenv("JR_KEEP") then
    os.execute("rm -rf " .. q(self.dir))
  end
end

-- The schema file of ENGINE: backends/ENGINE/schema.sql in the engine's
-- folder, else backends/ENGINE.sql.
function M.schema_file(engine)
  return M.root .. "/backends/" .. engine .. "/schema.sql"
end

-- The text of the migrations up to n of ENGINE's schema file.
local function schema_upto(engine, n)
  local sql = assert(M.read_file(M.schema_file(engine)))
  local pos = 1
  while true do
    local s, e, v = sql:find("\n%-%- migration (%d+)\n", pos)
    if not s then return sql end
    if tonumber(v) > n then return sql:sub(1, s) end
    pos = e
  end
end

-- An hour ago and in an hour, as SQL expressions of env's backend (what
-- the migration specs' old rows use for run_at and leases).
function M.past_later(env)
  if env.backend == "postgres" then
    return "now() - interval '1 hour'", "now() + interval '1 hour'"
  end
  local now = "((julianday('now') - 2440587.5) * 86400.0)"
  return now .. " - 3600", now .. " + 3600"
end

-- What the migration specs compare before and after an upgrade: each
-- job's name, payload, queue, state, attempts, holder and last error by id.
function M.job_snapshot(env)
  local cjson = require "cjson"
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload), queue = r.queue,
                state = r.state, attempts = r.attempts, locked_by = r.locked_by,
                last_error = r.last_error }
  end
  return t
end

-- The stored payload of job id as its text: an encrypted payload stored
-- as its stub {"$jr_enc":"v1:ID:sealed"} and bytes (the column sealed)
-- is its envelope {"$jr_enc":"v1:ID:BASE64"} again, as a value read raw
-- and pushed again would be (docs/operations.md, "Encryption").
function M.stored_payload(env, id)
  local pg = env.backend == "postgres"
  local r = env:query(("SELECT payload%s AS p, %s AS h FROM jobs WHERE id = %d"):format(
    pg and "::text" or "", pg and "encode(sealed, 'hex')" or "hex(sealed)", id))[1]
  local h = r.h ~= nil and r.h ~= require("cjson").null and r.h or ""
  if h == "" then return r.p end
  local bytes = h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end)
  local abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  local out = {}
  for i = 1, #bytes, 3 do
    local a, b, c = bytes:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    for k = 3, 0, -1 do
      local v = (n >> (6 * k)) & 63
      out[#out + 1] = abc:sub(v + 1, v + 1)
    end
    if not c then out[#out] = "=" end
    if not b then out[#out - 1] = "=" end
  end
  local id_ = r.p:match('"v1:([^:"]+):sealed"')
  return ('{"$jr_enc":"v1:%s:%s"}'):format(id_, table.concat(out))
end

-- Makes env's database at schema n, as a release of that schema left it,
-- from the first n blocks of backends/*.sql with the engine's own client
-- (sqlite3 or psql): the migration specs upgrade it from there.
function M.make_schema(env, n)
  local f = os.tmpname()
  local cmd
  if env.backend == "postgres" then
    local qs = '"' .. env.schema .. '"'
    local text = schema_upto("postgres", n):gsub("{{schema}}", function() return qs end)
    local versions = {}
    for v = 1, n do versions[v] = ("(%d)"):format(v) end
    M.write_file(f, "CREATE SCHEMA " .. qs .. ";\n" ..
      "CREATE TABLE " .. qs .. ".migrations (version int PRIMARY KEY, " ..
      "applied_at timestamptz NOT NULL DEFAULT now());\n" .. text ..
      "\nINSERT INTO " .. qs .. ".migrations (version) VALUES " ..
      table.concat(versions, ", ") .. ";\n")
    cmd = ("psql -X -q -v ON_ERROR_STOP=1 %s -1 -f %s"):format(
      M.quote(M.pg_url), M.quote(f))
  else
    M.write_file(f, schema_upto("sqlite", n) .. ("\nPRAGMA user_version = %d;\n"):format(n))
    cmd = ("sqlite3 %s < %s"):format(M.quote(env:sqlite_path()), M.quote(f))
  end
  local _, err, code = M.sh(cmd)
  os.remove(f)
  assert(code == 0, ("making schema %d: %s"):format(n, err))
end

-- A migration spec's common start: env's database at schema n, fill(env)
-- puts the old rows in it, then `jobrunner migrate` under the config
-- (default "concurrency = 1") must exit 0. Returns the jobs before and
-- after (job_snapshot), which the spec asserts the same.
-- The ids sql selects (a column id) on env's database, as integers.
function M.ids(env, sql)
  local t = {}
  for _, r in ipairs(env:query(sql)) do t[#t + 1] = math.tointeger(r.id) end
  return t
end

-- SQLite's query plan for sql on env's database, as its shell prints it.
function M.sqlite_plan(env, sql)
  local out, err, code = M.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(
    M.quote(env:sqlite_path()), M.quote("EXPLAIN QUERY PLAN " .. sql)))
  assert(code == 0, sql .. ": " .. err)
  return out
end

function M.upgrade_intact(env, n, fill, config)
  M.make_schema(env, n)
  fill(env)
  local before = M.job_snapshot(env)
  env:config(config or "concurrency = 1")
  local out, err, code = env:cli("migrate")
  assert(code == 0, ("migrate from %d: exit %s: %s%s"):format(n, tostring(code), out, err))
  return before, M.job_snapshot(env)
end

-- The most of the records in lines ("KEY START END", times in seconds)
-- that overlapped, of those whose KEY is key when key is given: what ran
-- at once, from the timestamps handlers recorded.
function M.max_overlap(lines, key)
  local ev = {}
  for _, l in ipairs(lines) do
    local k, s, e = l:match("^(%S+) (%S+) (%S+)$")
    if k and (not key or k == key) then
      ev[#ev + 1] = { tonumber(s), 1 }
      ev[#ev + 1] = { tonumber(e), -1 }
    end
  end
  table.sort(ev, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local cur, top = 0, 0
  for _, x in ipairs(ev) do
    cur = cur + x[2]
    if cur > top then top = cur end
  end
  return top
end

-- A producer client (the jobrunner.client module) on env's config.
function M.client(env)
  local lib = require "jobrunner.client"
  return assert(lib.open(env.config_file))
end

-- The line of env's config file that contains text.
function M.line_of(env, text)
  for i, l in ipairs(M.lines(env.config_file)) do
    if l:find(text, 1, true) then return i end
  end
end

-- Starts `jobrunner wait ARGS...` in the background; returns a function
-- that reads its stdout, stderr and exit status once it ended.
function M.wait_bg(env, ...)
  local args = {}
  for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
  local out, err = env.dir .. "/wait.out", env.dir .. "/wait.err"
  local f = io.popen(("cd %s && %s -c %s wait %s >%s 2>%s; echo $?"):format(
    q(env.dir), q(M.bin), q(env.config_file), table.concat(args, " "), q(out), q(err)))
  return function()
    local code = tonumber(f:read("a"):match("%d+"))
    f:close()
    return M.read_file(out) or "", M.read_file(err) or "", code
  end
end

return M
