-- example_config_spec.lua - jobrunner.lua.example documents every key the
-- config loader knows (the key table in runtime/config/keys.c), and no key the
-- loader does not know, so the two cannot drift apart.
local jr = require "jr"

describe("jobrunner.lua.example", function()
  local src = jr.read_file(jr.root .. "/runtime/config/keys.c")
  local example = jr.read_file(jr.root .. "/jobrunner.lua.example")
  local known = {}
  for key in src:gmatch('{"([%w_]+)", k_[%w_]+}') do known[key] = true end

  it("is read by the loader's key table", function()
    assert.is_not_nil(next(known), "no key table found in runtime/config/keys.c")
    assert.is_true(known.backend and known.scripts and known.lease or false)
  end)

  it("shows every key of the config loader", function()
    local missing = {}
    for key in pairs(known) do
      if not example:find("\n%s*%-?%-?%s*" .. key .. "%s*=") then
        missing[#missing + 1] = key
      end
    end
    table.sort(missing)
    assert.same({}, missing)
  end)

  it("shows no key the loader would refuse", function()
    local unknown = {}
    -- top-level keys: two-space indented assignments in the returned table
    for key in example:gmatch("\n  %-?%-? ?([%w_]+) = ") do
      if not known[key] then unknown[#unknown + 1] = key end
    end
    assert.same({}, unknown)
  end)
end)
