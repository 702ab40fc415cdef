-- scripts_spec.lua - layer 1: the shipped handlers in scripts/ required
-- directly, as plain Lua, with the handler-side `jobrunner` module stood in
-- by a recorder. What they do end to end is in lifecycle_spec.lua; here
-- each handler's own logic: what it logs, pushes, discards and returns.

-- The handler API as a recorder: log and push append to `calls`, discard
-- raises a marker the way the real one ends the job.
local function fake_jobrunner()
  local calls = { log = {}, push = {} }
  local api = {}
  function api.log(level, ...) calls.log[#calls.log + 1] = { level, ... } end
  function api.push(name, payload, opts)
    calls.push[#calls.push + 1] = { name = name, payload = payload, opts = opts }
  end
  function api.discard(reason) error({ discarded = reason }, 0) end
  function api.now() return 1700000000.0 end
  return api, calls
end

-- Requires scripts/NAME.lua afresh with the recorder as `jobrunner`.
local function load_handler(name)
  local api, calls = fake_jobrunner()
  local saved = package.loaded.jobrunner
  package.loaded.jobrunner = api
  package.loaded[name] = nil
  local ok, h = pcall(require, name)
  package.loaded.jobrunner = saved
  package.loaded[name] = nil
  assert(ok, h)
  return h, calls
end

local function job(payload, over)
  local j = { id = 7, name = "x", attempt = 1, queue = "default",
              priority = 0, payload = payload or {} }
  for k, v in pairs(over or {}) do j[k] = v end
  return j
end

describe("scripts/_format.lua", function()
  local format = require "_format"
  it("formats sizes in binary units", function()
    assert.equal("0.0 B", format.bytes(0))
    assert.equal("1023.0 B", format.bytes(1023))
    assert.equal("1.0 KiB", format.bytes(1024))
    assert.equal("1.5 MiB", format.bytes(1.5 * 1024 * 1024))
    assert.equal("2048.0 GiB", format.bytes(2 ^ 41))
  end)
end)

describe("scripts/hello.lua", function()
  it("greets the payload's name with the job id and attempt", function()
    local h = load_handler("hello")
    assert.equal("function", type(h))
    local printed = {}
    local real = _G.print
    _G.print = function(s) printed[#printed + 1] = s end
    local ok, err = pcall(h, job({ name = "world" }, { id = 3, attempt = 2 }))
    _G.print = real
    assert(ok, err)
    assert.same({ "hello, world! (job 3, attempt 2)" }, printed)
  end)

  it("greets a stranger when the payload has no name", function()
    local h = load_handler("hello")
    local printed = {}
    local real = _G.print
    _G.print = function(s) printed[#printed + 1] = s end
    pcall(h, job({}))
    _G.print = real
    assert.matches("^hello, stranger!", printed[1])
  end)
end)

describe("scripts/email.lua", function()
  it("declares its retry options", function()
    local h = load_handler("email")
    assert.equal(5, h.max_retries)
    assert.equal(30, h.timeout)
    assert.equal(20, h.backoff(1))
    assert.equal(80, h.backoff(3))
  end)

  it("logs the recipient of a good address and returns", function()
    local h, calls = load_handler("email")
    h.handle(job({ to = "a@example.com" }))
    assert.same({ { "info", "sending to", "a@example.com" } }, calls.log)
  end)

  it("discards a job with no valid recipient, without retries", function()
    local h, calls = load_handler("email")
    for _, to in ipairs({ "nobody", 42, false }) do
      local ok, err = pcall(h.handle, job({ to = to }))
      assert.is_false(ok)
      assert.equal("invalid recipient: " .. tostring(to), err.discarded)
    end
    local ok, err = pcall(h.handle, job({}))
    assert.is_false(ok)
    assert.equal("invalid recipient: nil", err.discarded)
    assert.same({}, calls.log)
  end)
end)

describe("scripts/report/daily.lua", function()
  it("logs the size and pushes one email follow-up", function()
    local h, calls = load_handler("report.daily")
    h(job({ size = 3 * 1024 * 1024, mail_to = "boss@example.com" }))
    assert.same({ { "info", "report of", "3.0 MiB" } }, calls.log)
    assert.equal(1, #calls.push)
    assert.equal("email", calls.push[1].name)
    assert.same({ to = "boss@example.com", subject = "daily report" },
                calls.push[1].payload)
  end)

  it("defaults the size and the recipient", function()
    local h, calls = load_handler("report.daily")
    h(job({}))
    assert.same({ "info", "report of", "1.0 KiB" }, calls.log[1])
    assert.equal("ops@example.com", calls.push[1].payload.to)
  end)
end)
