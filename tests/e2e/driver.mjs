// What browser.mjs, playground.mjs and copilotkit.mjs share: launching Debian's Chromium for this
// machine, the page errors every scenario reports, and the command loop (one JSON command per line
// on stdin, one JSON reply per line on stdout). Each script keeps its own page actions and snapshot.

import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

export const WAIT_MS = Number(process.env.E2E_WAIT_MS || 20000);

// Flags for this machine: no sandbox as root, no GPU, and nothing that phones home (the network
// is closed, so background fetches only fail and slow the start). Playwright's launch() gives
// the browser a new, empty --user-data-dir of its own, deleted on close.
export function launch(extraArgs = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           ...extraArgs],
  });
}

/** Wait until `predicate(until)` holds in the page (polled every 50 ms); no `until`, no wait. */
export async function waitFor(page, predicate, until) {
  if (!until) return;
  await page.waitForFunction(predicate, until,
                             { timeout: until.timeoutMs || WAIT_MS, polling: 50 });
}

/** Console errors and uncaught exceptions of `page` go to `seen.errors`. */
export function recordPageErrors(page) {
  page.on("console", (msg) => {
    if (msg.type() === "error") seen.errors.push(`console: ${msg.text().slice(0, 500)}`);
  });
  page.on("pageerror", (err) => seen.errors.push(`page error: ${String(err).slice(0, 500)}`));
}

function reply(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

/** What the page did since the last reply: the scripts add to it, each reply takes it. */
export const seen = { requests: [], errors: [] };

function taken() {
  const now = { requests: seen.requests, errors: seen.errors };
  seen.requests = [];
  seen.errors = [];
  return now;
}

/**
 * Run the commands read from stdin until "close": `perform(cmd)` each, then wait until the page
 * shows `cmd.until` (`waitUntil`, the script's own predicate), take `cmd.screenshot` if asked,
 * and reply with `snapshot()` and what the page did meanwhile (`seen`). A failed command is
 * replied to with its error, a screenshot if asked, and what can still be read off the page.
 * `current()` gives the script's page and context of the moment; at the end they and `browser`
 * are closed.
 */
export async function serve({ browser, current, perform, waitUntil, snapshot }) {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    if (cmd.action === "close") break;
    try {
      await perform(cmd);
      await waitUntil(cmd.until);
      if (cmd.screenshot) await current().page.screenshot({ path: cmd.screenshot, fullPage: true });
      const page = await snapshot();
      reply({ ok: true, page, ...taken() });
    } catch (err) {
      let shown = null;
      try {
        if (cmd.screenshot) await current().page.screenshot({ path: cmd.screenshot, fullPage: true });
        shown = await snapshot();
      } catch {
        // The page itself is gone: report what we have.
      }
      reply({ ok: false, error: String(err?.message || err).slice(0, 2000), page: shown,
              ...taken() });
    }
  }
  const { context } = current();
  if (context) await context.close();
  await browser.close();
}
