// dashboard.js BASE TOKEN DEAD_ID OUT_DIR - loads the dashboard in
// Debian's headless chromium (puppeteer-core), saves the token through the
// page's form, reads what the page shows after its scripts ran, opens the
// dead job's detail, saves screenshots (desktop and phone widths) under
// OUT_DIR, clicks Retry on the dead job and waits for the page to say so.
// Prints one JSON object for spec/browser_spec.lua to assert on.
"use strict";
const puppeteer = require("puppeteer-core");

const [base, token, deadId, outDir] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";

async function texts(page, sel) {
  return page.$$eval(sel, (rows) => rows.map((r) =>
    Array.from(r.cells).map((c) => c.textContent.trim())));
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const out = { errors: [], dialogs: [] };
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => out.errors.push(String(e)));
    page.on("dialog", (d) => { out.dialogs.push(d.message()); d.dismiss(); });
    await page.setViewport({ width: 1280, height: 1000 });
    await page.goto(base + "/", { waitUntil: "load" });
    await page.type("#token", token);
    await page.click("#tokenform button");
    await page.waitForFunction((id) => Array.from(
      document.querySelectorAll("#dead tbody tr")).some((r) =>
        r.cells[0] && r.cells[0].textContent === id), { timeout: 10000 }, deadId);
    await page.waitForFunction(() =>
      document.querySelectorAll("#running tbody tr td.num").length > 0, { timeout: 10000 });
    out.title = await page.title();
    out.cards = await page.$$eval("#summary .card", (cs) => Object.fromEntries(cs.map((c) =>
      [c.querySelector(".l").textContent, Number(c.querySelector(".n").textContent)])));
    out.queues = await texts(page, "#queues tbody tr");
    out.names = await texts(page, "#names tbody tr");
    out.dead = await texts(page, "#dead tbody tr");
    out.running = await texts(page, "#running tbody tr");
    out.jobs = await texts(page, "#jobs tbody tr");
    out.status = await page.$eval("#status", (e) => e.textContent);
    out.unhandled = await page.$eval("#unhandled", (e) => e.hidden ? null : e.textContent);
    out.scripts = await page.$$eval("script", (s) => s.length);
    out.chartBars = await page.$$eval("#chart rect", (r) => r.length);
    // the dead job's detail: payload and error shown as text
    await page.$$eval("#dead tbody tr", (rows, id) => rows.find((r) =>
      r.cells[0].textContent === id).click(), deadId);
    await page.waitForFunction(() => !document.getElementById("detail").hidden &&
      document.getElementById("d-payload").textContent.length > 0, { timeout: 10000 });
    out.payload = await page.$eval("#d-payload", (e) => e.textContent);
    out.error = await page.$eval("#d-error", (e) => e.textContent);
    out.detailHtml = await page.$eval("#detail", (e) => e.innerHTML);
    out.scriptsAfter = await page.$$eval("script", (s) => s.length);
    await page.screenshot({ path: outDir + "/dashboard.png", fullPage: true });
    await page.setViewport({ width: 390, height: 844, isMobile: true });
    await page.screenshot({ path: outDir + "/dashboard-phone.png", fullPage: true });
    await page.setViewport({ width: 1280, height: 1000 });
    // a jobs filter
    await page.select("#f-state", "dead");
    await page.click("#filters button");
    await page.waitForFunction(() => Array.from(document.querySelectorAll("#jobs tbody tr"))
      .every((r) => r.cells.length > 3 && r.cells[3].textContent === "dead"), { timeout: 10000 });
    out.deadFiltered = await texts(page, "#jobs tbody tr");
    // Retry on the dead job's row
    await page.$$eval("#dead tbody tr", (rows, id) => rows.find((r) =>
      r.cells[0].textContent === id).querySelector("button").click(), deadId);
    await page.waitForFunction(() => /queued again/.test(
      document.getElementById("message").textContent), { timeout: 10000 });
    out.message = await page.$eval("#message", (e) => e.textContent);
  } catch (e) {
    out.failure = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
})();
