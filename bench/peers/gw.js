#!/usr/bin/env node
// gw.js - the graphile-worker half of `make bench-peers` (bench/peers/run
// drives it). Installs graphile-worker's schema, pushes jobs in bulk and
// times graphile-worker runners (its library API, one Node process each)
// draining them. Prints one line of "key=value" pairs per command, as
// bench/jrbench does. The database is PEERS_PG_URL (a libpq URL).
//
//   node gw.js migrate                  graphile-worker's schema
//   node gw.js push N TASK              N jobs TASK through WorkerUtils'
//                                       addJobs (add_jobs), batches of 1000
//   node gw.js drain N TASK PROCS CONC MODE [URL]
//                                       PROCS runners (child processes),
//                                       each with concurrentJobs CONC, work
//                                       the N jobs TASK queued; MODE
//                                       "default" is the library's defaults,
//                                       "batched" adds its throughput options
//                                       (localQueue, completeJobBatchDelay)
//   node gw.js latency N MS             one runner with the library's
//                                       defaults, idle; N jobs "lat" added
//                                       one at a time (addJob) MS ms apart;
//                                       prints p50_ms p99_ms max_ms of their
//                                       push-to-start latencies
//
// Tasks: "noop" returns at once; "http" GETs URL with Node's fetch, reads
// the body and fails on a status other than 200; "lat" keeps the time from
// its payload's t (the producer's clock right before addJob) to its start.
// Both clocks are process.hrtime, CLOCK_MONOTONIC, one clock for the
// machine's processes. In drain, the clock starts when the
// runners are told to call run() (Node and graphile-worker already loaded
// in each, schema in place) and stops when every job has succeeded and
// the jobs table, polled every 4 ms from the parent, holds none: batched
// completions are counted only once they reach the database. rss_kib is
// the sum of the runners' largest RSS.
"use strict";

const { run, runMigrations, makeWorkerUtils } = require("graphile-worker");
const { Pool } = require("pg");

const URL_ = process.env.PEERS_PG_URL;
const BATCH = 1000;
// the runner's pool: graphile-worker's advice is 10 or concurrentJobs + 2,
// whichever is larger, but the bench's cluster has max_connections = 100
// (its warning that the pool is smaller than concurrentJobs is dropped)
const POOL_MAX = 40;

function die(msg) {
  process.stderr.write(`gw.js: ${msg}\n`);
  process.exit(1);
}

function now() {
  return Number(process.hrtime.bigint()) / 1e9;
}

function makePool(max) {
  const pool = new Pool({ connectionString: URL_, max });
  pool.on("error", (err) => die(`pool: ${err.message}`));
  pool.on("connect", (client) =>
    client.on("error", (err) => die(`connection: ${err.message}`)));
  return pool;
}

function quietLogger() {
  const { Logger } = require("graphile-worker");
  // warnings and errors only, as jobrunner runs with log.level = "warn"
  return new Logger(() => (level, message) => {
    if (/maxPoolSize .* smaller than concurrency/.test(message)) return;
    if (level === "error" || level === "warning")
      process.stderr.write(`graphile-worker ${level}: ${message}\n`);
  });
}

function ms() {
  return Number(process.hrtime.bigint()) / 1e6;
}

const lats = [];

function tasks(url) {
  return {
    noop: async () => {},
    lat: async (payload) => { lats.push(ms() - payload.t); },
    http: async () => {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
    },
  };
}

async function migrate() {
  await runMigrations({ connectionString: URL_, logger: quietLogger() });
  console.log("migrated=1");
}

async function push(n, task) {
  const pool = makePool(2);
  const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger() });
  const specs = [];
  for (let k = 0; k < Math.min(n, BATCH); k++)
    specs.push({ identifier: task, payload: { n: 1 } });
  const t0 = now();
  for (let i = 0; i < n; i += BATCH)
    await utils.addJobs(i + BATCH <= n ? specs : specs.slice(0, n - i));
  const secs = now() - t0;
  await utils.release();
  await pool.end();
  console.log(`secs=${secs.toFixed(6)} rate=${(n / secs).toFixed(1)}`);
}

function options(conc, mode, pool) {
  const o = {
    pgPool: pool,
    concurrency: conc,
    noHandleSignals: true,
    pollInterval: 2000,
    logger: quietLogger(),
  };
  if (mode === "batched") {
    // graphile-worker's own advice for high throughput
    // (docs/performance#batching): a local queue of a batch of locked jobs
    // and completions batched together
    o.preset = {
      worker: {
        localQueue: { size: Math.max(conc + 1, 500) },
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
      },
    };
  } else if (mode !== "default") {
    die(`drain: MODE '${mode}' is neither 'default' nor 'batched'`);
  }
  return o;
}

async function remaining(client) {
  const r = await client.query(
    "select count(*)::int as n from graphile_worker._private_jobs");
  return r.rows[0].n;
}

// one runner in a child process: loaded, it says "ready"; on "go" it
// calls run() and reports its successes, failures and RSS every 10 ms; on
// "stop" it stops the runner and exits
async function child(task, procs, conc, mode, url) {
  const pool = makePool(Math.min(conc + 2, Math.floor(POOL_MAX / procs)));
  const st = { ok: 0, failed: 0, err: null, rss: 0 };
  let runner = null, timer = null;
  const report = () => {
    st.rss = Math.max(st.rss, process.memoryUsage().rss);
    process.send(st);
  };
  process.on("message", async (m) => {
    if (m === "go") {
      runner = await run(options(conc, mode, pool), tasks(url));
      runner.events.on("job:success", () => { st.ok++; });
      runner.events.on("job:error", ({ error }) => {
        st.failed++;
        if (!st.err) st.err = String(error && error.message || error);
      });
      timer = setInterval(report, 10);
    } else if (m === "stop") {
      clearInterval(timer);
      if (task === "lat") st.lats = lats;
      report();
      if (runner) await runner.stop();
      await pool.end();
      process.exit(0);
    }
  });
  process.on("disconnect", () => process.exit(1));   // the parent died
  process.send("ready");
}

async function drain(n, task, procs, conc, mode, url) {
  if (task === "http" && !url) die("drain http: no URL");
  options(conc, mode, null);            // checks MODE before anything runs
  const { fork } = require("child_process");
  const watch = makePool(1);
  const queued = await remaining(watch);
  if (queued !== n) die(`drain: ${queued} jobs queued, expected ${n}`);
  const kids = [], st = [];
  for (let i = 0; i < procs; i++) {
    const k = fork(__filename,
      ["child", task, String(procs), String(conc), mode, url || ""]);
    k.on("exit", (code) => { if (!k.stopping) die(`drain: runner ${i} exited (${code})`); });
    kids.push(k);
  }
  await Promise.all(kids.map((k, i) => new Promise((resolve) =>
    k.on("message", (m) => { if (m === "ready") resolve(); else st[i] = m; }))));
  const t0 = now();
  for (const k of kids) k.send("go");
  let t = t0;
  const sum = (f) => st.reduce((a, x) => a + (x ? x[f] : 0), 0);
  for (;;) {
    await new Promise((r) => setTimeout(r, 4));
    t = now();
    if (sum("failed") > 0)
      die(`drain: ${sum("failed")} jobs failed; first: ${st.find((x) => x && x.err).err}`);
    if (sum("ok") >= n && (await remaining(watch)) === 0) break;
    if (t - t0 > 600) die(`drain: ${sum("ok")} of ${n} done after 600 s`);
  }
  const secs = t - t0;
  await Promise.all(kids.map((k) => new Promise((resolve) => {
    k.stopping = true;
    k.on("exit", resolve);
    k.send("stop");
  })));
  await watch.end();
  console.log(`secs=${secs.toFixed(6)} rate=${(n / secs).toFixed(1)} ` +
    `rss_kib=${Math.round(sum("rss") / 1024)} ok=${sum("ok")}`);
}

const sleep = (secs) => new Promise((r) => setTimeout(r, secs * 1000));

// p-th percentile of the sorted a, as bench/run's: the value at rank
// ceil(n * p / 100)
const pct = (a, p) => a[Math.max(0, Math.ceil(a.length * p / 100) - 1)];

async function latency(n, gapMs) {
  const { fork } = require("child_process");
  const pool = makePool(2);
  const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger() });
  const k = fork(__filename, ["child", "lat", "1", "1", "default", ""]);
  let st = null;
  k.on("exit", (code) => { if (!k.stopping) die(`latency: the runner exited (${code})`); });
  await new Promise((resolve) => k.on("message", (m) => {
    if (m === "ready") resolve(); else st = m;
  }));
  k.send("go");
  await sleep(0.5);                     // as bench/run's runner: 0.5 s idle
  let next = now();
  for (let i = 0; i < n; i++) {
    const wait = next - now();
    if (wait > 0) await sleep(wait);
    next += gapMs / 1000;
    await utils.addJob("lat", { t: ms() });
  }
  const t0 = now();
  while (!st || st.ok + st.failed < n) {
    if (now() - t0 > 30) die(`latency: ${st ? st.ok : 0} of ${n} jobs done after 30 s`);
    await sleep(0.01);
  }
  if (st.failed > 0) die(`latency: ${st.failed} jobs failed; first: ${st.err}`);
  const final = await new Promise((resolve) => {
    k.stopping = true;
    k.removeAllListeners("message");
    k.on("message", (m) => { if (m.lats) resolve(m); });
    k.send("stop");
  });
  await utils.release();
  await pool.end();
  const a = final.lats.sort((x, y) => x - y);
  console.log(`p50_ms=${pct(a, 50).toFixed(3)} p99_ms=${pct(a, 99).toFixed(3)} ` +
    `max_ms=${a[a.length - 1].toFixed(3)} n=${a.length}`);
}

async function main(argv) {
  if (!URL_) die("PEERS_PG_URL is not set");
  const [cmd, ...a] = argv;
  if (cmd === "migrate" && a.length === 0) return migrate();
  if (cmd === "push" && a.length === 2) return push(Number(a[0]), a[1]);
  if (cmd === "drain" && (a.length === 5 || a.length === 6))
    return drain(Number(a[0]), a[1], Number(a[2]), Number(a[3]), a[4], a[5]);
  if (cmd === "latency" && a.length === 2)
    return latency(Number(a[0]), Number(a[1]));
  if (cmd === "child" && a.length === 5)
    return child(a[0], Number(a[1]), Number(a[2]), a[3], a[4]);
  die("usage: gw.js migrate | push N TASK | " +
    "drain N TASK PROCS CONC MODE [URL] | latency N MS");
}

main(process.argv.slice(2)).then(
  () => { if (process.argv[2] !== "child") process.exit(0); },
  (err) => die(err && err.stack || String(err)));
