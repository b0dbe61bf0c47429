// The viewer's end-to-end test, in Debian's Chromium driven headless by playwright-core:
// starts `clio serve --port 0` on a fresh CLIO_HOME, submits the README's main job with
// --approve-edits, opens the address serve printed, goes from the runs list to the run,
// sees the DAG, approves the editor's proposed step in the page, and sees the added step
// and the run finish. It saves a screenshot of the run page to $CLIO_SCREENSHOT (default
// target/viewer.png). Run by the Rust test viewer_e2e (crates/clio-cli/tests/it), which
// passes CLIO_BIN; any failure exits 1.
//
// With CLIO_VIEWER_HOME, that home is used (and kept): serve_postgres gives one whose
// config.toml names a PostgreSQL journal and runs `clio worker`s on it, so the same page
// is tried on a shared journal, with workers driving the run; the page then also cancels
// a second run with its Cancel button.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const root = resolve(import.meta.dirname, "../../../..");
const bin = process.env.CLIO_BIN || join(root, "target/debug/clio");
const shot = process.env.CLIO_SCREENSHOT || join(root, "target/viewer.png");
const chromiumPath = process.env.CLIO_CHROMIUM || "/usr/bin/chromium";
const given = process.env.CLIO_VIEWER_HOME;
const home = given || mkdtempSync(join(tmpdir(), "clio-viewer-"));
const env = { ...process.env, CLIO_HOME: home, NO_COLOR: "1" };

let serve;
let browser;
const step = (text) => console.log(`viewer e2e: ${text}`);

async function main() {
  serve = spawn(bin, ["serve", "--port", "0"], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  let serveErr = "";
  serve.stderr.on("data", (d) => { serveErr += d; });
  const url = await new Promise((ok, fail) => {
    const lines = createInterface({ input: serve.stdout });
    lines.once("line", ok);
    serve.once("exit", (code) => fail(new Error(`clio serve exited (${code}): ${serveErr}`)));
  });
  if (!url.includes("#token=")) throw new Error(`no address with a token: ${url}`);
  step(`serve at ${url.split("#")[0]}`);

  const run = execFileSync(bin, [
    "workflow", "run", "examples/workflows/batch7.json",
    "--task", "Review batch 7 of the Ti-6Al-4V fatigue campaign",
    "--plugin", "examples/marketplace/plugins/materials", "--trust",
    "--workspace", "examples/workspace", "--models", "examples/models/models.toml",
    "--editor", "independent_reviewer", "--approve-edits", "--detach",
  ], { cwd: root, env, encoding: "utf8" }).trim();
  if (!/^\d+$/.test(run)) throw new Error(`--detach printed no run id: ${run}`);
  step(`submitted run ${run}`);

  // A fresh profile of its own in the temporary home.
  browser = await chromium.launchPersistentContext(join(home, "chromium"), {
    executablePath: chromiumPath,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1440, height: 1000 },
  });
  const page = browser.pages()[0] || await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("dialog", (d) => { problems.push(`dialog: ${d.message()}`); d.dismiss(); });

  await page.goto(url);
  await page.locator(`tr[data-run="${run}"]`).waitFor({ timeout: 20000 });
  if (await page.evaluate(() => location.hash) !== "") throw new Error("the token stays in the address bar");
  step("the runs list shows the run");
  await page.locator(`tr[data-run="${run}"] a`).click();
  await page.waitForURL(`**/runs/${run}`);

  // The DAG, each step named and coloured by status, the editor's proposal dashed.
  for (const s of ["survey", "images", "tests", "relate", "review"]) {
    await page.locator(`#dag g.node[data-step="${s}"]`).waitFor({ timeout: 20000 });
  }
  await page.locator('#dag g.node.ghost[data-step="porosity_check"]').waitFor({ timeout: 20000 });
  const review = await page.locator('#dag g.node[data-step="review"]').getAttribute("data-status");
  if (review !== "finished") throw new Error(`step review is ${review}, not finished`);
  step("the DAG shows the five steps and the proposed one");
  const approve = page.locator('#questions button[data-answer="yes"]');
  await approve.waitFor({ timeout: 20000 });
  if (!(await approve.textContent()).includes("Approve")) throw new Error("the edit question has no Approve button");
  await page.waitForTimeout(300);
  await page.screenshot({ path: shot.replace(/\.png$/, "-question.png"), fullPage: true });
  await approve.click();
  step("approved the edit in the page");

  // The approved step appears as a real step and runs; the run finishes.
  await page.locator('#dag g.node:not(.ghost)[data-step="porosity_check"][data-status="finished"]').waitFor({ timeout: 30000 });
  await page.locator('h1 .badge[data-status="succeeded"]').waitFor({ timeout: 30000 });
  await page.locator("body[data-ended=true]").waitFor({ timeout: 30000 });
  const tree = await page.locator("#tree").textContent();
  if (!tree.includes("step porosity_check")) throw new Error(`the task tree does not name the added step: ${tree}`);
  const logged = await page.locator("#log div").count();
  // The job's calls, questions and edits, and its live views (published on a clock).
  if (logged < 25) throw new Error(`the event log shows ${logged} entries`);
  step(`the run finished; ${logged} events in the log`);
  await page.waitForTimeout(300);
  await page.screenshot({ path: shot, fullPage: true });
  step(`screenshot ${shot}`);
  if (given) {
    // A run that waits on a question (its plugin is not trusted), cancelled from its page.
    const held = execFileSync(bin, [
      "workflow", "run", "crates/clio-cli/tests/data/workers/slow.json", "--task", "c1",
      "--plugin", "crates/clio-cli/tests/data/workers/ledger",
      "--workspace", "examples/workspace", "--detach", "--quiet",
    ], { cwd: root, env, encoding: "utf8" }).trim();
    // A tab of its own, opened as the person would, from the address serve printed.
    const tab = await browser.newPage();
    tab.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    tab.on("dialog", (d) => { problems.push(`dialog: ${d.message()}`); d.dismiss(); });
    await tab.goto(url);
    await tab.locator(`tr[data-run="${held}"] a`).click({ timeout: 20000 });
    await tab.waitForURL(`**/runs/${held}`);
    const cancel = tab.locator('h1 button[data-action="cancel"]');
    await cancel.waitFor({ timeout: 30000 });
    await cancel.click();
    await tab.locator('h1 .badge[data-status="cancelled"]').waitFor({ timeout: 30000 });
    step(`cancelled run ${held} from its page`);
  }
  if (problems.length) throw new Error(problems.join("\n"));
}

try {
  await main();
  step("ok");
} catch (error) {
  console.error(`viewer e2e failed: ${error.stack || error}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  if (serve && serve.exitCode === null) serve.kill("SIGTERM");
  if (!given) rmSync(home, { recursive: true, force: true });
}
