-- browser_spec.lua - the dashboard in a real browser (Debian's headless
-- chromium driven by puppeteer-core: spec/browser/dashboard.js), on each
-- backend: a runner with jobs in every state, 5,000 more under a limit,
-- one reporting progress; every view opened by its URL (#/, #/running,
-- #/dead, #/jobs/ID, #/queues, #/queues/mail, #/limits, #/schedules,
-- #/batches/1, #/jobs?name=page) with a screenshot of each kept under
-- spec/browser/screenshots/BACKEND/ (gitignored; CI keeps them); a
-- payload and an error holding <script> shown as text (a log line of its
-- attempt too); the 5,000 jobs
-- paged through by keyset with none missed; a payload filter; a bulk
-- cancel of the filtered set, confirmed and counted; Retry clicked on a
-- dead job that then runs. Then the workflow views (spec/browser/workflow.js):
-- a diamond flow in a batch, its last job opened while it waits (parents
-- and states, the batch link), the batch's counts and members before and
-- after the flow ran (done, both callbacks pushed), a member's result.
-- Then a read-scoped token (spec/browser/readonly.js): the header names
-- it, and Retry, Purge and every other action are greyed out. Last, a
-- dead job retried that died again (spec/browser/attemptlogs.js): each
-- run's logs under its own attempt 1 of the timeline, not both under
-- both.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"
local client = require "jobrunner"

local q = jr.quote
local NODE_DIR = jr.root .. "/spec/browser"
local PAGED = 5000          -- jobs named "page" (no handler takes them)

local FLAKY = [[
return function(job)
  local f = io.open(os.getenv("PWD") .. "/fail")
  if f then
    f:close()
    print("flaky says <b>hi</b>\27[31m")
    error("flaky failed: <script>alert('err')</script>")
  end
end
]]
local SLOW = [[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.progress(3, 10, "resizing <b>3</b>")
  for _ = 1, 900 do
    local f = io.open(os.getenv("PWD") .. "/stop")
    if f then f:close(); return end
    os.execute("sleep 0.1")
  end
end
]]
-- the workflow views: a diamond flow's first job blocks until "go" exists
local GATE = [[
return function(job)
  for _ = 1, 1800 do
    local f = io.open(os.getenv("PWD") .. "/go")
    if f then f:close(); return { step = "a" } end
    os.execute("sleep 0.1")
  end
  error("no go")
end
]]
-- the retried job: each run prints its number and fails with it
local TWICE = [[
return function(job)
  local path = os.getenv("PWD") .. "/runs"
  local f = io.open(path)
  local n = (f and tonumber(f:read("a")) or 0) + 1
  if f then f:close() end
  f = assert(io.open(path, "w"))
  f:write(n)
  f:close()
  print("run " .. n .. " says hi")
  error("run " .. n .. " failed")
end
]]
local STEP = [[
return function(job)
  local n = 0
  for _ in pairs(job.parents or {}) do n = n + 1 end
  return { id = job.id, parents = n }
end
]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " dashboard in a browser:", function()
    local env = jr.test_env(backend)

    it("opens every view by its URL, escapes <script>, pages, filters, bulk-cancels and retries",
      function()
      assert.is_truthy(io.open(NODE_DIR .. "/node_modules/puppeteer-core/package.json"),
        "puppeteer-core is missing: run make deps")
      env:script("ok", "return function(job) end")
      env:script("flaky", FLAKY)
      env:script("slow", SLOW)
      jr.write_file(env.dir .. "/fail", "")
      finally(function() jr.write_file(env.dir .. "/stop", "") end)
      local base = H.start(env, 'concurrency = 2, defaults = { max_retries = 0 }, ' ..
        'retention = { completed = "1h" }, limits = { page = { key = "payload.user_id", ' ..
        'concurrency = 2, rate = "5/1s", per_key = { concurrency = 1 } } }, ' ..
        'schedules = { { name = "nightly", cron = "0 3 * * *", tz = "Europe/Paris" } }')
      local c = assert(client.open(env.url, { schema = env.schema }))
      local items = {}
      for i = 1, PAGED do items[i] = { "page", { user_id = i % 10, i = i } } end
      local paged = assert(c:push_many(items))
      c:close()
      local done = env:push("ok", '{"n":1}')
      local dead = env:push("flaky", '{"html":"<script>alert(1)</script>"}')
      local running = env:push("slow")
      env:push("nohandler", "{}")                    -- ready: no runner has it
      env:push("ok", "{}", "--in", "1h")             -- scheduled
      local gone = env:push("ok", "{}", "--in", "2h", "--queue", "mail")
      assert.equal(0, select(3, env:cli("cancel", tostring(gone))))
      env:wait_state(dead, "dead")
      env:wait_state(done, "completed")
      env:wait_state(running, "running")
      jr.wait_for(function()
        return #env:query("SELECT id FROM jobs WHERE progress_done = 3 AND id = " .. running) == 1
      end, 10,
        "the slow job's progress")
      os.remove(env.dir .. "/fail")                  -- the retry will succeed
      -- a reload asks for the count of names no handler takes at once (its
      -- own period is a minute or more: its first count may have come
      -- before the push)
      assert.equal(0, select(3, env:cli("reload")))
      jr.wait_for(function() return env:log():find("named 'nohandler'", 1, true) end,
        30, "the runner counted the job no handler takes")

      local shots = jr.root .. "/spec/browser/screenshots/" .. backend
      jr.sh("rm -rf " .. q(shots) .. " && mkdir -p " .. q(shots))
      local out, err, code = jr.sh(("cd %s && timeout 240 node dashboard.js %s %s %s %s"):format(
        q(NODE_DIR), q(base), q(H.TOKEN), q(tostring(dead)), q(shots)))
      assert.equal(0, code, err)
      local page = cjson.decode(out)
      assert.is_nil(page.failure, page.failure)
      assert.same({}, page.errors)
      -- the one dialog: the bulk cancel's confirmation
      assert.same({ "Cancel every job matching name page, where payload.user_id = 7?" },
        page.dialogs)
      assert.equal("jobrunner · overview", page.title)
      assert.equal(PAGED + 1, page.cards.ready)
      assert.equal(1, page.cards.scheduled)
      assert.equal(1, page.cards.running)
      assert.equal(1, page.cards.dead)
      -- the dead job's row: its error as text, <script> and all
      local row
      for _, r in ipairs(page.dead) do if r[1] == tostring(dead) then row = r end end
      assert.is_table(row, "dead job not listed")
      assert.equal("flaky", row[2])
      assert.matches("flaky failed: <script>alert('err')</script>", row[6], 1, true)
      assert.equal(tostring(running), page.running[1][1])
      assert.equal("slow", page.running[1][2])
      assert.matches("pid %d+", page.status)
      local names = {}
      for _, r in ipairs(page.names) do names[r[1]] = r end
      assert.equal("1", names.nohandler[2])
      assert.equal(tostring(PAGED), names.page[2])
      assert.matches("nohandler (1 queued)", page.unhandled or "", 1, true)
      assert.is_true(page.chartBars >= 1)
      -- running, with its progress bar and note (as text)
      assert.equal(tostring(running), page.progress[1][1])
      assert.matches("3 / 10 (30%)", page.progress[1][6], 1, true)
      assert.equal("resizing <b>3</b>", page.progress[1][7])
      assert.same({ 3, 10 }, page.progressBar)
      -- the job by its URL: escaped, shown as text, no element made of it
      assert.matches(tostring(dead) .. " (flaky)", page.detailId, 1, true)
      assert.matches('"html": "<script>alert(1)</script>"', page.payload, 1, true)
      assert.matches("<script>alert('err')</script>", page.error, 1, true)
      assert.matches("&lt;script&gt;", page.detailHtml, 1, true)
      assert.is_nil(page.detailHtml:find("<script>", 1, true))
      assert.equal(1, page.scripts)
      assert.equal(1, page.scriptsAfter)
      -- queues, one queue, limits, schedules, a batch, a bad URL
      local queues = {}
      for _, r in ipairs(page.qlist) do queues[r[1]] = r end
      assert.is_table(queues.mail)
      assert.equal("mail", page.queueName)
      assert.equal(1, page.queueCards.cancelled)
      assert.equal("page", page.limits[1][1])
      assert.equal("payload.user_id", page.limits[1][2])
      assert.matches("0 / 2 running", page.limits[1][5], 1, true)
      assert.equal(tostring(PAGED), page.limits[1][6])
      -- the fair queues' panel (GET /api/stats' fair): none in this config
      assert.same({ { "no fair queue has ready jobs" } }, page.fair)
      assert.equal(20, #page.limitWaiting)
      assert.equal("page", page.limitWaiting[1][2])
      -- the schedule, and Fire now: exactly one job, the one the page shows
      assert.equal(cjson.null, page.schedulesNote)
      assert.matches("^nightly", page.schedules[1][1])
      assert.equal("cron 0 3 * * *", page.schedules[1][2])
      assert.equal("Europe/Paris", page.schedules[1][3])
      assert.equal("never", page.schedules[1][5])
      local nexts = 0
      for _ in page.schedules[1][6]:gmatch("%d%d%d%d%-%d%d%-%d%d %d%d:%d%d") do nexts = nexts + 1 end
      assert.equal(3, nexts)
      assert.matches("schedule nightly: fire asked", page.fireMessage, 1, true)
      jr.sleep(2)                                     -- a second fire would show by now
      local fired = env:query("SELECT id FROM jobs WHERE name = 'nightly'")
      assert.equal(1, #fired)
      assert.equal(tostring(math.tointeger(fired[1].id)), page.firedJob)
      -- a schedule managed at run time, added and removed through the form
      assert.equal(2, #page.schedulesAdded)
      assert.matches("^web%.added", page.schedulesAdded[2][1])
      assert.equal("every 1h", page.schedulesAdded[2][2])
      assert.equal(1, #page.schedulesRemoved)
      assert.equal(0, #env:query("SELECT name FROM schedule_defs"))
      -- the dead job's attempt, on the timeline
      assert.is_true(page.attemptsShown)
      assert.equal(1, #page.attempts)
      assert.matches("^attempt 1", page.attempts[1])
      assert.matches("flaky failed: <script>", page.attempts[1], 1, true)
      -- and its logs under it, as text, the escape shown as \x1b
      assert.matches("logs", page.attempts[1], 1, true)
      assert.matches("stdout flaky says <b>hi</b>\\x1b[31m", page.attempts[1], 1, true)
      assert.is_nil(page.detailHtml:find("<b>hi", 1, true))
      assert.is_string(page.batch)
      assert.matches("Nothing at #/no/such/page", page.notFound, 1, true)
      -- every job named page, paged through by keyset: none missed or repeated
      assert.equal(PAGED / 50, page.pages)
      assert.equal(PAGED, #page.pagedIds)
      assert.is_true(page.newerDisabledFirst)
      for k, id in ipairs(page.pagedIds) do
        assert.equal(math.tointeger(paged[PAGED - k + 1]), id)
      end
      assert.matches("before_id=", page.lastHash, 1, true)
      assert.equal(math.tointeger(paged[150]), page.backFirst)   -- two pages up
      assert.equal(50, page.backCount)
      assert.equal(page.backFirst, page.reloadFirst)
      -- the payload filter, then the bulk cancel of what it selected
      assert.matches("where=payload.user_id = 7", page.filterHash, 1, true)
      assert.equal(50, #page.filtered)
      local index = {}
      for i, id in ipairs(paged) do index[math.tointeger(id)] = i end
      for _, id in ipairs(page.filtered) do assert.equal(7, index[id] % 10) end
      assert.equal("500 jobs matched: 500 cancelled, 0 running told to stop, 0 already finished",
        page.bulkMessage)
      for _, st in ipairs(page.afterBulk) do assert.equal("cancelled", st) end
      assert.equal(500, #env:query("SELECT id FROM jobs WHERE state = 'cancelled' AND name = 'page'"))
      assert.equal(PAGED - 500, #env:query("SELECT id FROM jobs WHERE state = 'queued' AND name = 'page'"))
      assert.matches("payload filter 'payload.user id = 7'", page.badFilter, 1, true)
      for _, ms in pairs(page.loadMs) do assert.is_number(ms) end
      -- the click retried it, and it ran (and succeeded this time)
      assert.matches("queued again", page.message)
      env:wait_state(dead, "completed")
      for _, png in ipairs({ "overview", "overview-phone", "running", "dead", "job", "queues",
                             "queue", "limits", "schedules", "schedules-fired", "batch", "jobs",
                             "jobs-filtered" }) do
        local f = io.open(shots .. "/" .. png .. ".png", "rb")
        assert.is_truthy(f, png .. " not saved")
        assert.equal("\137PNG", f:read(4))
        f:close()
      end
    end)

    it("shows a waiting job's parents, its batch's counts and members, and the batch done",
      function()
      assert.is_truthy(io.open(NODE_DIR .. "/node_modules/puppeteer-core/package.json"),
        "puppeteer-core is missing: run make deps")
      env:script("gate", GATE)
      env:script("step", STEP)
      env:script("report", "return function(job) end")
      finally(function() jr.write_file(env.dir .. "/go", "") end)
      local base = H.start(env, 'concurrency = 2, retention = { completed = "1h" }')
      jr.write_file(env.dir .. "/flow.json", cjson.encode({
        jobs = { { ref = "a", name = "gate" }, { ref = "b", name = "step", after = { "a" } },
                 { ref = "c", name = "step", after = { "a" } },
                 { ref = "d", name = "step", after = { "b", "c" } } },
        batch = { on_complete = "report", on_success = "report" } }))
      local out, err, code = env:cli("push-flow", "flow.json")
      assert.equal(0, code, err)
      local ids = {}
      for ref, id in out:gmatch("(%w+) (%d+)") do ids[ref] = id end
      assert.is_string(ids.d, out)
      assert.is_string(ids.batch, out)
      env:wait_state(tonumber(ids.a), "running")

      local shots = jr.root .. "/spec/browser/screenshots/" .. backend
      local pngs = { "jobs-waiting", "flow-job", "flow-batch", "flow-batch-done", "flow-job-done" }
      jr.sh("mkdir -p " .. q(shots))
      for _, png in ipairs(pngs) do os.remove(shots .. "/" .. png .. ".png") end
      out, err, code = jr.sh(("cd %s && timeout 180 node workflow.js %s %s %s %s %s %s %s"):format(
        q(NODE_DIR), q(base), q(H.TOKEN), ids.d, ids.b, ids.batch, q(env.dir .. "/go"), q(shots)))
      assert.equal(0, code, err)
      local page = cjson.decode(out)
      assert.is_nil(page.failure, page.failure)
      assert.same({}, page.errors)
      -- the overview counts b, c and d as waiting, by total and by name
      assert.equal(3, page.cards.waiting)
      assert.equal(1, page.cards.running)
      assert.equal("Waiting", page.namesHead[4])
      local names = {}
      for _, r in ipairs(page.names) do names[r[1]] = r end
      assert.equal("3", names.step[4])
      assert.equal("1", names.gate[5])
      assert.equal("3", page.queues[1][4])
      -- the state filter offers waiting, and lists those three
      assert.truthy(table.concat(page.stateOptions, ","):find("waiting", 1, true))
      assert.equal("waiting", page.stateSelected)
      local waiting = {}
      for _, r in ipairs(page.waitingRows) do
        assert.equal("waiting", r[4]); waiting[#waiting + 1] = r[1]
      end
      table.sort(waiting)
      assert.same({ ids.b, ids.c, ids.d }, waiting)
      -- d, opened by its URL while it waits: its parents with their states, its batch
      assert.matches(ids.d .. " (step)", page.d.title, 1, true)
      assert.equal("waiting", page.d.fields.state)
      assert.is_false(page.d.resultShown)
      assert.same({
        { kind = "parents", links = {
          { id = ids.b, href = "#/jobs/" .. ids.b, state = "waiting" },
          { id = ids.c, href = "#/jobs/" .. ids.c, state = "waiting" } } },
        { kind = "batch", links = { { id = ids.batch, href = "#/batches/" .. ids.batch, state = cjson.null } } },
      }, page.d.links)
      -- b: its running parent and its waiting child
      assert.same({ id = ids.a, href = "#/jobs/" .. ids.a, state = "running" }, page.b.links[1].links[1])
      assert.equal("parents", page.b.links[1].kind)
      assert.same({ kind = "children", links = { { id = ids.d, href = "#/jobs/" .. ids.d,
        state = "waiting" } } }, page.b.links[2])
      -- the batch, reached by d's link, before and after
      assert.equal("#/batches/" .. ids.batch, page.batchHash)
      assert.matches("running", page.before.done)
      assert.same({ pending = 4, completed = 0, dead = 0, cancelled = 0, total = 4 }, page.before.cards)
      assert.equal("report", page.before.fields["on complete"])
      assert.equal("report", page.before.fields["on success"])
      assert.equal("no", page.before.fields.done)
      assert.is_nil(page.before.fields.finished)
      local members = {}
      for _, r in ipairs(page.before.members) do members[r[1]] = r[2] end
      assert.same({ [ids.a] = "running", [ids.b] = "waiting", [ids.c] = "waiting",
                    [ids.d] = "waiting" }, members)
      assert.matches("completed", page.after.done)
      assert.same({ pending = 0, completed = 4, dead = 0, cancelled = 0, total = 4 }, page.after.cards)
      assert.equal("yes", page.after.fields.done)
      assert.matches("^%d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d UTC", page.after.fields.finished)
      for _, r in ipairs(page.after.members) do assert.equal("completed", r[2]) end
      -- a member's row opens its job: d done, with its result and its parents completed
      assert.equal("#/jobs/" .. ids.d, page.memberHash)
      assert.equal("completed", page.dDone.fields.state)
      assert.is_true(page.dDone.resultShown)
      local result = cjson.decode(page.dDone.result)
      assert.equal(math.tointeger(tonumber(ids.d)), result.id)
      assert.equal(2, result.parents)
      for _, l in ipairs(page.dDone.links[1].links) do assert.equal("completed", l.state) end
      -- on_complete and on_success: each pushed once, shown in the list
      assert.equal(2, #page.reports)
      local reports = env:query("SELECT id FROM jobs WHERE name = 'report'")
      assert.equal(2, #reports)
      for _, png in ipairs(pngs) do
        local f = io.open(shots .. "/" .. png .. ".png", "rb")
        assert.is_truthy(f, png .. " not saved")
        assert.equal("\137PNG", f:read(4))
        f:close()
      end
    end)

    it("greys out the actions of a read token: Retry, Purge, the schedules' form and the rest disabled", function()
      assert.is_truthy(io.open(NODE_DIR .. "/node_modules/puppeteer-core/package.json"),
        "puppeteer-core is missing: run make deps")
      env:script("flaky", 'return function(job) error("flaky failed") end')
      local secret = "browser-read-token-0123456789"
      local file = env.dir .. "/grafana.token"
      jr.write_file(file, secret .. "\n")
      jr.sh("chmod 0600 " .. q(file))
      local base = H.start(env, "defaults = { max_retries = 0 }", { token = false,
        http = ('tokens = { { name = "grafana", scope = "read", token_file = %q } }'):format(file) })
      local dead = env:push("flaky", "{}")
      env:wait_state(dead, "dead")
      local out, err, code = jr.sh(("cd %s && timeout 120 node readonly.js %s %s %s"):format(
        q(NODE_DIR), q(base), q(secret), q(tostring(dead))))
      assert.equal(0, code, err)
      local page = cjson.decode(out)
      assert.is_nil(page.failure, page.failure)
      assert.same({}, page.errors)
      assert.equal("token grafana · read", page.who)
      assert.matches("may only read", page.whoTitle, 1, true)
      -- the dead job's Retry and Purge, Retry all and Purge all
      assert.same({ { "Retry all", true }, { "Purge all", true }, { "Retry", true },
                    { "Purge", true } }, page.dead)
      assert.is_true(#page.job >= 4)
      for _, b in ipairs(page.job) do assert.is_true(b[2], b[1] .. " is not disabled") end
      -- the schedules' form: Add and Change
      assert.same({ { "Add", true }, { "Change", true } }, page.sched)
      assert.equal("dead", env:job(dead).state)
    end)

    it("shows each run's logs under its own attempt once a dead job is retried", function()
      assert.is_truthy(io.open(NODE_DIR .. "/node_modules/puppeteer-core/package.json"),
        "puppeteer-core is missing: run make deps")
      env:script("twice", TWICE)
      os.remove(env.dir .. "/runs")
      local base = H.start(env, "defaults = { max_retries = 0 }")
      local id = env:push("twice", "{}")
      env:wait_state(id, "dead")
      local _, err, code = env:cli("dead", "retry", tostring(id))
      assert.equal(0, code, err)
      jr.wait_for(function()
        return jr.read_file(env.dir .. "/runs") == "2" and env:job(id).state == "dead"
      end, 30, "the retried job dead again")
      local out
      out, err, code = jr.sh(("cd %s && timeout 120 node attemptlogs.js %s %s %s"):format(
        q(NODE_DIR), q(base), q(H.TOKEN), q(tostring(id))))
      assert.equal(0, code, err)
      local page = cjson.decode(out)
      assert.is_nil(page.failure, page.failure)
      assert.same({}, page.errors)
      -- two entries, both attempt 1, each with its own run's error and logs
      assert.equal(2, #page.attempts, cjson.encode(page.attempts))
      for n, text in ipairs(page.attempts) do
        assert.matches("^attempt 1", text)
        assert.matches("run " .. n .. " failed", text, 1, true)
        assert.matches("stdout run " .. n .. " says hi", text, 1, true)
        assert.is_nil(text:find("run " .. (3 - n), 1, true), text)
      end
    end)
  end)
end
