// workflow.js BASE TOKEN D_ID B_ID BATCH_ID GO_FILE OUT_DIR - the
// dashboard's workflow views in Debian's headless chromium
// (puppeteer-core), against a runner holding a diamond flow (a -> b, c ->
// d) in a batch whose first job blocks until GO_FILE exists: opens the
// overview, the list of waiting jobs, job D (waiting on b and c), job B
// (its parent, child and batch) and the batch by their URLs; then makes
// GO_FILE, waits on the batch page (it redraws by itself) until the batch
// is done, and reads the batch, job D (its result) and the callback job.
// Saves a screenshot of each view under OUT_DIR. Prints one JSON object
// for spec/browser_spec.lua.
"use strict";
const fs = require("fs");
const puppeteer = require("puppeteer-core");

const [base, token, dId, bId, batchId, goFile, outDir] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const T = { timeout: 15000 };

async function texts(page, sel) {
  return page.$$eval(sel, (rows) => rows.map((r) =>
    Array.from(r.cells).map((c) => c.textContent.trim())));
}

async function open(page, hash, view) {
  await page.goto("about:blank");
  await page.goto(base + "/#" + hash, { waitUntil: "load" });
  await page.waitForFunction((v) => document.body.dataset.loaded === v, T, view);
}

async function shot(page, name) {
  await page.screenshot({ path: outDir + "/" + name + ".png", fullPage: true });
}

async function cards(page, sel) {
  return page.$$eval(sel + " .card", (cs) => Object.fromEntries(cs.map((c) =>
    [c.querySelector(".l").textContent, Number(c.querySelector(".n").textContent)])));
}

async function fieldsOf(page, sel) {
  return page.$eval(sel, (dl) => {
    const o = {};
    dl.querySelectorAll("dt").forEach((dt) => { o[dt.textContent] = dt.nextElementSibling.textContent; });
    return o;
  });
}

// The job view: its fields, and each relation line as
// { kind, links: [{ id, href, state }] } from what the page shows.
async function job(page, id, out, key) {
  await open(page, "/jobs/" + id, "job");
  out[key] = {
    title: await page.$eval("#d-id", (e) => e.textContent),
    fields: await fieldsOf(page, "#d-fields"),
    resultShown: await page.$eval("#d-result-box", (e) => !e.hidden),
    result: await page.$eval("#d-result", (e) => e.textContent),
    links: await page.$$eval("#d-links p", (ps) => ps.map((p) => ({
      kind: p.firstChild.textContent.replace(/:\s*$/, ""),
      links: Array.from(p.querySelectorAll("a")).map((a) => {
        const s = a.nextElementSibling;
        return { id: a.textContent, href: a.getAttribute("href"),
                 state: s && s.classList.contains("state") ? s.textContent : null };
      }),
    }))),
  };
}

async function batch(page, out, key) {
  out[key] = {
    done: await page.$eval("#bt-done", (e) => e.textContent),
    cards: await cards(page, "#bt-cards"),
    fields: await fieldsOf(page, "#bt-fields"),
    members: await texts(page, "#bt-members tbody tr"),
  };
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const out = { errors: [] };
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => out.errors.push(String(e)));
    // 4xx show as console errors: the 401s before the token is saved are
    // expected (and the favicon there is none of), any other refused
    // request is listed by its URL instead
    page.on("console", (m) => { if (m.type() === "error" && !/status of 4\d\d/.test(m.text())) out.errors.push(m.text()); });
    page.on("response", (r) => {
      if (r.status() >= 400 && r.status() !== 401 && !/favicon/.test(r.url())) out.errors.push(r.status() + " " + r.url());
    });
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(base + "/", { waitUntil: "load" });
    await page.type("#token", token);
    await page.click("#tokenform button");
    // the overview's counts, and the state filter's choices
    await open(page, "/", "overview");
    out.cards = await cards(page, "#summary");
    out.names = await texts(page, "#names tbody tr");
    out.queues = await texts(page, "#queues tbody tr");
    out.namesHead = await page.$$eval("#names thead th", (ths) => ths.map((t) => t.textContent));
    await open(page, "/jobs?state=waiting", "jobs");
    out.stateOptions = await page.$$eval("#f-state option", (os) => os.map((o) => o.textContent));
    out.stateSelected = await page.$eval("#f-state", (s) => s.value);
    out.waitingRows = await texts(page, "#jobs tbody tr");
    await shot(page, "jobs-waiting");
    // the last job of the diamond while it waits, then its parent b
    await job(page, dId, out, "d");
    await shot(page, "flow-job");
    await job(page, bId, out, "b");
    // the batch while its members wait, from the job's batch link
    await page.click("#d-links a[href^='#/batches/']");
    await page.waitForFunction((id) => document.body.dataset.loaded === "batch" &&
      document.getElementById("bt-id").textContent === id, T, batchId);
    out.batchHash = await page.evaluate(() => location.hash);
    await batch(page, out, "before");
    await shot(page, "flow-batch");
    // let the flow run: the batch page redraws until the batch is done
    fs.writeFileSync(goFile, "");
    await page.waitForFunction(() => /completed/.test(document.getElementById("bt-done").textContent),
      { timeout: 60000 });
    await batch(page, out, "after");
    await shot(page, "flow-batch-done");
    // a member row opens its job
    await page.$$eval("#bt-members tbody tr", (rows, id) => rows.find((r) =>
      r.cells[0].textContent === id).click(), dId);
    await page.waitForFunction((id) => document.body.dataset.loaded === "job" &&
      document.getElementById("d-id").textContent.indexOf(id + " ") === 0, T, dId);
    out.memberHash = await page.evaluate(() => location.hash);
    await job(page, dId, out, "dDone");
    await shot(page, "flow-job-done");
    await open(page, "/jobs?name=report", "jobs");
    out.reports = await texts(page, "#jobs tbody tr");
  } catch (e) {
    out.failure = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
})();
