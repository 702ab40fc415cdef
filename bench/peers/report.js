// report.js RAW JSON - turns bench/peers/run's raw lines ("peer metric
// value") into tables on stdout (the drains, then the latency case) and
// the JSON file: each figure's median with min, max and the number of
// runs, jobrunner's ratio to each graphile-worker setting, and the
// targets with "met" or "NOT met".
"use strict";

const fs = require("fs");
const [rawPath, jsonPath] = process.argv.slice(2);

const data = {}, machine = {};
for (const line of fs.readFileSync(rawPath, "utf8").split("\n")) {
  const m = /^(\S+) (\S+) ?(.*)$/.exec(line);
  if (!m) continue;
  const [, peer, key, v] = m;
  if (peer === "machine") { machine[key] = v; continue; }
  const x = Number(v);
  if (v === "" || !Number.isFinite(x)) continue;    // a figure not produced
  ((data[peer] ||= {})[key] ||= []).push(x);
}

function stat(a) {
  if (!a || a.length === 0) return null;
  a = [...a].sort((x, y) => x - y);
  const n = a.length;
  const median = n % 2 ? a[(n - 1) / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
  return { median, min: a[0], max: a[n - 1], runs: n };
}
const get = (peer, key) => stat(data[peer] && data[peer][key]);

const cfg = Object.fromEntries((machine.config || "").split(" ")
  .map((kv) => kv.split("=")));
const JR = "jobrunner", GWD = "gw_default", GWB = "gw_batched";
const fmt = (x) => Math.round(x).toLocaleString("en-US");
const label = {
  [JR]: "jobrunner",
  [GWD]: "graphile-worker",
  [GWB]: "graphile-worker, batched",
};
const setting = {
  noop: {
    [JR]: `${machine.cores} workers (its default)`,
    [GWD]: `concurrentJobs 1 (its default), ${fmt(Number(cfg.n1))} jobs`,
    [GWB]: `concurrentJobs ${cfg.gw_conc}`,
  },
  io: {
    [JR]: `${cfg.jr_workers} workers x inflight ${cfg.jr_inflight}, jobrunner.http`,
    [GWD]: `concurrentJobs ${cfg.gw_io_conc}, fetch`,
    [GWB]: `concurrentJobs ${cfg.gw_io_conc}, fetch`,
  },
};

// graphile-worker's processes, when more than one
const procs = (s) => cfg.gw_procs && cfg.gw_procs !== "1" ?
  `${cfg.gw_procs} processes x ${s}` : s;
for (const k of ["noop", "io"])
  for (const p of [GWD, GWB]) setting[k][p] = procs(setting[k][p]);

const cell = (s) => !s ? "-" : s.runs === 1 ? `${fmt(s.median)} (1 run)` :
  `${fmt(s.median)} (${fmt(s.min)}-${fmt(s.max)})`;

const out = { machine, figures: {}, ratios: {}, targets: {} };
const rows = [["case", "runner and setting", "jobs/s (median, min-max)",
  "jobrunner / it", "target"]];
const verdict = (ok) => ok ? "met" : "NOT met";

function section(kase, metric, title, targetFor) {
  const jr = get(JR, metric);
  if (!jr && !get(GWD, metric) && !get(GWB, metric)) return;   // not run
  for (const peer of [JR, GWD, GWB]) {
    const s = get(peer, metric);
    if (!s && peer !== JR) continue;
    const name = `${kase}.${peer}`;
    out.figures[name] = s;
    let ratio = "";
    if (peer !== JR && s && jr) {
      const r = jr.median / s.median;
      out.ratios[`${kase}.jobrunner_over_${peer}`] = r;
      ratio = `${r.toFixed(2)}x`;
    }
    const t = targetFor ? targetFor(peer, s, jr) : null;
    let tt = "";
    if (t) { out.targets[`${kase}.${peer}`] = t; tt = `${t.text}: ${t.met === null ? "not run" : verdict(t.met)}`; }
    const what = !s && peer === JR ? "SKIPPED (no jobrunner.http or inflight)" : cell(s);
    rows.push([title, `${label[peer]}: ${setting[kase][peer]}`, what, ratio, tt]);
    title = "";
  }
}

if (get(JR, "push_jobs_s")) {
  const jr = get(JR, "push_jobs_s"), gw = get("gw", "push_jobs_s");
  out.figures["push.jobrunner"] = jr;
  out.figures["push.graphile_worker"] = gw;
  if (jr && gw) out.ratios["push.jobrunner_over_graphile_worker"] = jr.median / gw.median;
  rows.push(["push, batches of 1000", "jobrunner: jr_client_push_many", cell(jr), "", ""]);
  rows.push(["", "graphile-worker: addJobs (add_jobs)", cell(gw),
    jr && gw ? `${(jr.median / gw.median).toFixed(2)}x` : "", ""]);
}
section("noop", "noop_jobs_s", `no-op drain, ${fmt(Number(cfg.N))} jobs`, null);
section("io", "io_jobs_s", `I/O-bound, ${fmt(Number(cfg.io_n))} GETs of ${cfg.delay_ms} ms`,
  (peer, s, jr) => {
    if (peer === JR) return { text: ">= 8,000", met: jr ? jr.median >= 8000 : null };
    if (peer === GWD)
      return { text: "jobrunner >= 6x", met: jr && s ? jr.median >= 6 * s.median : null };
    return { text: "jobrunner above", met: jr && s ? jr.median > s.median : null };
  });

const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
const line = (r) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd();
if (rows.length > 1) {
  console.log(line(rows[0]));
  console.log("-".repeat(line(rows[0]).length));
  for (const r of rows.slice(1)) console.log(line(r));
}

// the latency case: jobrunner on each engine against graphile-worker's
// figures of the same run; the target is jobrunner below it on p50 and p99
const lat = [["latency push->start, " + (cfg.lat_n || "?") +
  " jobs 10 ms apart", "p50 ms", "p99 ms", "max ms", "it / jobrunner p50, p99",
  "target: p50 and p99 below graphile-worker's"]];
const msCell = (s) => !s ? "-" : s.runs === 1 ? `${s.median.toFixed(2)} (1 run)` :
  `${s.median.toFixed(2)} (${s.min.toFixed(2)}-${s.max.toFixed(2)})`;
const gwl = { p50: get("gw", "lat_p50_ms"), p99: get("gw", "lat_p99_ms") };
out.latency = {};
for (const [peer, name] of [["jr_postgres", "jobrunner, PostgreSQL"],
  ["jr_sqlite", "jobrunner, SQLite"], ["gw", "graphile-worker, PostgreSQL"]]) {
  const p50 = get(peer, "lat_p50_ms"), p99 = get(peer, "lat_p99_ms");
  if (!p50) continue;
  const o = { p50_ms: p50, p99_ms: p99, max_ms: get(peer, "lat_max_ms") };
  let ratio = "", tt = "";
  if (peer !== "gw" && gwl.p50 && gwl.p99) {
    o.gw_over_p50 = gwl.p50.median / p50.median;
    o.gw_over_p99 = gwl.p99.median / p99.median;
    o.met = p50.median < gwl.p50.median && p99.median < gwl.p99.median;
    ratio = `${o.gw_over_p50.toFixed(2)}x, ${o.gw_over_p99.toFixed(2)}x`;
    tt = `p50 ${p50.median < gwl.p50.median ? "below" : "NOT below"}, ` +
      `p99 ${p99.median < gwl.p99.median ? "below" : "NOT below"}: ${verdict(o.met)}`;
  }
  out.latency[peer] = o;
  lat.push([name, msCell(p50), msCell(p99), msCell(o.max_ms), ratio, tt]);
}
if (lat.length > 1) {
  const w = lat[0].map((_, i) => Math.max(...lat.map((r) => r[i].length)));
  const l = (r) => r.map((c, i) => c.padEnd(w[i])).join("  ").trimEnd();
  console.log();
  console.log(l(lat[0]));
  console.log("-".repeat(l(lat[0]).length));
  for (const r of lat.slice(1)) console.log(l(r));
}

const extra = [];
for (const peer of [JR, GWD, GWB]) {
  const p = get(peer, "io_peak_requests");
  if (p) extra.push(`${label[peer]}: most GETs the server held at once ${fmt(p.median)} (${fmt(p.min)}-${fmt(p.max)})`);
  out.figures[`io_peak_requests.${peer}`] = p;
}
const wr = get(JR, "io_worker_rss_mib");
if (wr) extra.push(`jobrunner: largest worker RSS in the I/O-bound drain ${wr.median.toFixed(1)} MiB`);
for (const peer of [GWD, GWB]) {
  const r = get(peer, "io_rss_mib");
  if (r) extra.push(`${label[peer]}: largest Node RSS in the I/O-bound drain ${r.median.toFixed(1)} MiB`);
}
out.figures["io_worker_rss_mib.jobrunner"] = wr;
out.figures["io_rss_mib.gw_default"] = get(GWD, "io_rss_mib");
out.figures["io_rss_mib.gw_batched"] = get(GWB, "io_rss_mib");
console.log();
if (rows.length > 1) {
  console.log("batched: graphile-worker's throughput options, localQueue " +
    "(size concurrentJobs + 1, at least 500) and completeJobBatchDelay 0.");
  console.log("Clocks: jobrunner's from the runner's fork+exec, graphile-worker's " +
    "from run() (Node and the library loaded), both to the empty jobs table.");
}
for (const e of extra) console.log(e);
console.log(Object.entries(machine).map(([k, v]) => `${k}: ${v}`).join("; "));
fs.writeFileSync(jsonPath, JSON.stringify(out, null, 2) + "\n");
console.log(`written: ${jsonPath}`);
