-- browser_spec.lua - the dashboard in a real browser (Debian's headless
-- chromium driven by puppeteer-core: spec/browser/dashboard.js), on each
-- backend: a runner with jobs in every state, what the page shows after
-- its scripts ran, a payload and an error holding <script> shown as text,
-- Retry clicked on a dead job that then runs, and screenshots saved in the
-- test's temp dir (JR_KEEP=1 keeps it).
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local q = jr.quote
local NODE_DIR = jr.root .. "/spec/browser"

local FLAKY = [[
return function(job)
  local f = io.open(os.getenv("PWD") .. "/fail")
  if f then f:close(); error("flaky failed: <script>alert('err')</script>") end
end
]]
local SLOW = [[
return function(job)
  for _ = 1, 300 do
    local f = io.open(os.getenv("PWD") .. "/stop")
    if f then f:close(); return end
    os.execute("sleep 0.1")
  end
end
]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " dashboard in a browser:", function()
    local env = jr.test_env(backend)

    it("shows every state, escapes <script>, and retries a dead job on a click", function()
      assert.is_truthy(io.open(NODE_DIR .. "/node_modules/puppeteer-core/package.json"),
        "puppeteer-core is missing: run make deps")
      env:script("ok", "return function(job) end")
      env:script("flaky", FLAKY)
      env:script("slow", SLOW)
      jr.write_file(env.dir .. "/fail", "")
      finally(function() jr.write_file(env.dir .. "/stop", "") end)
      local base = H.start(env, 'concurrency = 2, defaults = { max_retries = 0 }, ' ..
        'retention = { completed = "1h" }')
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
      os.remove(env.dir .. "/fail")                  -- the retry will succeed
      jr.wait_for(function() return env:log():find("named 'nohandler'", 1, true) end,
        30, "the runner counted the job no handler takes")

      local out, err, code = jr.sh(("cd %s && timeout 60 node dashboard.js %s %s %s %s"):format(
        q(NODE_DIR), q(base), q(H.TOKEN), q(tostring(dead)), q(env.dir)))
      assert.equal(0, code, err)
      local page = cjson.decode(out)
      assert.is_nil(page.failure, page.failure)
      assert.same({}, page.errors)
      assert.same({}, page.dialogs)
      assert.equal("jobrunner", page.title)
      assert.equal(1, page.cards.ready)
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
      -- the names no handler takes, above the names
      assert.matches("No handler for: nohandler (1 queued)", page.unhandled or "", 1, true)
      local states = {}
      for _, r in ipairs(page.jobs) do states[r[4]] = true end
      for _, s in ipairs({ "ready", "scheduled", "running", "dead", "cancelled", "completed" }) do
        assert.is_true(states[s], "no " .. s .. " job in the list")
      end
      for _, r in ipairs(page.deadFiltered) do assert.equal("dead", r[4]) end
      assert.is_true(page.chartBars >= 1)
      -- escaped: shown as text, no element made of it, no new script ran
      assert.matches('"html": "<script>alert(1)</script>"', page.payload, 1, true)
      assert.matches("<script>alert('err')</script>", page.error, 1, true)
      assert.matches("&lt;script&gt;", page.detailHtml, 1, true)
      assert.is_nil(page.detailHtml:find("<script>", 1, true))
      assert.equal(1, page.scripts)
      assert.equal(1, page.scriptsAfter)
      -- the click retried it, and it ran (and succeeded this time)
      assert.matches("queued again", page.message)
      env:wait_state(dead, "completed")
      for _, png in ipairs({ "dashboard.png", "dashboard-phone.png" }) do
        local f = io.open(env.dir .. "/" .. png, "rb")
        assert.is_truthy(f, png .. " not saved")
        assert.equal("\137PNG", f:read(4))
        f:close()
      end
    end)
  end)
end
