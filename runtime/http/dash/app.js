// app.js - the dashboard: one page, its views chosen by the URL's hash
// (#/jobs/123, #/jobs?state=dead, #/queues/media, #/schedules, #/limits,
// #/sequences, #/running, #/dead, #/batches/7), so that a view survives a reload and
// can be linked to. Each view reads /api/ and redraws every few seconds.
// Every value from the server goes in through textContent (never as
// HTML), so a payload or an error holding <script> shows as text. Fields
// a runner does not serve (result, attempts, batches, schedules) are left
// out quietly. The header names the token in use and its scope (GET
// /api/whoami); the controls it may not use are greyed out.
"use strict";
(function () {
  var REFRESH_MS = 2000, PAGE = 50;
  var $ = function (id) { return document.getElementById(id); };
  var route = { page: "overview", arg: null, params: {} };
  var shown = null;                         // the job in the detail view

  function token() { return localStorage.getItem("jobrunner.token") || ""; }

  function api(path, body, method) {
    var opts = { headers: {} };
    if (token()) opts.headers.Authorization = "Bearer " + token();
    if (body !== undefined) {
      opts.method = method || "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch("/api/" + path, opts).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) { var e = new Error(r.status + ": " + (j.error || r.statusText)); e.status = r.status; throw e; }
        return j;
      });
    });
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function link(text, hash) { var a = el("a", text); a.href = hash; return a; }

  function ago(t) {
    if (!t) return "";
    var s = Date.now() / 1000 - t;
    var future = s < 0; s = Math.abs(s);
    var v = s < 60 ? Math.round(s) + "s" : s < 3600 ? Math.round(s / 60) + "m" :
            s < 86400 ? (s / 3600).toFixed(1) + "h" : (s / 86400).toFixed(1) + "d";
    return future ? "in " + v : v + " ago";
  }

  function when(t) { return t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC (" + ago(t) + ")" : ""; }

  function dur(s) {
    return s < 60 ? s.toFixed(1) + "s" : Math.floor(s / 60) + "m" + Math.round(s % 60) + "s";
  }

  function rows(table, list, make, empty) {
    var tb = $(table).tBodies[0];
    tb.textContent = "";
    if (!list.length) {
      var tr = el("tr"), td = el("td", empty, "empty");
      td.colSpan = $(table).tHead.rows[0].cells.length;
      tr.appendChild(td); tb.appendChild(tr);
      return;
    }
    list.forEach(function (x) { tb.appendChild(make(x)); });
  }

  function tr(cells, onclick) {
    var r = el("tr");
    cells.forEach(function (c) {
      if (c instanceof Node) { var td = el("td"); td.appendChild(c); r.appendChild(td); }
      else r.appendChild(el("td", c, typeof c === "number" ? "num" : ""));
    });
    if (onclick) { r.className = "click"; r.addEventListener("click", onclick); }
    return r;
  }

  function go(hash) { return function () { location.hash = hash; }; }

  function stateOf(j) {
    return j.state === "queued" ? (j.run_at && j.run_at > Date.now() / 1000 ? "scheduled" : "ready") : j.state;
  }

  function badge(state) { return el("span", state, "state " + state); }

  /* What the token in use may do (GET /api/whoami): the controls it may
   * not use are greyed out (data-needs="write", disabled), with why. */
  var may = { write: false, text: "" };

  function gate(b) {
    b.dataset.needs = "write";
    b.disabled = !may.write;
    b.title = may.write ? "" : may.text;
    return b;
  }

  function applyScope() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-needs]"), gate);
  }

  function whoami(w) {
    may = { write: !!w.write, text: w.may || "" };
    $("who").textContent = w.name ? "token " + w.name + " · " + w.scope +
      (Array.isArray(w.queues) ? " (" + w.queues.join(", ") + ")" : "") : "no token · read only";
    $("who").title = may.text;
    applyScope();
  }

  function noWho(e) {
    may = { write: false, text: e.message };
    $("who").textContent = e.status === 401 ? "no valid token" : "";
    applyScope();
    throw e;
  }

  function button(text, fn, cls) {
    var b = gate(el("button", text, cls));
    b.addEventListener("click", function (e) { e.stopPropagation(); fn(); });
    return b;
  }

  function buttons(list) {
    var span = el("span", null, "actions");
    list.forEach(function (b) { if (b) span.appendChild(button(b[0], b[1], b[2])); });
    return span;
  }

  function say(text, error) {
    var m = $("message");
    m.textContent = text; m.className = "message" + (error ? " error" : "");
    m.hidden = false;
    clearTimeout(say.t);
    say.t = setTimeout(function () { m.hidden = true; }, 6000);
  }

  function act(path, body, done) {
    return api(path, body || {}).then(function (r) {
      say(done(r)); refresh();
    }).catch(function (e) { say(e.message, true); });
  }

  function fields(dl, list) {
    dl.textContent = "";
    list.forEach(function (f) {
      if (f[1] === null || f[1] === undefined || f[1] === "") return;
      dl.appendChild(el("dt", f[0]));
      var dd = el("dd"); dd.appendChild(f[1] instanceof Node ? f[1] : document.createTextNode(String(f[1])));
      dl.appendChild(dd);
    });
  }

  function cards(box, list) {
    box.textContent = "";
    list.forEach(function (c) {
      var d = el("div", null, "card " + c[0]);
      d.appendChild(el("div", c[1], "n")); d.appendChild(el("div", c[0], "l"));
      box.appendChild(d);
    });
  }

  /* ---- the overview ---- */

  function drawStats(s) {
    cards($("summary"), [["ready", s.ready], ["scheduled", s.scheduled], ["waiting", s.waiting || 0],
                         ["running", s.running], ["dead", s.dead]].concat(
                         s.expired ? [["expired", s.expired]] : []));
    rows("queues", s.queues, function (q) {
      var name = el("span", null);
      name.appendChild(link(q.name, "#/queues/" + encodeURIComponent(q.name)));
      if (q.paused) { name.appendChild(document.createTextNode(" ")); name.appendChild(badge("paused")); }
      return tr([name, q.ready, q.scheduled, q.waiting || 0, q.running, q.dead, pauseButton(q)]);
    }, "no queues yet");
    var names = Object.keys(s.names).sort();
    rows("names", names, function (n) {
      var c = s.names[n];
      return tr([n, c.ready, c.scheduled, c.waiting || 0, c.running, c.dead], go("#/jobs?name=" + encodeURIComponent(n)));
    }, "no jobs");
  }

  function pauseButton(q) {
    return button(q.paused ? "Resume" : "Pause", function () {
      act("queues/" + encodeURIComponent(q.name) + (q.paused ? "/resume" : "/pause"),
          {}, function () { return "queue " + q.name + (q.paused ? " resumed" : " paused"); });
    });
  }

  function drawRunning(r) {
    rows("running", r.running, function (j) {
      return tr([j.id, j.name, j.queue, "#" + j.worker + " (pid " + j.pid + ")",
                 (j.generation || "").slice(0, 8), dur(j.seconds)], go("#/jobs/" + j.id));
    }, "no job running");
    chart(r.throughput.minutes);
  }

  function chart(mins) {
    var W = 600, H = 140, n = mins.length, max = 1, done = 0, failed = 0;
    mins.forEach(function (m) { max = Math.max(max, m.done + m.failed); done += m.done; failed += m.failed; });
    var ns = "http://www.w3.org/2000/svg", svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("preserveAspectRatio", "none");
    var bw = W / n;
    mins.forEach(function (m, i) {
      [[m.done, 0, "#2f9e6b"], [m.failed, m.done, "#d9473f"]].forEach(function (p) {
        if (!p[0]) return;
        var r = document.createElementNS(ns, "rect"), h = p[0] / max * (H - 10);
        r.setAttribute("x", i * bw + 1); r.setAttribute("width", Math.max(bw - 2, 1));
        r.setAttribute("y", H - h - p[1] / max * (H - 10)); r.setAttribute("height", h);
        r.setAttribute("fill", p[2]);
        var t = document.createElementNS(ns, "title");
        t.textContent = new Date(m.t * 1000).toLocaleTimeString() + ": " + m.done + " ok, " + m.failed + " failed";
        r.appendChild(t); svg.appendChild(r);
      });
    });
    var base = document.createElementNS(ns, "line");
    base.setAttribute("x1", 0); base.setAttribute("x2", W); base.setAttribute("y1", H - 0.5);
    base.setAttribute("y2", H - 0.5); base.setAttribute("stroke", "#ccd");
    svg.appendChild(base);
    $("chart").textContent = ""; $("chart").appendChild(svg);
    $("rate").textContent = "· " + done + " ok, " + failed + " failed" +
      (done + failed ? " (" + (100 * failed / (done + failed)).toFixed(1) + "% failure)" : "") +
      " · peak " + max + "/min";
  }

  function loadOverview() {
    return Promise.all([api("stats").then(drawStats), api("runner").then(drawRunning)]);
  }

  /* ---- running jobs, with progress ---- */

  function progressCell(j) {
    var span = el("span", null, "prog");
    if (j.progress_done === null || j.progress_done === undefined) return el("span", "–", "muted");
    if (j.progress_total) {
      var p = el("progress"); p.max = j.progress_total; p.value = Math.min(j.progress_done, j.progress_total);
      span.appendChild(p);
      span.appendChild(el("span", " " + j.progress_done + " / " + j.progress_total + " (" +
        Math.round(100 * j.progress_done / j.progress_total) + "%)"));
    } else {
      span.appendChild(el("span", String(j.progress_done)));
    }
    return span;
  }

  function loadRunning() {
    return Promise.all([api("jobs?state=running&limit=500"), api("runner")]).then(function (v) {
      var workers = {};
      v[1].running.forEach(function (r) { workers[r.id] = r; });
      rows("progress", v[0], function (j) {
        var w = workers[j.id];
        return tr([j.id, j.name, j.queue, (j.locked_by || "") + (w ? " #" + w.worker : ""),
          ago(j.started_at), progressCell(j), j.progress_note || "",
          buttons([["Cancel", function () { cancelJob(j.id); }]])], go("#/jobs/" + j.id));
      }, "no job running");
    });
  }

  function cancelJob(id) {
    return act("jobs/" + id + "/cancel", {}, function (r) {
      var o = r.jobs[0].outcome;
      return "job " + id + ": " + (o === "cancel_requested" ? "cancel requested (its worker is told to stop)" :
        o === "finished" ? "already finished, nothing cancelled" : o.replace("_", " "));
    });
  }

  /* ---- dead jobs ---- */

  function loadDead() {
    return api("dead?limit=100").then(function (list) {
      rows("dead", list, function (d) {
        var r = tr([d.id, d.name, d.queue, d.attempts, ago(d.died_at),
          el("span", (d.last_error || "").split("\n")[0]),
          buttons([["Retry", function () { retryJob(d.id); }],
                   ["Purge", function () { purgeJob(d.id); }, "danger"]])], go("#/jobs/" + d.id));
        r.cells[5].className = "err";
        return r;
      }, "no dead jobs");
    });
  }

  function retryJob(id) {
    return act("jobs/" + id + "/retry", {}, function (r) {
      return "job " + id + (r.retried ? " queued again" : " was not dead: nothing retried");
    });
  }

  function purgeJob(id, after) {
    if (!confirm("Delete dead job " + id + "?")) return;
    return act("jobs/" + id + "/purge", {}, function (r) {
      if (after && r.purged) location.hash = after;
      return "job " + id + (r.purged ? " purged" : " was not dead: nothing purged");
    });
  }

  /* ---- the job list: filters, keyset pages, bulk actions ---- */

  var FILTERS = ["state", "name", "queue", "where"];

  function filterQuery(p) {
    return FILTERS.filter(function (k) { return p[k]; }).map(function (k) {
      return k + "=" + encodeURIComponent(p[k]);
    }).join("&");
  }

  function jobsHash(p) { var q = filterQuery(p); return "#/jobs" + (q ? "?" + q : ""); }

  function loadJobs() {
    var p = route.params, q = filterQuery(p);
    FILTERS.forEach(function (k) { var i = $("f-" + k); if (document.activeElement !== i) i.value = p[k] || ""; });
    var cursor = p.after_id ? "&after_id=" + encodeURIComponent(p.after_id) :
                 p.before_id ? "&before_id=" + encodeURIComponent(p.before_id) : "";
    return api("jobs?limit=" + (PAGE + 1) + (q ? "&" + q : "") + cursor).then(function (list) {
      var more = list.length > PAGE;
      list = p.after_id ? list.slice(Math.max(0, list.length - PAGE)) : list.slice(0, PAGE);
      rows("jobs", list, function (j) {
        return tr([j.id, j.name, j.queue, badge(stateOf(j)), j.attempts, ago(j.run_at)], go("#/jobs/" + j.id));
      }, "no jobs match");
      $("p-older").disabled = p.after_id ? !list.length : !more;
      $("p-newer").disabled = p.after_id ? !more : !p.before_id;
      $("p-newest").disabled = !p.after_id && !p.before_id;
      $("p-older").dataset.to = list.length ? list[list.length - 1].id : "";
      $("p-newer").dataset.to = list.length ? list[0].id : "";
      $("j-count").textContent = list.length ? "· ids " + list[0].id + " to " + list[list.length - 1].id : "";
    });
  }

  function page(dir) {
    var p = {}, to = $(dir === "older" ? "p-older" : "p-newer").dataset.to;
    FILTERS.forEach(function (k) { if (route.params[k]) p[k] = route.params[k]; });
    var q = filterQuery(p);
    location.hash = "#/jobs?" + (q ? q + "&" : "") + (dir === "older" ? "before_id=" : "after_id=") + to;
  }

  function bulk(action, verb) {
    var q = filterQuery(route.params);
    if (!q) { say("set a filter first: a bulk action never takes every job", true); return; }
    var what = FILTERS.filter(function (k) { return route.params[k]; }).map(function (k) {
      return k + " " + route.params[k];
    }).join(", ");
    if (!confirm(verb + " every job matching " + what + "?")) return;
    act("bulk/" + action + "?" + q, {}, function (r) {
      if (action === "cancel")
        return r.matched + " jobs matched: " + r.cancelled + " cancelled, " + r.cancel_requested +
          " running told to stop, " + r.finished + " already finished";
      return r.matched + " dead jobs matched: " + (action === "retry" ? r.retried + " queued again" : r.purged + " purged");
    });
  }

  /* ---- one job ---- */

  function jsonText(v) {
    if (typeof v !== "string") return JSON.stringify(v, null, 2);
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch (e) { return v; }
  }

  function relations(j) {
    var box = $("d-links"); box.textContent = "";
    [["parents", j.parents], ["children", j.children]].forEach(function (x) {
      if (!Array.isArray(x[1]) || !x[1].length) return;
      var p = el("p", x[0] + ": ", "rel");
      x[1].forEach(function (r) {
        p.appendChild(link(String(r.id), "#/jobs/" + r.id)); p.appendChild(document.createTextNode(" "));
        if (r.state) { p.appendChild(badge(r.state)); p.appendChild(document.createTextNode(" ")); }
      });
      box.appendChild(p);
    });
    if (j.batch !== undefined && j.batch !== null) {
      var b = el("p", "batch: ", "rel"); b.appendChild(link(String(j.batch), "#/batches/" + j.batch));
      box.appendChild(b);
    }
  }

  /* A log line's text with its control characters shown as \xNN (as
   * `jobrunner show --logs` does), a tab and a newline kept. */
  function visible(t) {
    return String(t).replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, function (c) {
      return "\\x" + ("0" + c.charCodeAt(0).toString(16)).slice(-2);
    });
  }

  /* One run's kept lines (GET /api/jobs/ID/logs), as text. */
  function logLines(run) {
    var out = [];
    if (run.dropped_lines > 0)
      out.push("(" + run.dropped_lines + " earlier lines dropped, " + run.dropped_bytes + " bytes: over log.attempt_max)");
    (run.lines || []).forEach(function (l) {
      var t = l.at ? new Date(l.at * 1000).toISOString().slice(11, 23) : "";
      out.push(t + " " + (String(l.level) + "      ").slice(0, 6) + " " + visible(l.msg));
    });
    return out.join("\n");
  }

  /* The failed attempts and each run's logs under its attempt: a run
   * with no failed attempt of its number (the last one, a snooze) gets
   * an entry of its own. Numbers repeat once a dead job is retried (its
   * attempts count again from 1), so a run goes to one attempt only: the
   * oldest of its number not taken yet that ended after the run's first
   * line (both lists are oldest first), none before the one the run
   * before took. */
  function attempts(list, runs) {
    list = Array.isArray(list) ? list : [];
    runs = Array.isArray(runs) ? runs : [];
    $("d-attempts-box").hidden = !list.length && !runs.length;
    var ol = $("d-attempts"); ol.textContent = "";
    var items = list.map(function (a, i) { return { a: a, n: a.attempt, at: a.at, i: i, runs: [] }; });
    var from = 0, own = [];
    runs.forEach(function (r) {
      for (var k = from; k < items.length; k++) {
        var x = items[k];
        if (x.n === r.attempt && !x.runs.length && !(x.at + 1 < r.at)) {
          x.runs.push(r);
          from = k + 1;
          return;
        }
      }
      own.push({ a: null, n: r.attempt, at: r.at, i: items.length + own.length, runs: [r] });
    });
    /* by time: a run of its own after the attempts that ended before it */
    items = items.concat(own);
    items.sort(function (x, y) { return x.at - y.at || x.i - y.i; });
    items.forEach(function (x) {
      var li = el("li"), a = x.a;
      li.appendChild(el("span", "attempt " + x.n, "at-n"));
      if (a) {
        li.appendChild(el("span", " " + when(a.at) + (a.duration !== undefined && a.duration !== null ? " · ran " + dur(a.duration) : "") +
          (a.runner ? " · " + a.runner : "") + (a.worker !== undefined && a.worker !== null ? " #" + a.worker : "") +
          (a.generation ? " · gen " + String(a.generation).slice(0, 8) : ""), "muted"));
        li.appendChild(el("pre", a.error || "(no error)"));
      } else {
        li.className = "run";
        li.appendChild(el("span", " " + when(x.at), "muted"));
      }
      x.runs.forEach(function (r) {
        li.appendChild(el("h4", "logs"));
        li.appendChild(el("pre", logLines(r), "log"));
      });
      ol.appendChild(li);
    });
  }

  /* A job's steps as a timeline, each with a button that reruns the job
   * from it (its payload as it is). */
  var shownJob = null;
  function steps(list) {
    $("d-steps-box").hidden = !Array.isArray(list) || !list.length;
    var ol = $("d-steps"); ol.textContent = "";
    (list || []).forEach(function (s) {
      var li = el("li");
      li.appendChild(el("span", s.name, "at-n"));
      li.appendChild(el("span", " " + (s.state === "done" ? "recorded" : "checkpoint") + " " + when(s.at) +
        " · ran " + dur(s.duration) + " · attempt " + s.attempt, "muted"));
      var b = gate(el("button", "rerun from here"));
      b.addEventListener("click", function () { rerunJob(shown, s.name); });
      li.appendChild(b);
      li.appendChild(el("pre", (s.state === "done" ? "" : "cursor ") + JSON.stringify(s.state === "done" ? s.value : s.cursor)));
      ol.appendChild(li);
    });
  }

  function rerunJob(id, step) {
    var body = shownJob && shownJob.payload ? JSON.parse(shownJob.payload) : {};
    return act("jobs/" + id + "/rerun" + (step ? "?from_step=" + encodeURIComponent(step) : ""), body,
      function () { return "job " + id + " queued again" + (step ? " from step " + step : ""); });
  }

  /* a waiting job's signal and its deadline, or the date of its sleep */
  function waitsFor(j) {
    if (j.state !== "waiting" || (!j.wait_on && !j.wake_at)) return null;
    if (!j.wait_on) return "a date: " + when(j.wake_at);
    return "signal '" + j.wait_on + "'" + (j.wake_at ? ", until " + when(j.wake_at) : ", no deadline");
  }

  function loadJob() {
    var id = route.arg;
    return api("jobs/" + encodeURIComponent(id)).then(function (j) {
      shown = j.id;
      $("d-id").textContent = j.id + " (" + j.name + ")";
      var st = stateOf(j), q = link(j.queue, "#/queues/" + encodeURIComponent(j.queue));
      var count = Array.isArray(j.attempts) ? j.attempt : j.attempts;
      fields($("d-fields"), [["state", badge(st)], ["queue", q], ["attempts", count +
        (j.max_retries !== null ? " of " + (j.max_retries + 1) : "")],
       ["priority", j.priority], ["run at", when(j.run_at)],
       ["created", when(j.created_at)], ["started", when(j.started_at)],
       ["finished", when(j.finished_at)], ["generation", j.generation],
       ["runner", j.locked_by], ["progress", j.progress_done !== null ? progressCell(j) : null],
       ["note", j.progress_note], ["cancel", j.cancel_requested ? "requested" : null],
       ["waits for", waitsFor(j)]]);
      relations(j);
      $("d-payload").textContent = jsonText(j.payload);
      $("d-result-box").hidden = j.result === undefined || j.result === null;
      $("d-result").textContent = j.result === undefined || j.result === null ? "" : jsonText(j.result);
      $("d-error").textContent = j.last_error || "(none)";
      shownJob = j;
      steps(j.steps);
      $("d-rerun").hidden = j.state === "running" || j.state === "waiting";
      $("d-retry").hidden = j.state !== "dead" && j.state !== "expired";
      $("d-purge").hidden = j.state !== "dead";
      $("d-cancel").hidden = j.state !== "queued" && j.state !== "running" && j.state !== "waiting";
      /* its runs' logs under their attempts; the view is loaded once they are drawn */
      var failed = Array.isArray(j.attempts) ? j.attempts : null;
      return api("jobs/" + encodeURIComponent(j.id) + "/logs").then(function (l) {
        if (shown === j.id) attempts(failed, l.runs);
      }, function () { if (shown === j.id) attempts(failed, null); });
    }).catch(function (e) {
      if (e.status !== 404) throw e;
      shown = null;
      $("d-id").textContent = id + ": no such job (purged, pruned, or never pushed)";
      ["d-fields", "d-payload", "d-error", "d-links"].forEach(function (x) { $(x).textContent = ""; });
      $("d-retry").hidden = $("d-purge").hidden = $("d-cancel").hidden = $("d-rerun").hidden = true;
      $("d-result-box").hidden = $("d-attempts-box").hidden = $("d-steps-box").hidden = true;
    });
  }

  /* ---- queues ---- */

  function loadQueues() {
    return api("queues").then(function (list) {
      rows("qlist", list, function (q) {
        return tr([q.name, q.ready, q.scheduled, q.waiting || 0, q.running, q.dead, q.cancelled, q.completed, pauseButton(q)],
                  go("#/queues/" + encodeURIComponent(q.name)));
      }, "no queues yet");
    });
  }

  function loadQueue() {
    var name = route.arg;
    $("q-name").textContent = name;
    $("q-all").href = "#/jobs?queue=" + encodeURIComponent(name);
    return Promise.all([api("queues"), api("jobs?limit=20&queue=" + encodeURIComponent(name))]).then(function (v) {
      var q = v[0].filter(function (x) { return x.name === name; })[0] ||
              { name: name, paused: false, ready: 0, scheduled: 0, waiting: 0, running: 0, dead: 0, cancelled: 0, completed: 0 };
      cards($("q-cards"), [["ready", q.ready], ["scheduled", q.scheduled], ["waiting", q.waiting || 0], ["running", q.running],
        ["dead", q.dead], ["cancelled", q.cancelled], ["completed", q.completed]].concat(
        q.expired ? [["expired", q.expired]] : []));
      $("q-paused").textContent = ""; if (q.paused) $("q-paused").appendChild(badge("paused"));
      $("q-toggle").textContent = q.paused ? "Resume" : "Pause";
      $("q-toggle").dataset.paused = q.paused ? "1" : "";
      rows("qjobs", v[1], function (j) {
        return tr([j.id, j.name, badge(stateOf(j)), j.attempts, ago(j.run_at)], go("#/jobs/" + j.id));
      }, "no jobs in this queue");
    });
  }

  /* ---- schedules (GET /api/schedules; absent on a runner without it) ---- */

  function pick(o, keys) {
    for (var i = 0; i < keys.length; i++) if (o[keys[i]] !== undefined && o[keys[i]] !== null) return o[keys[i]];
    return null;
  }

  function lastFire(s) {
    var lf = s.last_fire, at = lf && typeof lf === "object" ? pick(lf, ["at", "time"]) : pick(s, ["last_fire_at", "last_fire"]);
    var job = lf && typeof lf === "object" ? pick(lf, ["job", "job_id", "id"]) : pick(s, ["last_job_id", "last_job"]);
    var span = el("span", at ? when(at) : "never");
    if (job) { span.appendChild(document.createTextNode(" · job ")); span.appendChild(link(String(job), "#/jobs/" + job)); }
    return span;
  }

  function period(s) {
    if (typeof s !== "number") return String(s);
    return [[86400, "d"], [3600, "h"], [60, "m"], [1, "s"]].filter(function (u) {
      return s % u[0] === 0;
    }).map(function (u) { return s / u[0] + u[1]; })[0] || s + "s";
  }

  function initScheduleForm() {
    var form = $("sd-form");
    if (!form || form.ready) return;
    form.ready = true;
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    $("sd-add").addEventListener("click", function () { defAct($("sd-name").value, "POST"); });
    $("sd-set").addEventListener("click", function () { defAct($("sd-name").value, "PUT"); });
  }

  function loadSchedules() {
    initScheduleForm();
    return api("schedules").then(function (list) {
      $("s-none").hidden = true;
      list = Array.isArray(list) ? list : list.schedules || [];
      rows("schedules", list, function (s) {
        var n = encodeURIComponent(s.name), every = pick(s, ["every", "interval"]);
        var name = el("span", s.name + " ");
        if (s.paused) name.appendChild(badge("paused"));
        var next = (pick(s, ["next", "next_fires"]) || []).map(function (t) { return when(t); });
        return tr([name, s.cron ? "cron " + s.cron : every !== null ? "every " + period(every) : "",
          pick(s, ["tz", "time_zone", "timezone"]) || "local", String(pick(s, ["catch_up"]) === null ? "" : pick(s, ["catch_up"])),
          lastFire(s), el("span", next.join("\n"), "lines"),
          buttons([["Fire now", function () { fire(s.name, n); }],
                   [s.paused ? "Resume" : "Pause", function () {
                     act("schedules/" + n + (s.paused ? "/resume" : "/pause"), {}, function (r) {
                       return "schedule " + s.name + (r.changed === false ? " was already" : "") +
                         (s.paused ? " resumed" : " paused");
                     });
                   }],
                   s.source === "runtime" ? ["Edit", function () { editSchedule(s); }] : null,
                   s.source === "runtime" ? ["Remove", function () { defAct(s.name, "DELETE"); }, "danger"] : null])]);
      }, "no schedules");
    }).catch(function (e) {
      if (e.status !== 404) throw e;
      rows("schedules", [], null, "");
      $("s-none").hidden = false;
      $("s-none").textContent = "This runner serves no schedules API (GET /api/schedules).";
    });
  }

  /* schedules managed at run time: the form's name and fields (JSON, as
     the config writes a schedule); POST adds, PUT changes, DELETE removes */
  function editSchedule(s) {
    var f = { job: s.job, payload: s.payload, queue: s.queue, priority: s.priority,
              catch_up: s.catch_up, tz: s.tz, overlap: s.overlap };
    if (s.cron) f.cron = s.cron; else f.every = s.every;
    if (s.jitter) f.jitter = s.jitter;
    if (s.start_at) f.start_at = s.start_at;
    if (s.end_at) f.end_at = s.end_at;
    $("sd-name").value = s.name;
    $("sd-def").value = JSON.stringify(f, null, 1);
  }

  function defAct(name, method) {
    var body = {};
    if (!name) { say("a schedule needs a name", true); return; }
    if (method !== "DELETE") {
      try { body = JSON.parse($("sd-def").value || "{}"); } catch (e) {
        say("the fields are not JSON: " + e.message, true); return;
      }
    }
    api("schedules/" + encodeURIComponent(name), body, method).then(function () {
      say("schedule " + name + (method === "POST" ? " added" : method === "PUT" ? " changed" : " removed") +
          "; every runner follows it within a second or so");
      setTimeout(refresh, 1500);
    }).catch(function (e) { say(e.message, true); });
  }

  function fire(name, n) {
    act("schedules/" + n + "/fire", {}, function (r) {
      var job = pick(r, ["job", "job_id"]);
      return "schedule " + name + (job ? " fired: job " + job : r.asked === false ? ": not fired" :
        ": fire asked" + (r.at ? " for " + when(r.at) : "") + ", its job shows as the last fire");
    });
  }

  /* ---- limits ---- */

  function setText(s) {
    var a = [];
    if (s.concurrency) a.push(s.concurrency + " at once");
    if (s.rate) a.push(s.rate);
    return a.join(", ") || "–";
  }

  function useCell(l) {
    var span = el("span", null, "prog");
    if (l.limit.concurrency) {
      var p = el("progress"); p.max = l.limit.concurrency; p.value = Math.min(l.running, l.limit.concurrency);
      span.appendChild(p);
    }
    span.appendChild(el("span", " " + l.running + (l.limit.concurrency ? " / " + l.limit.concurrency : "") + " running"));
    return span;
  }

  function topKeys(l) {
    return el("span", l.top_keys.map(function (k) {
      return k.key + ": " + k.running + " running, " + k.waiting + " waiting" +
        (k.tokens !== null && k.tokens !== undefined ? ", " + Number(k.tokens).toFixed(1) + " tokens" : "");
    }).join("\n") || "–", "lines");
  }

  function scopeQuery(scope) {
    return scope.indexOf("queue:") === 0 ? "queue=" + encodeURIComponent(scope.slice(6)) :
           "name=" + encodeURIComponent(scope);
  }

  /* each fair queue's keys with most ready jobs (GET /api/stats' fair) */
  function loadFair() {
    return api("stats").then(function (s) {
      var list = [];
      Object.keys(s.fair || {}).sort().forEach(function (q) {
        (s.fair[q].top || []).forEach(function (k) { k.queue = q; list.push(k); });
      });
      rows("fair", list, function (k) {
        return tr([k.queue, k.key === "" ? "\"\"" : k.key, k.waiting, k.running, k.weight,
                   (100 * k.share).toFixed(1) + "%"], go("#/queues/" + encodeURIComponent(k.queue)));
      }, "no fair queue has ready jobs");
    });
  }

  function loadLimits() {
    return Promise.all([loadFair(), loadLimitRows()]);
  }

  function loadLimitRows() {
    return api("limits").then(function (list) {
      rows("limits", list, function (l) {
        return tr([l.name, l.key ? "payload." + l.key : "–", setText(l.limit), setText(l.per_key), useCell(l),
                   l.waiting, l.tokens === null ? "–" : Number(l.tokens).toFixed(1), topKeys(l)],
                  go("#/jobs?state=ready&" + scopeQuery(l.name)));
      }, "no limits in the config");
      var busy = list.filter(function (l) { return l.waiting > 0; });
      return Promise.all(busy.map(function (l) {
        return api("jobs?state=ready&limit=20&" + scopeQuery(l.name)).then(function (js) {
          return js.map(function (j) { j.limit = l.name; return j; });
        });
      })).then(function (lists) {
        rows("lwaiting", [].concat.apply([], lists), function (j) {
          return tr([j.id, j.limit, j.name, j.queue, ago(j.run_at)], go("#/jobs/" + j.id));
        }, "no job waits on a limit");
      });
    });
  }

  /* ---- sequences: the blocked first, with Skip and Unblock ---- */

  function loadSequences() {
    return api("sequences").then(function (list) {
      list.sort(function (a, b) { return (b.blocked ? 1 : 0) - (a.blocked ? 1 : 0); });
      rows("sequences", list, function (q) {
        var k = encodeURIComponent(q.key), name = el("span", q.key + " ");
        if (q.blocked) name.appendChild(badge("blocked"));
        return tr([name, q.head, badge(q.state), q.jobs, q.blocked ? buttons([
          ["Skip", function () {
            act("sequences/skip?key=" + k, {}, function () {
              return "sequence " + q.key + ": job " + q.head + " skipped, the next runs";
            });
          }],
          ["Unblock", function () {
            act("sequences/unblock?key=" + k, {}, function () {
              return "sequence " + q.key + ": job " + q.head + " queued again in its place";
            });
          }]]) : ""], go("#/jobs/" + q.head));
      }, "no sequences with jobs");
    });
  }

  /* ---- a batch (GET /api/batches/ID; absent on a runner without it) ---- */

  function loadBatch() {
    var id = route.arg;
    $("bt-id").textContent = id;
    return api("batches/" + encodeURIComponent(id)).then(function (b) {
      $("bt-done").textContent = ""; $("bt-done").appendChild(badge(b.done ? "completed" : "running"));
      var c = b.counts || {};
      cards($("bt-cards"), ["pending", "completed", "dead", "cancelled"].filter(function (k) {
        return c[k] !== undefined;
      }).map(function (k) { return [k, c[k]]; }).concat(b.total !== undefined ? [["total", b.total]] : []));
      fields($("bt-fields"), [["on complete", b.on_complete], ["on success", b.on_success],
        ["done", b.done ? "yes" : "no"], ["finished", when(b.finished_at)]]);
      rows("bt-members", b.members || [], function (m) {
        var mid = typeof m === "object" ? m.id : m;
        return tr([mid, m.state ? badge(m.state) : ""], go("#/jobs/" + mid));
      }, "no members");
    }).catch(function (e) {
      if (e.status !== 404) throw e;
      $("bt-done").textContent = /no such API route/.test(e.message) ?
        "(this runner serves no batches API)" : "(no such batch)";
      cards($("bt-cards"), []); $("bt-fields").textContent = "";
      rows("bt-members", [], null, "");
    });
  }

  /* ---- the router ---- */

  var PAGES = {
    overview: loadOverview, running: loadRunning, dead: loadDead, jobs: loadJobs,
    job: loadJob, queues: loadQueues, queue: loadQueue, schedules: loadSchedules,
    limits: loadLimits, sequences: loadSequences, batch: loadBatch, notfound: function () { return Promise.resolve(); }
  };
  var ROUTES = [["", "overview"], ["running", "running"], ["dead", "dead"], ["jobs", "jobs"],
    ["jobs/*", "job"], ["queues", "queues"], ["queues/*", "queue"], ["schedules", "schedules"],
    ["limits", "limits"], ["sequences", "sequences"], ["batches/*", "batch"]];

  function parse() {
    var h = location.hash.replace(/^#\/?/, ""), i = h.indexOf("?");
    var path = (i < 0 ? h : h.slice(0, i)).replace(/\/+$/, ""), params = {};
    new URLSearchParams(i < 0 ? "" : h.slice(i + 1)).forEach(function (v, k) { params[k] = v; });
    var parts = path ? path.split("/") : [];
    for (var r = 0; r < ROUTES.length; r++) {
      var pat = ROUTES[r][0] ? ROUTES[r][0].split("/") : [];
      if (pat.length !== parts.length) continue;
      var arg = null, ok = pat.every(function (p, k) {
        if (p === "*") { arg = decodeURIComponent(parts[k]); return arg !== ""; }
        return p === parts[k];
      });
      if (ok) return { page: ROUTES[r][1], arg: arg, params: params };
    }
    return { page: "notfound", arg: path, params: params };
  }

  function navigate() {
    route = parse();
    var nav = route.page === "job" || route.page === "batch" ? "jobs" : route.page === "queue" ? "queues" : route.page;
    Array.prototype.forEach.call(document.querySelectorAll(".page"), function (p) {
      p.hidden = p.dataset.page !== route.page;
    });
    Array.prototype.forEach.call(document.querySelectorAll("#nav a"), function (a) {
      var page = a.getAttribute("href").replace(/^#\/?/, "") || "overview";
      a.className = page === nav ? "on" : "";
    });
    $("nf-text").textContent = "Nothing at #/" + (route.arg || "") + ".";
    document.title = "jobrunner · " + (route.arg ? route.page + " " + route.arg : route.page);
    document.body.dataset.loaded = "";
    refresh();
  }

  function status(r) {
    $("status").textContent = "pid " + r.pid + " · workers " + r.workers.busy + "/" +
      r.workers.total + " busy · generation " + (r.generation || "?").slice(0, 8) +
      (r.stopping ? " · stopping" : "");
    var ns = $("nostart");
    ns.hidden = !r.workers_cannot_start;
    ns.textContent = "workers cannot start: " + (r.workers_cannot_start || "");
    var u = $("unhandled"), list = r.unhandled || [];
    u.hidden = list.length === 0;
    u.textContent = "No handler for: " + list.map(function (x) {
      return x.name + " (" + x.queued + " queued)";
    }).join(", ") + " (their jobs wait until one is loaded)";
  }

  function refresh() {
    var at = location.hash;
    return Promise.all([api("runner").then(status), api("whoami").then(whoami, noWho),
                        PAGES[route.page]()]).then(function () {
      if (location.hash === at) document.body.dataset.loaded = route.page;
    }).catch(function (e) {
      $("status").textContent = e.message;
      if (/^401/.test(e.message)) $("token").focus();
    });
  }

  function wire() {
    $("tokenform").addEventListener("submit", function (e) {
      e.preventDefault();
      localStorage.setItem("jobrunner.token", $("token").value);
      $("token").value = "";
      say("token saved"); refresh();
    });
    $("filters").addEventListener("submit", function (e) {
      e.preventDefault();
      var p = {};
      FILTERS.forEach(function (k) { p[k] = $("f-" + k).value.trim(); });
      location.hash = jobsHash(p);
    });
    $("p-older").addEventListener("click", function () { page("older"); });
    $("p-newer").addEventListener("click", function () { page("newer"); });
    $("p-newest").addEventListener("click", function () { location.hash = jobsHash(route.params); });
    $("b-cancel").addEventListener("click", function () { bulk("cancel", "Cancel"); });
    $("b-retry").addEventListener("click", function () { bulk("retry", "Retry the dead of"); });
    $("b-purge").addEventListener("click", function () { bulk("purge", "Delete the dead of"); });
    $("retryall").addEventListener("click", function () {
      act("dead/retry", { all: true }, function (r) { return r.retried + " dead jobs queued again"; });
    });
    $("purgeall").addEventListener("click", function () {
      if (confirm("Delete every dead job?"))
        act("dead/purge", { all: true }, function (r) { return r.purged + " dead jobs purged"; });
    });
    $("d-retry").addEventListener("click", function () { retryJob(shown); });
    $("d-purge").addEventListener("click", function () { purgeJob(shown, "#/dead"); });
    $("d-cancel").addEventListener("click", function () { cancelJob(shown); });
    $("d-rerun").addEventListener("click", function () { rerunJob(shown, null); });
    $("q-toggle").addEventListener("click", function () {
      var paused = !!$("q-toggle").dataset.paused, name = route.arg;
      act("queues/" + encodeURIComponent(name) + (paused ? "/resume" : "/pause"), {},
          function () { return "queue " + name + (paused ? " resumed" : " paused"); });
    });
    window.addEventListener("hashchange", navigate);
  }

  wire();
  navigate();
  setInterval(refresh, REFRESH_MS);
})();
