// readonly.js BASE TOKEN DEAD_ID - the dashboard in Debian's headless
// chromium (puppeteer-core) with a read-scoped token saved through its
// form: what the header says of the token, and whether each control of
// the dead list, of the dead job's page and of the schedules' form is
// greyed out (disabled).
// Prints one JSON object for spec/browser_spec.lua.
"use strict";
const puppeteer = require("puppeteer-core");

const [base, token, deadId] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const T = { timeout: 15000 };

async function open(page, hash, view) {
  await page.goto("about:blank");
  await page.goto(base + "/#" + hash, { waitUntil: "load" });
  await page.waitForFunction((v) => document.body.dataset.loaded === v, T, view);
}

// Each button of the selector: its text and whether it is disabled.
async function buttons(page, sel) {
  return page.$$eval(sel, (bs) => bs.map((b) => [b.textContent, b.disabled]));
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
    await page.goto(base + "/", { waitUntil: "load" });
    await page.type("#token", token);
    await page.click("#tokenform button");
    await open(page, "/dead", "dead");
    out.who = await page.$eval("#who", (e) => e.textContent);
    out.whoTitle = await page.$eval("#who", (e) => e.title);
    out.dead = await buttons(page, "#dead tbody button, #retryall, #purgeall");
    await open(page, "/jobs/" + deadId, "job");
    out.job = await buttons(page, "#detail h2 button");
    await open(page, "/schedules", "schedules");
    out.sched = await buttons(page, "#sd-add, #sd-set");
  } catch (e) {
    out.failure = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
})();
