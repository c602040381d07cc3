// Drives the React example (examples/react) in Debian's Chromium for tests/e2e/test_react_app.py.
//
// The Python test owns the scenario: it scripts the model, then sends this process one JSON
// command per line on stdin and reads one JSON reply per line on stdout. Keeping the browser
// here and the assertions in Python lets every step check the page, the gateway's REST state and
// what the model was sent, in one pytest test.
//
// Commands: {"action": "open" | "send" | "click" | "attach" (a file path) | "reload" | "wait", ...}, each optionally with
// "until" (what to wait for afterwards: {text: one or a list, absent, titleNot, input: the input
// box's value, listed: a thread id the thread list must show, idle, response: part of a gateway path whose response must arrive}) and "screenshot" (a PNG path). Every reply carries a
// snapshot of what the page shows plus the gateway requests and browser errors seen since the
// previous command: {"ok": true, "page": {...}, "requests": [...], "errors": [...]}, or
// {"ok": false, "error": "...", ...} with the same diagnostics.
//
// Usage: node browser.mjs <app-url> <gateway-url>   (CHROMIUM overrides /usr/bin/chromium)

import { WAIT_MS, launch, recordPageErrors, seen, serve, waitFor } from "./driver.mjs";

const [appUrl, gatewayUrl] = process.argv.slice(2);

const browser = await launch([
  // A fake microphone (a beep) that needs no permission prompt, for voice input.
  "--use-fake-device-for-media-stream",
  "--use-fake-ui-for-media-stream",
]);

let context = null;
let page = null;

/** A fresh context per scenario: empty localStorage, fixed size and time zone. */
async function openPage(cmd) {
  if (context) await context.close();
  context = await browser.newContext({
    viewport: { width: 900, height: 640 },
    timezoneId: cmd.timezoneId || "UTC",
    locale: "en-GB",
    permissions: ["microphone"],
  });
  if (cmd.localStorage) {
    // Seeded before the app's code runs, as if an earlier session had left it.
    await context.addInitScript((entries) => {
      for (const [key, value] of Object.entries(entries)) window.localStorage.setItem(key, value);
    }, cmd.localStorage);
  }
  page = await context.newPage();
  recordPageErrors(page);
  page.on("requestfailed", (req) => {
    // A run stream the SDK closes on purpose after tambo.run.awaiting_input is not an error.
    const aborted = req.failure()?.errorText === "net::ERR_ABORTED" && req.url().includes("/runs");
    if (!aborted) seen.errors.push(`request failed: ${req.method()} ${req.url()} ${req.failure()?.errorText}`);
  });
  page.on("response", (res) => {
    const req = res.request();
    if (!req.url().startsWith(gatewayUrl)) return;
    const url = new URL(req.url());
    seen.requests.push({ method: req.method(), path: url.pathname, query: url.search,
                    status: res.status(), body: req.postData() ?? null });
  });
  // A response to wait for is watched from before the page loads (a new page has no earlier one).
  const response = cmd.until?.response
    ? page.waitForResponse(
        (res) => res.url().startsWith(gatewayUrl) && res.request().method() !== "OPTIONS" &&
          new URL(res.url()).pathname.includes(cmd.until.response),
        { timeout: WAIT_MS })
    : null;
  await page.goto(cmd.url || appUrl);
  await page.getByTestId("input").waitFor({ timeout: WAIT_MS });
  if (response) await (await response).finished();
}

/** Wait until the page shows `text` (and lacks `absent`), and, unless busy is allowed, is idle. */
async function waitUntil(until) {
  await waitFor(page,
    ({ text, absent, idle, titleNot, input, listed }) => {
      const body = document.body.innerText;
      if (listed && !document.querySelector(`[data-thread-id="${listed}"]`)) return false;
      if (input !== undefined && document.querySelector('[data-testid="input"]')?.value !== input) {
        return false;
      }
      if (text && ![text].flat().every((t) => body.includes(t))) return false;
      if (absent && body.includes(absent)) return false;
      if (titleNot && document.querySelector("h1")?.textContent === titleNot) return false;
      if (idle !== false) {
        const status = document.querySelector('[data-testid="status"]');
        const form = document.querySelector("form");
        if (status?.dataset.idle !== "true" || form?.dataset.pending !== "false") return false;
      }
      return true;
    },
    until);
}

/** What a person would read off the page, as data. */
function snapshot() {
  return page.evaluate(() => {
    const text = (el) => (el ? el.innerText.trim() : null);
    return {
      title: text(document.querySelector("h1")),
      threadId: text(document.querySelector('[data-testid="thread-id"]')),
      status: text(document.querySelector('[data-testid="status"]')),
      messages: [...document.querySelectorAll('[data-testid="messages"] > .message')].map((el) => ({
        role: el.dataset.role || "tool-results",
        text: text(el),
      })),
      tools: [...document.querySelectorAll('[data-testid="tool-use"]')].map((el) => ({
        name: el.dataset.tool,
        text: text(el),
      })),
      components: [...document.querySelectorAll('[data-testid="component"]')].map((el) => ({
        name: el.dataset.component,
        title: text(el.querySelector("h3")),
        rows: [...el.querySelectorAll('[data-testid="stock-row"]')].map((row) => ({
          symbol: row.dataset.symbol,
          text: text(row),
          selected: row.classList.contains("selected"),
        })),
        state: text(el.querySelector('[data-testid="stock-state"]')),
      })),
      suggestions: [...document.querySelectorAll('[data-testid="suggestion"]')].map((el) => ({
        title: text(el),
        detail: el.title,
      })),
      threads: [...document.querySelectorAll('[data-testid="thread-list"] [data-thread-id]')]
        .map((el) => el.dataset.threadId),
      attachments: [...document.querySelectorAll('[data-testid="attachment"]')].map((el) => text(el)),
      resources: [...document.querySelectorAll('[data-testid="resource"]')].map((el) => text(el)),
      voiceError: text(document.querySelector('[data-testid="voice-error"]')),
      input: document.querySelector('[data-testid="input"]')?.value ?? null,
      storedThreadId: Object.entries(localStorage).find(([k]) => k.startsWith("gateway-example:thread:"))?.[1] ?? null,
    };
  });
}

async function perform(cmd) {
  // Waiting for a gateway response starts before the action, so a fast one is not missed.
  const response = cmd.until?.response && cmd.action !== "open"
    ? page.waitForResponse(
        (res) => res.url().startsWith(gatewayUrl) && res.request().method() !== "OPTIONS" &&
          new URL(res.url()).pathname.includes(cmd.until.response),
        { timeout: WAIT_MS })
    : null;
  switch (cmd.action) {
    case "open":
      await openPage(cmd);
      break;
    case "send":
      await page.getByTestId("input").fill(cmd.text);
      await page.getByTestId("send").click();
      break;
    case "click":
      await page.locator(cmd.selector).click();
      break;
    case "attach":
      await page.getByTestId("attach").setInputFiles(cmd.file);
      break;
    case "reload":
      await page.reload();
      await page.getByTestId("input").waitFor({ timeout: WAIT_MS });
      break;
    case "wait":
      break;
    default:
      throw new Error(`unknown action ${cmd.action}`);
  }
  if (response) await (await response).finished();
}

await serve({ browser, current: () => ({ page, context }), perform, waitUntil, snapshot });
