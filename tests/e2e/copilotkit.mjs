// Drives the CopilotKit example (examples/copilotkit) in Debian's Chromium for
// tests/e2e/test_copilotkit_app.py.
//
// Same protocol as browser.mjs: one JSON command per line on stdin, one JSON reply per line on
// stdout, so the Python test owns the scenario and checks the page, the gateway and the model
// together. Commands:
//   {"action": "open", "user"?: str}       a fresh context on the app, once its chat input shows
//                                          (`user`: the page's `?user=`, who it says it is)
//   {"action": "send", "text": str}        type into CopilotChat's input and press its send button
//   {"action": "reload"}                   reload the page (same context: its saved thread)
//   {"action": "stop"}                     press CopilotChat's stop button (the send button
//                                          while the agent runs)
//   {"action": "click", "selector": str}   click an element of the page (the approval card's
//                                          buttons)
//   {"action": "wait"}
// each optionally with "until" ({text: one or a list, absent, idle: false to not wait for the
// agent to stop running, threads: the thread ids the thread list shows, exactly, in any order;
// listed: true to wait until the thread list has been read with the page's own thread in it)
// and "screenshot" (a PNG path). Replies: {"ok": true, "page": snapshot,
// "requests": [...], "errors": [...]}; "requests" are the page's calls to the CopilotKit runtime
// (the page never calls the gateway itself).
//
// Usage: node copilotkit.mjs <app-url> <runtime-url>   (CHROMIUM overrides /usr/bin/chromium)

import { WAIT_MS, launch, recordPageErrors, seen, serve, waitFor } from "./driver.mjs";

const [appUrl, runtimeUrl] = process.argv.slice(2);

const browser = await launch();

let context = null;
let page = null;

async function openPage(user) {
  if (context) await context.close();
  context = await browser.newContext({ viewport: { width: 900, height: 760 }, locale: "en-GB" });
  page = await context.newPage();
  recordPageErrors(page);
  page.on("requestfailed", (req) => {
    seen.errors.push(`request failed: ${req.method()} ${req.url()} ${req.failure()?.errorText}`);
  });
  page.on("response", (res) => {
    const req = res.request();
    if (!req.url().startsWith(runtimeUrl) || req.method() === "OPTIONS") return;
    seen.requests.push({ method: req.method(), path: new URL(req.url()).pathname,
                         status: res.status(), body: req.postData() ?? null });
  });
  await page.goto(user ? `${appUrl}?user=${encodeURIComponent(user)}` : appUrl);
  await page.getByTestId("copilot-chat-textarea").waitFor({ timeout: WAIT_MS });
}

/** Wait until the page shows `text` (and lacks `absent`) and, unless told not to, is idle. */
async function waitUntil(until) {
  await waitFor(page,
    ({ text, absent, idle, threads, listed }) => {
      const body = document.body.innerText;
      if (text && ![text].flat().every((t) => body.includes(t))) return false;
      if (absent && body.includes(absent)) return false;
      if (threads) {
        const listed = [...document.querySelectorAll('[data-testid="thread"]')]
          .map((el) => el.dataset.threadId).sort();
        if (JSON.stringify(listed) !== JSON.stringify([...threads].sort())) return false;
      }
      if (listed) {
        const own = document.querySelector('[data-testid="thread-id"]')?.innerText.trim();
        const list = document.querySelector('[data-testid="threads"]');
        if (!own || list?.dataset.loading !== "false" ||
            !list.querySelector(`[data-thread-id="${CSS.escape(own)}"]`)) return false;
      }
      if (idle !== false && document.querySelector('[data-testid="status"]')?.dataset.idle !== "true") {
        return false;
      }
      return true;
    },
    until);
}

/** What a person would read off the page, as data. */
function snapshot() {
  return page.evaluate(() => {
    const text = (el) => (el ? el.innerText.trim() : null);
    const all = (selector) => [...document.querySelectorAll(selector)];
    const card = (el) => ({ status: el.dataset.status, text: text(el) });
    return {
      status: text(document.querySelector('[data-testid="status"]')),
      threadId: text(document.querySelector('[data-testid="thread-id"]')),
      accent: text(document.querySelector('[data-testid="accent"]')),
      accentStyle: getComputedStyle(document.querySelector("main")).getPropertyValue("--accent").trim(),
      messages: all('[data-testid="copilot-user-message"], [data-testid="copilot-assistant-message"]')
        .map((el) => ({ role: el.dataset.testid.replace("copilot-", "").replace("-message", ""),
                        text: text(el) })),
      themeCards: all('[data-testid="theme-card"]').map(card),
      weatherCards: all('[data-testid="weather-card"]').map(card),
      approvalCards: all('[data-testid="approval-card"]').map((el) => text(el)),
      invoiceCards: all('[data-testid="invoice-card"]').map(card),
      otherTools: all('[data-testid="copilot-tool-render"]').map((el) => text(el)),
      user: text(document.querySelector('[data-testid="user"]')),
      threads: all('[data-testid="thread"]').map((el) => ({
        threadId: el.dataset.threadId, current: el.getAttribute("aria-current") === "true" })),
      threadsError: text(document.querySelector('[data-testid="threads-error"]')),
      capabilities: text(document.querySelector('[data-testid="capabilities"]')),
    };
  });
}

async function perform(cmd) {
  switch (cmd.action) {
    case "open":
      await openPage(cmd.user);
      break;
    case "send":
      await page.getByTestId("copilot-chat-textarea").fill(cmd.text);
      await page.getByTestId("copilot-send-button").click();
      break;
    case "reload":
      await page.reload();
      await page.getByTestId("copilot-chat-textarea").waitFor({ timeout: WAIT_MS });
      break;
    case "stop":
      await page.getByTestId("copilot-send-button").click();
      break;
    case "click":
      await page.locator(cmd.selector).click();
      break;
    case "wait":
      break;
    default:
      throw new Error(`unknown action ${cmd.action}`);
  }
}

await serve({ browser, current: () => ({ page, context }), perform, waitUntil, snapshot });
