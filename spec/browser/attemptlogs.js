// attemptlogs.js BASE TOKEN JOB_ID - a job's page in Debian's headless
// chromium (puppeteer-core): the entries of its attempts' timeline, each
// as its text (its attempt, its error and the logs shown under it).
// Prints one JSON object for spec/browser_spec.lua.
"use strict";
const puppeteer = require("puppeteer-core");

const [base, token, jobId] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const T = { timeout: 15000 };

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const out = { errors: [] };
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => out.errors.push(String(e)));
    await page.goto(base + "/", { waitUntil: "load" });
    await page.type("#token", token);
    await page.click("#tokenform button");
    await page.goto("about:blank");
    await page.goto(base + "/#/jobs/" + jobId, { waitUntil: "load" });
    await page.waitForFunction(() => document.body.dataset.loaded === "job", T);
    out.attempts = await page.$$eval("#d-attempts li", (ls) => ls.map((l) => l.textContent));
  } catch (e) {
    out.failure = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
})();
