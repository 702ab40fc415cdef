-- docs_spec.lua - the manual: README.md stays a short table of contents
-- (at most 300 lines), README.md and docs/*.md carry no lab notes (issue
-- numbers, "this round", times of day), every relative link in them leads
-- to a file of the repository (and an #anchor to a heading of that file),
-- no link leaves the repository, and `jobrunner help TOPIC` names the
-- chapters that exist.
local jr = require "jr"

local q = jr.quote

local function docs_files()
  local files = { "README.md" }
  local p = assert(io.popen("cd " .. q(jr.root) .. " && ls docs/*.md"))
  for name in p:lines() do files[#files + 1] = name end
  p:close()
  return files
end

-- The text outside fenced code blocks and inline code spans, where a
-- bracket or a URL is text, not a link.
local function unfenced(text)
  return (("\n" .. text):gsub("\n```.-\n```", "\n"))
end

local function prose(text)
  return (unfenced(text):gsub("`[^`\n]*`", "``"))
end

-- GitHub's anchor of a heading: lower case, punctuation dropped (bytes
-- above 127 kept), spaces to '-'; a repeated anchor gets -1, -2, ...
local function anchors(text)
  local set, seen = {}, {}
  for line in (unfenced(text) .. "\n"):gmatch("([^\n]*)\n") do
    local h = line:match("^#+%s+(.-)%s*$")
    if h then
      local a = h:lower():gsub("[^%w%- _\128-\255]", ""):gsub(" ", "-")
      if seen[a] then
        seen[a] = seen[a] + 1
        a = a .. "-" .. seen[a]
      else
        seen[a] = 0
      end
      set[a] = true
    end
  end
  return set
end

-- path relative to the repository's root, or nil when it leaves it
local function normalize(dir, target)
  local parts = {}
  for part in ((dir ~= "" and dir .. "/" or "") .. target):gmatch("[^/]+") do
    if part == ".." then
      if #parts == 0 then return nil end
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return table.concat(parts, "/")
end

local function exists(path)
  return os.execute("test -e " .. q(jr.root .. "/" .. path)) == true
end

describe("the manual", function()
  local files = docs_files()

  it("has its chapters in docs/ and a README of at most 300 lines", function()
    assert.is_true(#files >= 12, "docs/ has " .. (#files - 1) .. " chapters")
    local readme = assert(jr.read_file(jr.root .. "/README.md"))
    local _, lines = readme:gsub("\n", "")
    assert.is_true(lines <= 300, "README.md has " .. lines .. " lines")
  end)

  it("holds no issue numbers, 'this round' or times of day", function()
    local out = jr.sh("cd " .. q(jr.root) .. " && grep -rnE " ..
      q("issue #|this round|[0-9]{2}:[0-9]{2} UTC") .. " README.md docs/")
    local found = {}
    for line in out:gmatch("[^\n]+") do found[#found + 1] = line end
    -- performance.md may date its one whole benchmark run
    if #found == 1 and found[1]:match("^docs/performance%.md:") then found = {} end
    assert.same({}, found)
  end)

  it("links only inside the repository, to files and headings that exist", function()
    local bad = {}
    local heads = {}
    local function heads_of(path)
      if heads[path] == nil then
        heads[path] = anchors(jr.read_file(jr.root .. "/" .. path) or "")
      end
      return heads[path]
    end
    for _, file in ipairs(files) do
      local text = prose(assert(jr.read_file(jr.root .. "/" .. file)))
      local dir = file:match("^(.*)/") or ""
      local function fail(target, why)
        bad[#bad + 1] = file .. ": (" .. target .. "): " .. why
      end
      for url in text:gmatch("<(%a[%w+.-]*:[^>%s]*)>") do
        fail(url, "a link out of the repository")
      end
      for target in text:gmatch("%]%(%s*<?([^)%s>]*)>?[^)]*%)") do
        local path, anchor = target:match("^([^#]*)#?(.*)$")
        if target:match("^%a[%w+.-]*:") then
          fail(target, "a link out of the repository")
        elseif path == "" and anchor == "" then
          fail(target, "an empty link")
        else
          local rel = path == "" and file or normalize(dir, path)
          if rel == nil then
            fail(target, "leaves the repository")
          elseif not exists(rel) then
            fail(target, "no such file")
          elseif anchor ~= "" and not heads_of(rel)[anchor] then
            fail(target, "no heading #" .. anchor .. " in " .. rel)
          end
        end
      end
    end
    assert.same({}, bad)
  end)

  it("sees its own checks fail on a broken link and a lab note", function()
    assert.is_nil(normalize("docs", "../../shared/DESIGN.md"))
    assert.equal("runtime/cli", normalize("docs", "../runtime/cli/"))
    local a = anchors("# HTTP: metrics, dashboard, API\n## /metrics\n## Queues\n" ..
                      "```\n# not a heading\n```\n## Queues\n")
    assert.is_true(a["http-metrics-dashboard-api"] and a.metrics and
                   a.queues and a["queues-1"])
    assert.is_nil(a["not-a-heading"])
  end)
end)

describe("jobrunner help", function()
  local function help(...)
    local args = { q(jr.bin), "help" }
    for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
    return jr.sh("cd " .. q(jr.root) .. " && " .. table.concat(args, " "))
  end

  it("lists one topic per chapter of docs/, each file there", function()
    local out, err, code = help()
    assert.equal(0, code, err)
    local listed = {}
    for topic, path in out:gmatch("\n  (%l+)%s+(docs/%l+%.md):") do
      assert.equal("docs/" .. topic .. ".md", path)
      assert.is_true(exists(path), path .. " is listed but missing")
      listed[path] = true
    end
    for _, file in ipairs(docs_files()) do
      if file ~= "README.md" then
        assert.is_true(listed[file] or false, file .. " has no help topic")
      end
    end
  end)

  it("says where a topic's chapter is, in docs/ and the man page", function()
    local out, err, code = help("limits")
    assert.equal(0, code, err)
    assert.matches("docs/limits.md", out, 1, true)
    assert.matches("man jobrunner", out, 1, true)
    out, err, code = help("postgresql")
    assert.equal(0, code, err)
    assert.matches("docs/storage.md", out, 1, true)
    local _, err2, code2 = help("no-such-topic")
    assert.equal(2, code2)
    assert.matches("no topic 'no-such-topic'", err2, 1, true)
  end)

  it("is in --help and in the man page, whose SEE ALSO names docs/", function()
    local out = jr.sh(q(jr.bin) .. " --help")
    assert.matches("jobrunner help [TOPIC]", out, 1, true)
    local man = assert(jr.read_file(jr.root .. "/jobrunner.1"))
    assert.matches('\n.BR help " [\\fITOPIC\\fR]"', man, 1, true)
    assert.matches("\n%.SH SEE ALSO\n[^\n]*manual", man)
    assert.matches("docs/", man:match("%.SH SEE ALSO.*$"), 1, true)
  end)
end)

-- A spec's header says what it checks; the tracker's numbering is not
-- part of it.
describe("the specs' header comments", function()
  -- the leading comment of a spec: its "--" lines, or a C file's first
  -- block comment
  local function header(path, text)
    if path:match("%.lua$") then
      local lines = {}
      for line in (text .. "\n"):gmatch("([^\n]*)\n") do
        if not line:match("^%-%-") then break end
        lines[#lines + 1] = line
      end
      return table.concat(lines, "\n")
    end
    return text:match("^/%*.-%*/") or ""
  end

  it("name no issue numbers or rounds", function()
    local p = assert(io.popen("cd " .. q(jr.root) ..
      " && ls spec/*.lua spec/helpers/*.lua spec/c/*.c spec/c/*.h"))
    local bad, n = {}, 0
    for path in p:lines() do
      n = n + 1
      local head = header(path, assert(jr.read_file(jr.root .. "/" .. path)))
      local lower = head:lower()
      if lower:match("issue%s+#?%d") or lower:match("#%d") or
         lower:match("round %d") or lower:match("round one") or
         lower:match("round two") or lower:match("round three") then
        bad[#bad + 1] = path
      end
    end
    p:close()
    assert.is_true(n > 50, "found " .. n .. " specs")
    assert.same({}, bad)
  end)
end)
