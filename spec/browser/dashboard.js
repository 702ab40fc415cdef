// dashboard.js BASE TOKEN DEAD_ID OUT_DIR - drives the dashboard in
// Debian's headless chromium (puppeteer-core) as an operator would: saves
// the token through the page's form, opens every view by its URL (a fresh
// load each: a link pasted in a ticket), reads what each shows after its
// scripts ran and saves a screenshot of each under OUT_DIR; pages through
// the jobs named "page" with Older and Newer, filters them on a payload
// field, bulk-cancels the filtered set (confirming the dialog), and clicks
// Retry on the dead job. Prints one JSON object for spec/browser_spec.lua.
"use strict";
const puppeteer = require("puppeteer-core");

const [base, token, deadId, outDir] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const T = { timeout: 15000 };

async function texts(page, sel) {
  return page.$$eval(sel, (rows) => rows.map((r) =>
    Array.from(r.cells).map((c) => c.textContent.trim())));
}

// Opens base/#HASH from a blank page and waits for the view's first draw.
async function open(page, hash, view) {
  await page.goto("about:blank");
  const t0 = Date.now();
  await page.goto(base + "/#" + hash, { waitUntil: "load" });
  await page.waitForFunction((v) => document.body.dataset.loaded === v, T, view);
  return Date.now() - t0;
}

async function shot(page, name) {
  await page.screenshot({ path: outDir + "/" + name + ".png", fullPage: true });
}

async function firstId(page) {
  return page.$eval("#jobs tbody tr td", (c) => c.textContent);
}

// Clicks a pager button and waits until the list shows another page.
async function turn(page, button) {
  const before = await firstId(page);
  await page.click(button);
  await page.waitForFunction((b) => document.body.dataset.loaded === "jobs" &&
    document.querySelector("#jobs tbody tr td").textContent !== b, T, before);
  return texts(page, "#jobs tbody tr");
}

async function paging(page, out) {
  out.loadMs.jobs = await open(page, "/jobs?name=page", "jobs");
  const ids = [];
  let rows = await texts(page, "#jobs tbody tr");
  out.pages = 1;
  rows.forEach((r) => ids.push(Number(r[0])));
  out.newerDisabledFirst = await page.$eval("#p-newer", (b) => b.disabled);
  await shot(page, "jobs");
  while (!(await page.$eval("#p-older", (b) => b.disabled))) {
    rows = await turn(page, "#p-older");
    rows.forEach((r) => ids.push(Number(r[0])));
    out.pages++;
  }
  out.pagedIds = ids;
  out.lastHash = await page.evaluate(() => location.hash);
  // two pages back with Newer: the same rows as on the way down
  await turn(page, "#p-newer");
  rows = await turn(page, "#p-newer");
  out.backFirst = Number(rows[0][0]);
  out.backCount = rows.length;
  // a reload keeps the page
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(() => document.body.dataset.loaded === "jobs", T);
  out.reloadFirst = Number(await firstId(page));
}

async function filtering(page, out) {
  await open(page, "/jobs", "jobs");
  await page.type("#f-name", "page");
  await page.type("#f-where", "payload.user_id = 7");
  // the unfiltered list's "loaded" mark cleared first: the hash changes
  // before the page's hashchange handler clears it, and a wait in between
  // would read the unfiltered rows
  await page.evaluate(() => { document.body.dataset.loaded = ""; });
  await page.click("#filters button");
  await page.waitForFunction(() => /where=/.test(location.hash) &&
    document.body.dataset.loaded === "jobs" && Array.from(document.querySelectorAll("#jobs tbody tr"))
    .every((r) => r.cells[1] && r.cells[1].textContent === "page"), T);
  out.filterHash = await page.evaluate(() => decodeURIComponent(location.hash));
  out.filtered = (await texts(page, "#jobs tbody tr")).map((r) => Number(r[0]));
  await shot(page, "jobs-filtered");
  // bulk cancel on what the filter selects: confirmed, then counted
  await page.click("#b-cancel");
  await page.waitForFunction(() => /jobs matched/.test(
    document.getElementById("message").textContent), T);
  out.bulkMessage = await page.$eval("#message", (e) => e.textContent);
  await page.waitForFunction(() => Array.from(document.querySelectorAll("#jobs tbody tr"))
    .every((r) => r.cells[3] && r.cells[3].textContent === "cancelled"), T);
  out.afterBulk = (await texts(page, "#jobs tbody tr")).map((r) => r[3]);
  // a bad filter: the server's reason, shown
  // (typed and sent in one task of the page: its refresh writes the
  // filter back from the address between two keystrokes of page.type)
  await page.evaluate(() => {
    document.getElementById("f-where").value = "payload.user id = 7";
    document.querySelector("#filters button").click();
  });
  await page.waitForFunction(() => /payload filter/.test(
    document.getElementById("status").textContent + document.getElementById("message").textContent), T);
  out.badFilter = await page.$eval("#status", (e) => e.textContent);
}

async function views(page, out) {
  out.loadMs.overview = await open(page, "/", "overview");
  await page.waitForFunction(() =>
    document.querySelectorAll("#running tbody tr td.num").length > 0, T);
  out.title = await page.title();
  out.cards = await page.$$eval("#summary .card", (cs) => Object.fromEntries(cs.map((c) =>
    [c.querySelector(".l").textContent, Number(c.querySelector(".n").textContent)])));
  out.queues = await texts(page, "#queues tbody tr");
  out.names = await texts(page, "#names tbody tr");
  out.running = await texts(page, "#running tbody tr");
  out.status = await page.$eval("#status", (e) => e.textContent);
  out.unhandled = await page.$eval("#unhandled", (e) => e.hidden ? null : e.textContent);
  out.scripts = await page.$$eval("script", (s) => s.length);
  out.chartBars = await page.$$eval("#chart rect", (r) => r.length);
  await shot(page, "overview");
  await page.setViewport({ width: 390, height: 844, isMobile: true });
  await shot(page, "overview-phone");
  await page.setViewport({ width: 1280, height: 1000 });

  out.loadMs.running = await open(page, "/running", "running");
  await page.waitForFunction(() => document.querySelector("#progress tbody progress"), T);
  out.progress = await texts(page, "#progress tbody tr");
  out.progressBar = await page.$eval("#progress tbody progress", (p) => [p.value, p.max]);
  await shot(page, "running");

  out.loadMs.dead = await open(page, "/dead", "dead");
  out.dead = await texts(page, "#dead tbody tr");
  await shot(page, "dead");

  out.loadMs.job = await open(page, "/jobs/" + deadId, "job");
  out.payload = await page.$eval("#d-payload", (e) => e.textContent);
  out.error = await page.$eval("#d-error", (e) => e.textContent);
  out.detailId = await page.$eval("#d-id", (e) => e.textContent);
  out.detailHtml = await page.$eval("#detail", (e) => e.innerHTML);
  out.scriptsAfter = await page.$$eval("script", (s) => s.length);
  out.attempts = await page.$$eval("#d-attempts li", (ls) => ls.map((l) => l.textContent));
  out.attemptsShown = await page.$eval("#d-attempts-box", (e) => !e.hidden);
  await shot(page, "job");

  out.loadMs.queues = await open(page, "/queues", "queues");
  out.qlist = await texts(page, "#qlist tbody tr");
  await shot(page, "queues");
  out.loadMs.queue = await open(page, "/queues/mail", "queue");
  out.queueName = await page.$eval("#q-name", (e) => e.textContent);
  out.queueCards = await page.$$eval("#q-cards .card", (cs) => Object.fromEntries(cs.map((c) =>
    [c.querySelector(".l").textContent, Number(c.querySelector(".n").textContent)])));
  await shot(page, "queue");

  out.loadMs.limits = await open(page, "/limits", "limits");
  out.limits = await texts(page, "#limits tbody tr");
  out.limitWaiting = await texts(page, "#lwaiting tbody tr");
  out.fair = await texts(page, "#fair tbody tr");
  await shot(page, "limits");

  out.loadMs.schedules = await open(page, "/schedules", "schedules");
  out.schedules = await texts(page, "#schedules tbody tr");
  out.schedulesNote = await page.$eval("#s-none", (e) => e.hidden ? null : e.textContent);
  await shot(page, "schedules");
  // Fire now on the first schedule: the page then shows its job as the last fire
  if (!out.schedulesNote && out.schedules.length) {
    await page.$$eval("#schedules tbody tr", (rows) => Array.from(rows[0].querySelectorAll("button"))
      .find((b) => b.textContent === "Fire now").click());
    await page.waitForFunction(() => /fire asked|fired/.test(
      document.getElementById("message").textContent), T);
    out.fireMessage = await page.$eval("#message", (e) => e.textContent);
    await page.waitForFunction(() => {
      const r = document.querySelector("#schedules tbody tr");
      return r && r.cells[4] && r.cells[4].querySelector("a");
    }, T);
    out.firedJob = await page.$eval("#schedules tbody tr", (r) => r.cells[4].querySelector("a").textContent);
    out.schedulesAfter = await texts(page, "#schedules tbody tr");
    await shot(page, "schedules-fired");
    // a schedule managed at run time through the form: added, listed with
    // Edit and Remove, removed
    const has = (name) => Array.from(document.querySelectorAll("#schedules tbody tr"))
      .some((r) => r.cells[0] && r.cells[0].textContent.startsWith(name));
    await page.$eval("#sd-name", (e) => { e.value = "web.added"; });
    await page.$eval("#sd-def", (e) => {
      e.value = '{"every": "1h", "job": "nightly", "overlap": "skip", "payload": {"t": "<script>x</script>"}}';
    });
    await page.click("#sd-add");
    await page.waitForFunction(() => /schedule web.added added/.test(
      document.getElementById("message").textContent), T);
    await page.waitForFunction(has, T, "web.added");
    out.schedulesAdded = await texts(page, "#schedules tbody tr");
    await shot(page, "schedules-added");
    await page.$$eval("#schedules tbody tr", (rows) => Array.from(rows
      .find((r) => r.cells[0].textContent.startsWith("web.added")).querySelectorAll("button"))
      .find((b) => b.textContent === "Remove").click());
    await page.waitForFunction(() => /schedule web.added removed/.test(
      document.getElementById("message").textContent), T);
    await page.waitForFunction((name) => !Array.from(document.querySelectorAll("#schedules tbody tr"))
      .some((r) => r.cells[0] && r.cells[0].textContent.startsWith(name)), T, "web.added");
    out.schedulesRemoved = await texts(page, "#schedules tbody tr");
  }

  out.loadMs.batch = await open(page, "/batches/1", "batch");
  out.batch = await page.$eval("#bt-done", (e) => e.textContent);
  await shot(page, "batch");

  await open(page, "/no/such/page", "notfound");
  out.notFound = await page.$eval("#nf-text", (e) => e.textContent);
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const out = { errors: [], dialogs: [], loadMs: {} };
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => out.errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error" && !/status of 4\d\d/.test(m.text())) out.errors.push(m.text()); });
    page.on("dialog", (d) => {
      out.dialogs.push(d.message());
      if (/^Cancel every job matching/.test(d.message())) d.accept(); else d.dismiss();
    });
    await page.setViewport({ width: 1280, height: 1000 });
    await page.goto(base + "/", { waitUntil: "load" });
    await page.type("#token", token);
    await page.click("#tokenform button");
    await views(page, out);
    await paging(page, out);
    await filtering(page, out);
    // Retry on the dead job's row
    await open(page, "/dead", "dead");
    await page.$$eval("#dead tbody tr", (rows, id) => rows.find((r) =>
      r.cells[0].textContent === id).querySelector("button").click(), deadId);
    await page.waitForFunction(() => /queued again/.test(
      document.getElementById("message").textContent), T);
    out.message = await page.$eval("#message", (e) => e.textContent);
  } catch (e) {
    out.failure = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
})();
