-- flow_input_spec.lua - a flow's options and an HTTP push checked as the
-- CLI checks them, on both backends: a fraction where a whole number
-- goes (priority, max_retries, an after id) is refused naming the job
-- and the field by push-flow, POST /api/flows and the Lua module's
-- q:flow, and nothing is pushed; a refused job's message says its prefix
-- once and whole; POST /api/jobs refuses on_conflict without unique_key
-- in the CLI's words.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- Each flow and the exact message every producer gives for it.
local CASES = {
  { '[{"ref":"a","name":"step","priority":1.5}]',
    "flow: job 1: 'priority' 1.5 is not a whole number" },
  { '[{"ref":"a","name":"step"},{"ref":"b","name":"step","max_retries":2.5}]',
    "flow: job 2: 'max_retries' 2.5 is not a whole number" },
  { '[{"ref":"a","name":"step","after":[1.5]}]',
    "flow: job 'a': after: 1.5 is not a job id (a whole number)" },
  { '{"jobs":[{"ref":"a","name":"step"}],"batch":{"on_complete":"bad name!"}}',
    "flow: job 'a': invalid batch on_complete 'bad name!': character 4 " ..
    "is not one of [A-Za-z0-9_.:-]" },
}

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " flow input:", function()
    local env = jr.test_env(backend)

    it("push-flow refuses fractions and says a job's prefix once", function()
      env:script("step", "return function() end")
      for i, case in ipairs(CASES) do
        local path = ("%s/f%d.json"):format(env.dir, i)
        jr.write_file(path, case[1])
        local out, err, code = env:cli("push-flow", path)
        assert.equal(2, code, out .. err)
        assert.equal("jobrunner: " .. case[2] .. "\n", err)
      end
      assert.equal(0, env:count())
    end)

    it("the Lua module's q:flow refuses them with the same message", function()
      local q = jr.client(env)
      for _, case in ipairs(CASES) do
        local ids, msg = q:flow(cjson.decode(case[1]))
        assert.is_nil(ids)
        assert.equal(case[2], msg)
      end
      q:close()
      assert.equal(0, env:count())
    end)

    it("POST /api/flows refuses them, POST /api/jobs on_conflict alone",
      function()
      env:script("step", "return function() end")
      local base = H.start(env)
      for _, case in ipairs(CASES) do
        local code, body = H.req(base .. "/api/flows",
          { body = case[1], token = true })
        assert.equal(400, code, body)
        assert.equal(case[2], cjson.decode(body).error)
      end
      for _, how in ipairs({ "keep", "replace" }) do
        local code, body = H.req(base .. "/api/jobs", { token = true,
          body = cjson.encode({ name = "step", on_conflict = how }) })
        assert.equal(400, code, body)
        assert.equal("job 'step': on_conflict needs a unique_key or a sequence",
          cjson.decode(body).error)
        code, body = H.req(base .. "/api/jobs", { token = true,
          body = cjson.encode({ { name = "step" },
                                { name = "step", on_conflict = how } }) })
        assert.equal(400, code, body)
        assert.equal("jobs[1]: job 'step': on_conflict needs a unique_key or a sequence",
          cjson.decode(body).error)
      end
      local _, err, code = env:cli("push", "step", "--on-conflict", "keep")
      assert.equal(2, code)
      assert.equal("jobrunner: job 'step': on_conflict needs a unique_key or a sequence\n",
        err)
      assert.equal(0, env:count())
      assert.equal(0, env:stop())
    end)
  end)
end
