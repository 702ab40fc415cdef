-- report.lua RAW JSON - turns bench/run's raw lines ("backend metric value")
-- into one table on stdout and the JSON file: per backend, each metric's
-- median with min, max and the number of runs.
local raw_path, json_path = arg[1], arg[2]

local data, machine, order = {}, {}, {}
for line in io.lines(raw_path) do
  local b, k, v = line:match("^(%S+) (%S+) ?(.*)$")
  if b == "machine" then
    machine[k] = tonumber(v) or v
    order[#order + 1] = k
  elseif b then
    data[b] = data[b] or {}
    data[b][k] = data[b][k] or {}
    table.insert(data[b][k], tonumber(v))
  end
end

local function stat(t)
  if not t or #t == 0 then return nil end
  table.sort(t)
  local n = #t
  local med = n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
  return { median = med, min = t[1], max = t[n], runs = n }
end

local cores = machine.cores or 2
local backends = {}
for _, b in ipairs({ "sqlite", "postgres" }) do
  if data[b] then backends[#backends + 1] = b end
end

-- per backend: every metric, plus drain_jobs_s (default concurrency = the
-- number of cores) and the best concurrency
local results = {}
for _, b in ipairs(backends) do
  local r = {}
  for k, v in pairs(data[b]) do r[k] = stat(v) end
  r.drain_jobs_s = r["drain_c" .. cores .. "_jobs_s"]
  local best, bestc
  for k, v in pairs(r) do
    local c = k:match("^drain_c(%d+)_jobs_s$")
    if c and (not best or v.median > best.median) then best, bestc = v, tonumber(c) end
  end
  r.drain_best_jobs_s, r.drain_best_concurrency = best, bestc
  if r.drain_co_jobs_s and r.drain_inflight1_jobs_s then
    r.drain_co_ratio = r.drain_co_jobs_s.median / r.drain_inflight1_jobs_s.median
  end
  if r.drain_now_jobs_s and r.drain_base_jobs_s then
    r.drain_base_ratio = r.drain_now_jobs_s.median / r.drain_base_jobs_s.median
  end
  if r.latency_busy_p99_ms and r.latency_p99_ms then
    r.latency_busy_ratio = r.latency_busy_p99_ms.median / r.latency_p99_ms.median
  end
  if r.mix_c16_jobs_s and r.mix_c1_jobs_s then
    r.mix_speedup = r.mix_c16_jobs_s.median / r.mix_c1_jobs_s.median
  end
  results[b] = r
end

-- the table: each figure with its target per backend
-- ({op, value}, nil: no target) and whether this run met it
local K = function(v) return v * 1000 end
local rows = {
  { "push_batch_jobs_s", "push, batch of 1000 (jobs/s)", { ">=", K(300) }, { ">=", K(150) }, "%.0f" },
  { "push_batch_plain_jobs_s", "push, batch of 1000, beside unique (jobs/s)", nil, nil, "%.0f" },
  { "push_batch_unique_jobs_s", "push, batch of 1000, a unique_key each (jobs/s)", nil, nil, "%.0f" },
  { "push_single_jobs_s", "push, one per transaction (jobs/s)", nil, nil, "%.0f" },
  { "drain_jobs_s", ("drain, default concurrency %d (jobs/s)"):format(cores), { ">=", K(110) }, { ">=", K(50) }, "%.0f" },
  { "drain_c1_jobs_s", "drain, concurrency 1 (jobs/s)", nil, nil, "%.0f" },
  { "drain_c2_jobs_s", "drain, concurrency 2 (jobs/s)", nil, nil, "%.0f" },
  { "drain_c4_jobs_s", "drain, concurrency 4 (jobs/s)", nil, nil, "%.0f" },
  { "drain_plain_jobs_s", "drain, one queue, default concurrency (jobs/s)", nil, nil, "%.0f" },
  { "drain_http_jobs_s", "the same, HTTP on, /metrics scraped every 100 ms (jobs/s)", nil, nil, "%.0f" },
  { "drain_queues4_jobs_s", "drain, 4 queues capped 8/32/128/512 (jobs/s)", nil, nil, "%.0f" },
  { "drain_now_jobs_s", "drain, plain, in turn with the baseline below (jobs/s)", nil, nil, "%.0f" },
  { "drain_base_jobs_s", ("  the same, baseline %s (jobs/s)"):format(machine.baseline or "-"), nil, nil, "%.0f" },
  { "drain_base_ratio", "  this code / baseline, plain drain (x)", { ">=", 0.95 }, { ">=", 0.95 }, "%.2f" },
  { "drain_keys1000_jobs_s", "drain, 1000 limit keys, per-key concurrency 2 (jobs/s)", nil, nil, "%.0f" },
  { "drain_keys1000_c1_jobs_s", "drain, 1000 limit keys, per-key concurrency 1 (jobs/s)", nil, nil, "%.0f" },
  { "drain_seq1000_jobs_s", "drain, 1000 sequences, in turn with it (jobs/s)", nil, nil, "%.0f" },
  { "seq_ratio", "  sequences / per-key concurrency 1 (x)", { ">=", 0.80 }, { ">=", 0.80 }, "%.2f" },
  { "fair_isolation_p99_ms", "fair queue: tenant b's push->start p99 behind a's backlog (ms)", { "<=", 10 }, { "<=", 20 }, "%.2f" },
  { "fair_isolation_r2_p99_ms", "  the same, 2 runners (ms)", nil, { "<=", 20 }, "%.2f" },
  { "fair_isolation_r3_p99_ms", "  the same, 3 runners (ms)", nil, { "<=", 20 }, "%.2f" },
  { "fair_share_err_pct", "fair queue, 1000 tenants of weights 1 to 4: worst share error per window (%)", { "<=", 5 }, { "<=", 5 }, "%.2f" },
  { "drain_fair10k_jobs_s", "drain, 10000 fair keys (jobs/s)", nil, nil, "%.0f" },
  { "drain_fairplain_jobs_s", "  the same jobs in a plain queue (jobs/s)", nil, nil, "%.0f" },
  { "fair_ratio", "  fair / plain (x)", { ">=", 0.90 }, { ">=", 0.90 }, "%.2f" },
  { "drain_keep_jobs_s", ("drain, concurrency %d, retention completed = 1d (jobs/s)"):format(cores), nil, nil, "%.0f" },
  { "latency_p50_ms", "latency push->start p50 (ms)", { "<=", 1 }, { "<=", 1 }, "%.2f" },
  { "latency_p99_ms", "latency push->start p99 (ms)", { "<=", 2 }, { "<=", 3 }, "%.2f" },
  { "latency_max_ms", "latency push->start max (ms)", nil, nil, "%.2f" },
  { "latency_push_p50_ms", "  of it, the push's own round trip (its commit): p50 (ms)", nil, nil, "%.2f" },
  { "latency_push_p99_ms", "  p99 (ms)", nil, nil, "%.2f" },
  { "latency_busy_p50_ms", "the same, a CPU burner on core 0: p50 (ms)", nil, nil, "%.2f" },
  { "latency_busy_p99_ms", "  p99 (ms)", nil, nil, "%.2f" },
  { "latency_busy_max_ms", "  max (ms)", nil, nil, "%.2f" },
  { "latency_busy_ratio", "  busy p99 / quiet p99 (x)", nil, { "<=", 2 }, "%.2f" },
  { "fanin_ms", "fan-out of 10000: last child's end -> fan-in callback's start (ms)", nil, nil, "%.2f" },
  { "chain_p50_ms", "chain of 1000: a link's end -> the next one's start, p50 (ms)", nil, nil, "%.2f" },
  { "chain_p99_ms", "chain of 1000: the same, p99 (ms)", nil, nil, "%.2f" },
  { "idle_cpu_pct", "idle CPU, runner + workers (% of a core)", { "<", 0.5 }, { "<", 0.5 }, "%.2f" },
  { "idle_master_rss_mib", "master RSS, idle (MiB)", nil, nil, "%.1f" },
  { "busy64_master_cpu_pct", "master CPU, 64 workers on 3 s jobs, 20 jobs/s (% of a core)", { "<", 1 }, nil, "%.2f" },
  { "busy64_passes_per_job", "  its loop passes per job", { "<=", 10 }, nil, "%.1f" },
  { "busy64_cycles_per_job", "  its database cycles per job", nil, nil, "%.1f" },
  { "first_claim64_ms", "start -> first claim, 64 workers (ms)", { "<=", 100 }, { "<=", 100 }, "%.0f" },
  { "master_rss_mib", "master RSS, draining the big backlog (MiB)", { "<=", 16 }, { "<=", 16 }, "%.1f" },
  { "worker_rss_mib", "worker RSS incl. shared libraries (MiB)", nil, nil, "%.1f" },
  { "worker_private_mib", "worker private memory, RssAnon (MiB)", { "<=", 4 }, { "<=", 4 }, "%.1f" },
  { "backlog_small_jobs_s", "drain with the small backlog (jobs/s)", nil, nil, "%.0f" },
  { "backlog_big_jobs_s", "drain with the big backlog (jobs/s)", nil, nil, "%.0f" },
  { "backlog_ratio", "backlog ratio big/small", { ">=", 0.9 }, { ">=", 0.9 }, "%.2f" },
  { "mix_c1_jobs_s", "1 ms handlers, concurrency 1, warm (jobs/s)", nil, nil, "%.0f" },
  { "mix_c16_jobs_s", "1 ms handlers, concurrency 16, warm (jobs/s)", nil, nil, "%.0f" },
  { "mix_speedup", "1 ms handlers, concurrency 16 / 1 (x)", { ">=", 12 }, { ">=", 12 }, "%.1f" },
  { "io_ceiling_jobs_s", "I/O-bound ceiling: the server alone, 2000 connections (jobs/s)", nil, nil, "%.0f" },
  { "io_jobs_s", "I/O-bound: GET answered in 100 ms, 2 workers x 1000, warm (jobs/s)", { ">=", 8000 }, { ">=", 8000 }, "%.0f" },
  { "io_ceiling_pct", "  of the ceiling measured beside it (%)", { ">=", 90 }, { ">=", 90 }, "%.1f" },
  { "io_busy_slots", "  slots busy on average, of 2000, whole drain", nil, nil, "%.0f" },
  { "io_busy_fed_slots", "  slots busy on average while jobs were left", { ">=", 1800 }, { ">=", 1800 }, "%.0f" },
  { "io_conns_opened", "  connections opened for the 2000 slots", { "<=", 2100 }, { "<=", 2100 }, "%.0f" },
  { "io_ramp_ms", "  the first request to the 2000th at the server (ms)", { "<=", 50 }, { "<=", 50 }, "%.0f" },
  { "io_ceiling_ramp_ms", "  the same, the server alone's lean client (ms)", nil, nil, "%.0f" },
  { "io_ceiling_ramp_each_ms", "  the same, the lean client sending each request as its connection opens (ms)", nil, nil, "%.0f" },
  { "io_mem_kib_per_job", "worker RSS / jobs in flight, 1000 in flight (KiB)", { "<=", 64 }, { "<=", 64 }, "%.1f" },
  { "io_mem_peak", "  requests the server held at once then", nil, nil, "%.0f" },
  { "drain_inflight1_jobs_s", "drain, no-op, inflight 1, beside the next (jobs/s)", nil, nil, "%.0f" },
  { "drain_co_jobs_s", "drain, no-op, coroutine path: inflight 32 (jobs/s)", nil, nil, "%.0f" },
  { "drain_co_ratio", "  coroutine / plain no-op drain (x)", { ">=", 0.95 }, { ">=", 0.95 }, "%.2f" },
  { "scale_r1_jobs_s", "scale-out: 1 runner, warm (jobs/s)", nil, nil, "%.0f" },
  { "scale_r2_jobs_s", "scale-out: 2 runners, one database (jobs/s)", nil, nil, "%.0f" },
  { "scale_r3_jobs_s", "scale-out: 3 runners, one database (jobs/s)", nil, nil, "%.0f" },
  { "scale_r1_cpu_us", "scale-out, 1 runner: CPU per job, whole machine (us)", nil, nil, "%.1f" },
  { "scale_r1_runner_us", "scale-out, 1 runner: of which the runner's (us)", nil, nil, "%.1f" },
  { "scale_r3_cpu_us", "scale-out, 3 runners: CPU per job, whole machine (us)", nil, nil, "%.1f" },
  -- every job writes one row through jobrunner.sql (bench/run sqltx)
  { "sqltx_plain_jobs_s", "drain, BENCH_SQLTX_N no-op jobs, beside the next (jobs/s)", nil, nil, "%.0f" },
  { "sqltx_jobs_s", "  the same, each job writing a row through jobrunner.sql (jobs/s)", nil, nil, "%.0f" },
  { "sqltx_ratio", "  jobrunner.sql row / no-op, in turn (x)", { ">=", 0.85 }, { ">=", 0.85 }, "%.2f" },
  -- every job logs 10 lines with its attempt, sent with its success and
  -- deleted with it (no line stored: bench/run logs_case)
  { "logs_plain_jobs_s", "drain, BENCH_LOGS_N no-op jobs, beside the next (jobs/s)", nil, nil, "%.0f" },
  { "logs_jobs_s", "  the same, each logging 10 lines, sent, deleted with the job (jobs/s)", nil, nil, "%.0f" },
  { "logs_ratio", "  10 lines logged (not stored) / no-op, in turn (x)", { ">=", 0.90 }, { ">=", 0.90 }, "%.2f" },
  { "logs_unkept_jobs_s", "  the same 10 calls, not kept (attempt_max 0) (jobs/s)", nil, nil, "%.0f" },
  { "logs_keep_ratio", "  kept / not kept: what keeping costs (x)", nil, nil, "%.2f" },
  -- 1 KiB payloads encrypted with a key file (bench/run crypt_case)
  { "crypt_plain_jobs_s", "drain, BENCH_CRYPT_N jobs of 1 KiB payloads in clear (jobs/s)", nil, nil, "%.0f" },
  { "crypt_jobs_s", "  the same encrypted (encryption.key_file) (jobs/s)", nil, nil, "%.0f" },
  { "crypt_ratio", "  encrypted / in clear, in turn (x)", { ">=", 0.85 }, { ">=", 0.85 }, "%.2f" },
  -- tracing on, spans to a lean sink (bench/run tracing_case)
  { "trace_plain_jobs_s", "drain, BENCH_TRACE_N no-op jobs, beside the next (jobs/s)", nil, nil, "%.0f" },
  { "trace_all_jobs_s", "  the same, tracing on, every job's spans sent (jobs/s)", nil, nil, "%.0f" },
  { "trace_some_jobs_s", "  the same, tracing on, sample 0.01 (jobs/s)", nil, nil, "%.0f" },
  { "trace_all_ratio", "  tracing sample 1 / off, in turn (x)", { ">=", 0.90 }, { ">=", 0.90 }, "%.2f" },
  { "trace_all_dropped", "  spans dropped at sample 1 (of 2 a job; the runner's log)", nil, nil, "%.0f" },
  { "trace_some_ratio", "  tracing sample 0.01 / off, in turn (x)", { ">=", 0.98 }, { ">=", 0.98 }, "%.2f" },
  { "trace_plain_cpu_us", "  CPU a job of its plain drains (runner and workers, us)", nil, nil, "%.2f" },
  { "trace_some_cpu_us", "  the same at sample 0.01 (us)", nil, nil, "%.2f" },
  { "trace_all_cpu_us", "  the same at sample 1 (us)", nil, nil, "%.2f" },
  -- PostgreSQL, another session holding a snapshot (bench/run pg_snapshot)
  { "snap_plain_jobs_s", "drain, BENCH_SNAP_N jobs, beside the next (jobs/s)", nil, nil, "%.0f" },
  { "snap_held_jobs_s", "  the same, another session holding a snapshot (jobs/s)", nil, nil, "%.0f" },
  { "snap_ratio", "  held snapshot / none, in turn (x)", nil, { ">=", 0.80 }, "%.2f" },
  { "snap_dead_tuples", "  dead rows in jobs after a drain under it", nil, nil, "%.0f" },
  { "snap_table_kib", "  jobs table then (KiB)", nil, nil, "%.0f" },
  { "snap_claim_index_kib", "  its claim index, jobs_claim (KiB)", nil, nil, "%.0f" },
  { "snap_lease_index_kib", "  its lease index, jobs_lease (KiB)", nil, nil, "%.0f" },
  { "snap_pkey_kib", "  its primary key (KiB)", nil, nil, "%.0f" },
  -- steps (bench/run steps_case): jobrunner.step's cost
  { "steps_per_s", "steps: 20 no-op steps a job, drained (steps/s)", { ">=", K(400) }, nil, "%.0f" },
  { "steps_jobs_s", "  the same in jobs/s", nil, nil, "%.0f" },
  { "steps_plain_jobs_s", "  plain no-op jobs beside it, in turn (jobs/s)", nil, nil, "%.0f" },
  { "steps_durable_cpu_us", "runner CPU a durable step, over a plain job's (us)", nil, { "<=", 100 }, "%.1f" },
  { "chaos_dup_per_kill", "re-runs per kill -9 at full speed, mean", nil, nil, "%.1f" },
  { "chaos_dup_max", "re-runs after one kill -9, most", { "<", 250 }, { "<", 500 }, "%.0f" },
  -- the dashboard's views: their API calls one after the other (ms)
  { "dash_overview_ms", "dashboard #/ load, jobs table of BENCH_DASH_N (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_jobs_ms", "dashboard #/jobs, newest 50 (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_jobs_deep_page_ms", "dashboard #/jobs, a page near the oldest (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_jobs_payload_filter_ms", "dashboard #/jobs?where=payload.user_id = 42 (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_jobs_state_filter_none_ms", "dashboard #/jobs?state=dead, none dead (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_job_ms", "dashboard #/jobs/ID (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_running_ms", "dashboard #/running (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_dead_ms", "dashboard #/dead (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_queues_ms", "dashboard #/queues (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
  { "dash_limits_ms", "dashboard #/limits, with its waiting jobs (ms)", { "<", 200 }, { "<", 200 }, "%.1f" },
}

local function cell(s, fmt)
  if not s then return "-" end
  if type(s) == "number" then return fmt:format(s) end
  if s.runs == 1 then return fmt:format(s.median) .. " (1 run)" end
  return (fmt .. " (%s-%s)"):format(s.median, fmt:format(s.min), fmt:format(s.max))
end

local function median(s)
  return type(s) == "table" and s.median or s
end

-- "met", "NOT met" or "" for value v against target t
local function verdict(v, t)
  if not t or v == nil then return "" end
  local ok = (t[1] == ">=" and v >= t[2]) or (t[1] == "<=" and v <= t[2]) or
    (t[1] == "<" and v < t[2])
  return ok and "met" or "NOT met"
end

local function target_text(t, fmt)
  if not t then return "-" end
  return t[1] .. " " .. ("%g"):format(t[2])
end

local lines = {}
local w1, wc = 56, 24
local head = ("%-" .. w1 .. "s"):format("metric (median of runs, min-max)")
for _, b in ipairs(backends) do
  head = head .. ("  %-" .. wc .. "s  %-18s"):format(b, "target")
end
lines[1] = head
lines[2] = ("-"):rep(#head)
for _, row in ipairs(rows) do
  local key, label, fmt = row[1], row[2], row[5]
  local tgt = { sqlite = row[3], postgres = row[4] }
  local any = false
  local l = ("%-" .. w1 .. "s"):format(label)
  for _, b in ipairs(backends) do
    local v = results[b][key]
    any = any or v ~= nil
    local t = tgt[b]
    local tt = t and (target_text(t, fmt) .. " " .. verdict(median(v), t)) or ""
    l = l .. ("  %-" .. wc .. "s  %-18s"):format(cell(v, fmt), tt)
  end
  if any then lines[#lines + 1] = l end
end
local extra = {}
for _, b in ipairs(backends) do
  local r = results[b]
  if r.drain_best_jobs_s then
    extra[#extra + 1] = ("%s: best drain %.0f jobs/s at concurrency %d"):format(
      b, r.drain_best_jobs_s.median, r.drain_best_concurrency)
  end
  if r.scale_r1_jobs_s and r.scale_r3_jobs_s then
    local c = {}
    for k = 1, 3 do
      local v = r["scale_r" .. k .. "_jobs_s"]
      c[#c + 1] = v and ("%d: %.0f (%.2fx)"):format(k, v.median,
        v.median / r.scale_r1_jobs_s.median) or (k .. ": -")
    end
    extra[#extra + 1] = ("%s: scale-out curve, runners: %s"):format(b,
      table.concat(c, ", "))
    local cpu = r.scale_r1_cpu_us and r.scale_r1_cpu_us.median
    if cpu and cpu > 0 then
      -- the machine was busy all the while: what it could do is cores
      -- divided by the CPU one job costs, runner and database together
      local at = function(n) return ("%d cores %.0f"):format(n, n * 1e6 / cpu) end
      extra[#extra + 1] = ("%s: %.1f us of CPU per job (runner %.1f, the " ..
        "rest the database and the poller): a CPU-bound ceiling of %s, %s, %s " ..
        "jobs/s, if the database's share spread over cores as the " ..
        "runners' does"):format(b, cpu, r.scale_r1_runner_us.median,
        at(cores), at(8), at(16))
    end
  end
end
print(table.concat(lines, "\n"))
print()
print("Targets: docs/performance.md. PostgreSQL drain 2.5x graphile-worker " ..
  "(18.6k there), SQLite 16x plainjob; the peers run in make bench-peers.")
for _, e in ipairs(extra) do print(e) end
local m = {}
for _, k in ipairs(order) do m[#m + 1] = ("%s: %s"):format(k, machine[k]) end
print(table.concat(m, "; "))
print(("written: %s"):format(json_path))

-- the JSON
local function enc(v, ind)
  ind = ind or ""
  local t = type(v)
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "null" end
    if math.type(v) == "integer" then return tostring(v) end
    return (("%.4f"):format(v):gsub("%.?0+$", ""))
  elseif t == "string" then
    return '"' .. v:gsub('[%c"\\]', function(c)
      return ({ ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t" })[c]
        or ("\\u%04x"):format(c:byte())
    end) .. '"'
  elseif t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts, ni = {}, ind .. "  "
    for _, k in ipairs(keys) do
      parts[#parts + 1] = ni .. enc(k) .. ": " .. enc(v[k], ni)
    end
    return "{\n" .. table.concat(parts, ",\n") .. "\n" .. ind .. "}"
  end
  return "null"
end

-- flat keys per backend hold the median; "<key>_stat" median, min, max, runs
local out = { machine = machine }
for _, b in ipairs(backends) do
  local o = {}
  for k, v in pairs(results[b]) do
    if type(v) == "table" then
      o[k] = v.median
      o[k .. "_stat"] = v
    else
      o[k] = v
    end
  end
  out[b] = o
end
local f = assert(io.open(json_path, "w"))
f:write(enc(out), "\n")
f:close()
