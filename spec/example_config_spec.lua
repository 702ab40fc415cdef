-- example_config_spec.lua - the config's keys are rows (the key tables of
-- runtime/config/keys.c: key, type, field, range, default, words, doc),
-- and jobrunner.lua.example and docs/configuration.md are checked against
-- them: the example shows every key, no key the loader would refuse, each
-- plain key at its default, each enum's words; the range table of
-- docs/configuration.md gives each key with a range its row's range.
local jr = require "jr"

-- The #define NAME VALUE lines of the headers the rows' numbers name.
local function defines()
  local d = {}
  for _, h in ipairs { "runtime/base/ranges.h", "runtime/base/retry.h",
                       "runtime/config/config.h" } do
    local src = jr.read_file(jr.root .. "/" .. h) or ""
    for line in src:gmatch("[^\n]+") do
      local name, v = line:gsub("/%*.*", ""):match("^#define%s+(JR_[%w_]+)[ \t]+(.-)%s*$")
      if name then d[name] = v end
    end
  end
  return d
end

-- A row's number: a C constant expression of literals, <<, * and the
-- headers' names; nil for NONE (no default).
local function number(expr, d)
  if expr == "NONE" then return nil end
  for _ = 1, 5 do
    expr = expr:gsub("JR_[%w_]+", function(n) return "(" .. (d[n] or n) .. ")" end)
  end
  local f = assert(load("return " .. expr), "cannot read the row's number " .. expr)
  return f()
end

-- The fields of one row "{a, b, "c, d", ...}": split at the commas outside
-- strings and parentheses.
local function fields(row)
  local out, cur, depth, i, s = {}, {}, 0, 2, row
  while i < #s do
    local c = s:sub(i, i)
    if c == '"' then
      local j = i + 1
      while s:sub(j, j) ~= '"' do j = j + (s:sub(j, j) == "\\" and 2 or 1) end
      cur[#cur + 1] = s:sub(i, j)
      i = j
    elseif c == "(" then depth = depth + 1; cur[#cur + 1] = c
    elseif c == ")" then depth = depth - 1; cur[#cur + 1] = c
    elseif c == "," and depth == 0 then
      out[#out + 1] = table.concat(cur):match("^%s*(.-)%s*$"); cur = {}
    else cur[#cur + 1] = c end
    i = i + 1
  end
  out[#out + 1] = table.concat(cur):match("^%s*(.-)%s*$")
  return out
end

local PREFIX = { top_rows = "", defaults_rows = "defaults.", log_rows = "log.",
                 retention_rows = "retention." }

-- Every row of keys.c's tables, as { key = "defaults.timeout", last =
-- "timeout", top = bool, type, lo, hi, def, words, doc }.
local function rows()
  local src = jr.read_file(jr.root .. "/runtime/config/keys.c")
  local d, out = defines(), {}
  for name, body in src:gmatch("static const key_row ([%w_]+)%[%] = (%b{});") do
    local prefix = assert(PREFIX[name], "a key table keys.c's spec does not know: " .. name)
    for row in body:sub(2, -2):gmatch("%b{}") do
      local f = fields(row)
      assert(#f == 9, "a row of " .. name .. " without its 9 fields: " .. row)
      if f[1] ~= "NULL" then
        local key = load("return " .. f[1])()
        out[#out + 1] = {
          key = prefix .. key, last = key, top = prefix == "", type = f[2],
          lo = number(f[4], d), hi = number(f[5], d), def = number(f[6], d),
          words = f[7] ~= "NULL" and load("return " .. f[7])() or nil,
          doc = f[9] ~= "NULL" and load("return " .. f[9])() or nil,
        }
      end
    end
  end
  return out
end

local function fmt(v) return ("%.15g"):format(v) end

local function esc(s) return (s:gsub("%p", "%%%0")) end

describe("the config's key rows", function()
  local example = jr.read_file(jr.root .. "/jobrunner.lua.example")
  local docs = jr.read_file(jr.root .. "/docs/configuration.md")
  local all = rows()
  local known = {}
  for _, r in ipairs(all) do if r.top then known[r.key] = true end end

  it("are read from the loader's key tables", function()
    assert.is_true(known.backend and known.scripts and known.lease or false)
    local by = {}
    for _, r in ipairs(all) do by[r.key] = r end
    assert.same({ 1, 86400, 30 }, { by.lease.lo, by.lease.hi, by.lease.def })
    assert.same({ 0, 1000000, 20 }, { by["defaults.max_retries"].lo,
      by["defaults.max_retries"].hi, by["defaults.max_retries"].def })
    for _, r in ipairs(all) do
      assert.is_true((r.doc or "") ~= "", "row " .. r.key .. " has no doc line")
    end
  end)

  it("each is shown in jobrunner.lua.example", function()
    local missing = {}
    for key in pairs(known) do
      if not example:find("\n%s*%-?%-?%s*" .. key .. "%s*=") then
        missing[#missing + 1] = key
      end
    end
    table.sort(missing)
    assert.same({}, missing)
  end)

  it("leave no key in the example the loader would refuse", function()
    local unknown = {}
    -- top-level keys: two-space indented assignments in the returned table
    for key in example:gmatch("\n  %-?%-? ?([%w_]+) = ") do
      if not known[key] then unknown[#unknown + 1] = key end
    end
    assert.same({}, unknown)
  end)

  it("give the defaults the example shows", function()
    local wrong = {}
    for _, r in ipairs(all) do
      local shown
      if r.def ~= nil and r.type == "K_BOOL" then
        shown = r.def ~= 0 and "true" or "false"
      elseif r.def ~= nil and r.type ~= "K_PERIOD" and r.type ~= "K_FN" then
        shown = fmt(r.def)
      end
      if shown and not example:find("\n%s*" .. r.last .. " = " .. esc(shown) .. ",") then
        wrong[#wrong + 1] = r.key .. " = " .. shown
      end
    end
    assert.same({}, wrong)
  end)

  it("give the words the example names", function()
    local missing = {}
    for _, r in ipairs(all) do
      for word in (r.words or ""):gmatch('"[^"]*"') do
        if not example:find(word, 1, true) then
          missing[#missing + 1] = r.key .. " " .. word
        end
      end
    end
    assert.same({}, missing)
  end)

  it("give the ranges docs/configuration.md's table shows", function()
    local wrong = {}
    for _, r in ipairs(all) do
      if r.lo and r.hi and (r.lo ~= 0 or r.hi ~= 0) then
        local range, found = fmt(r.lo) .. " to " .. fmt(r.hi), false
        for line in docs:gmatch("\n(|[^\n]*)") do
          if line:find("`" .. r.key .. "`", 1, true) and line:find(range, 1, true) then
            found = true
          end
        end
        if not found then wrong[#wrong + 1] = r.key .. ": " .. range end
      end
    end
    table.sort(wrong)
    assert.same({}, wrong)
  end)
end)
