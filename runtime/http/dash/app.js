// app.js - the dashboard: reads /api/ every few seconds and draws it.
// Every value from the server goes in through textContent (never as
// HTML), so a payload or an error holding <script> shows as text.
"use strict";
(function () {
  var REFRESH_MS = 2000;
  var $ = function (id) { return document.getElementById(id); };
  var filters = { state: "", name: "", queue: "" };
  var shown = null;                         // id of the job in the detail

  function token() { return localStorage.getItem("jobrunner.token") || ""; }

  function api(path, body) {
    var opts = { headers: {} };
    if (token()) opts.headers.Authorization = "Bearer " + token();
    if (body !== undefined) {
      opts.method = "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch("/api/" + path, opts).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) throw new Error(r.status + ": " + (j.error || r.statusText));
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

  function ago(t) {
    if (!t) return "";
    var s = Date.now() / 1000 - t;
    var future = s < 0; s = Math.abs(s);
    var v = s < 60 ? Math.round(s) + "s" : s < 3600 ? Math.round(s / 60) + "m" :
            s < 86400 ? (s / 3600).toFixed(1) + "h" : (s / 86400).toFixed(1) + "d";
    return future ? "in " + v : v + " ago";
  }

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

  function badge(state) { return el("span", state, "state " + state); }

  function button(text, fn, cls) {
    var b = el("button", text, cls);
    b.addEventListener("click", function (e) { e.stopPropagation(); fn(); });
    return b;
  }

  function buttons(list) {
    var span = el("span", null, "actions");
    list.forEach(function (b) { span.appendChild(button(b[0], b[1], b[2])); });
    return span;
  }

  function say(text, error) {
    var m = $("message");
    m.textContent = text; m.className = "message" + (error ? " error" : "");
    m.hidden = false;
    clearTimeout(say.t);
    say.t = setTimeout(function () { m.hidden = true; }, 4000);
  }

  function act(path, body, done) {
    return api(path, body || {}).then(function (r) {
      say(done(r)); refresh();
    }).catch(function (e) { say(e.message, true); });
  }

  function summary(s) {
    var box = $("summary");
    box.textContent = "";
    [["ready", s.ready], ["scheduled", s.scheduled], ["running", s.running],
     ["dead", s.dead]].forEach(function (c) {
      var d = el("div", null, "card " + c[0]);
      d.appendChild(el("div", c[1], "n")); d.appendChild(el("div", c[0], "l"));
      box.appendChild(d);
    });
  }

  function drawStats(s) {
    summary(s);
    rows("queues", s.queues, function (q) {
      var name = el("span", q.name + " ");
      if (q.paused) name.appendChild(badge("paused"));
      return tr([name, q.ready, q.scheduled, q.running, q.dead,
        button(q.paused ? "Resume" : "Pause", function () {
          act("queues/" + encodeURIComponent(q.name) + (q.paused ? "/resume" : "/pause"),
              {}, function () { return "queue " + q.name + (q.paused ? " resumed" : " paused"); });
        })]);
    }, "no queues yet");
    var names = Object.keys(s.names).sort();
    rows("names", names, function (n) {
      var c = s.names[n];
      return tr([n, c.ready, c.scheduled, c.running, c.dead], function () {
        $("f-name").value = n; filters.name = n; loadJobs();
      });
    }, "no jobs");
  }

  function drawRunner(r) {
    rows("running", r.running, function (j) {
      return tr([j.id, j.name, j.queue, "#" + j.worker + " (pid " + j.pid + ")",
                 (j.generation || "").slice(0, 8), dur(j.seconds)],
                function () { show(j.id); });
    }, "no job running");
    $("status").textContent = "pid " + r.pid + " · workers " + r.workers.busy + "/" +
      r.workers.total + " busy · generation " + (r.generation || "?").slice(0, 8) +
      (r.stopping ? " · stopping" : "");
    chart(r.throughput.minutes);
    // queued jobs no handler of this runner takes: they would wait unseen
    var u = $("unhandled"), list = r.unhandled || [];
    u.hidden = list.length === 0;
    u.textContent = "No handler for: " + list.map(function (x) {
      return x.name + " (" + x.queued + " queued)";
    }).join(", ") + " (their jobs wait until one is loaded)";
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

  function drawDead(list) {
    rows("dead", list, function (d) {
      return tr([d.id, d.name, d.queue, d.attempts, ago(d.died_at),
        el("span", (d.last_error || "").split("\n")[0]),
        buttons([["Retry", function () {
          act("jobs/" + d.id + "/retry", {}, function (r) { return "job " + d.id + (r.retried ? " queued again" : " was not dead"); });
        }], ["Purge", function () {
          if (confirm("Delete dead job " + d.id + "?"))
            act("jobs/" + d.id + "/purge", {}, function (r) { return "job " + d.id + (r.purged ? " purged" : " was not dead"); });
        }, "danger"]])], function () { show(d.id); });
    }, "no dead jobs");
    Array.prototype.forEach.call($("dead").tBodies[0].rows, function (r) {
      if (r.cells[5]) r.cells[5].className = "err";
    });
  }

  function loadJobs() {
    var q = ["limit=50"];
    ["state", "name", "queue"].forEach(function (k) {
      if (filters[k]) q.push(k + "=" + encodeURIComponent(filters[k]));
    });
    return api("jobs?" + q.join("&")).then(function (list) {
      rows("jobs", list, function (j) {
        var st = j.state === "queued" ? (j.run_at && j.run_at > Date.now() / 1000 ? "scheduled" : "ready") : j.state;
        return tr([j.id, j.name, j.queue, badge(st), j.attempts, ago(j.run_at)],
                  function () { show(j.id); });
      }, "no jobs match");
    }).catch(function (e) { say(e.message, true); });
  }

  function show(id) {
    return api("jobs/" + id).then(function (j) {
      shown = id;
      $("detail").hidden = false;
      $("d-id").textContent = j.id + " (" + j.name + ")";
      var dl = $("d-fields"); dl.textContent = "";
      [["state", j.state], ["queue", j.queue], ["attempts", j.attempts +
        (j.max_retries !== null ? " of " + (j.max_retries + 1) : "")],
       ["priority", j.priority], ["run at", j.run_at && new Date(j.run_at * 1000).toISOString()],
       ["created", ago(j.created_at)], ["started", ago(j.started_at)],
       ["finished", ago(j.finished_at)], ["generation", j.generation],
       ["runner", j.locked_by],
       ["progress", j.progress_done !== null ? j.progress_done + (j.progress_total !== null ? " / " + j.progress_total : "") + (j.progress_note ? " " + j.progress_note : "") : null]
      ].forEach(function (f) {
        if (f[1] === null || f[1] === undefined || f[1] === "") return;
        dl.appendChild(el("dt", f[0])); dl.appendChild(el("dd", f[1]));
      });
      var p = j.payload;
      try { p = JSON.stringify(JSON.parse(p), null, 2); } catch (e) { /* as stored */ }
      $("d-payload").textContent = p;
      $("d-error").textContent = j.last_error || "(none)";
      $("d-retry").hidden = $("d-purge").hidden = j.state !== "dead";
      $("d-cancel").hidden = j.state !== "queued" && j.state !== "running";
      $("detail").scrollIntoView({ behavior: "smooth", block: "nearest" });
    }).catch(function (e) { say(e.message, true); });
  }

  function refresh() {
    return Promise.all([
      api("stats").then(drawStats),
      api("runner").then(drawRunner),
      api("dead?limit=100").then(drawDead),
      loadJobs()
    ]).then(function () {
      document.body.dataset.loaded = "1";
    }).catch(function (e) {
      $("status").textContent = e.message;
      if (/^401/.test(e.message)) $("token").focus();
    });
  }

  $("tokenform").addEventListener("submit", function (e) {
    e.preventDefault();
    localStorage.setItem("jobrunner.token", $("token").value);
    $("token").value = "";
    say("token saved"); refresh();
  });
  $("filters").addEventListener("submit", function (e) {
    e.preventDefault();
    filters = { state: $("f-state").value, name: $("f-name").value.trim(), queue: $("f-queue").value.trim() };
    loadJobs();
  });
  $("retryall").addEventListener("click", function () {
    act("dead/retry", { all: true }, function (r) { return r.retried + " dead jobs queued again"; });
  });
  $("purgeall").addEventListener("click", function () {
    if (confirm("Delete every dead job?"))
      act("dead/purge", { all: true }, function (r) { return r.purged + " dead jobs purged"; });
  });
  $("d-retry").addEventListener("click", function () {
    act("jobs/" + shown + "/retry", {}, function () { return "job " + shown + " queued again"; });
  });
  $("d-purge").addEventListener("click", function () {
    if (confirm("Delete dead job " + shown + "?"))
      act("jobs/" + shown + "/purge", {}, function () { return "job " + shown + " purged"; });
  });
  $("d-cancel").addEventListener("click", function () {
    act("jobs/" + shown + "/cancel", {}, function (r) { return "job " + shown + ": " + r.jobs[0].outcome.replace("_", " "); });
  });
  $("d-close").addEventListener("click", function () { $("detail").hidden = true; shown = null; });
  refresh();
  setInterval(refresh, REFRESH_MS);
})();
