// Drives the gateway's own playground (GET /) in Debian's Chromium for tests/e2e/test_playground.py.
//
// Same protocol as browser.mjs: one JSON command per line on stdin, one JSON reply per line on
// stdout. Commands are plain page actions, so the Python test owns the scenario:
//   {"action": "open", "url"?: str, "ready"?: css,      a fresh context on the playground
//    "width"?: px, "height"?: px}                       (or on `url`, once `ready` shows), in a
//                                                       window that wide (default 1400 x 860)
//   {"action": "fill", "selector": css, "value": str}   type into a field (then "change" fires)
//   {"action": "click", "selector": css}
//   {"action": "select", "selector": css, "value": str}  pick an option of a <select>
//   {"action": "reload"}                                 reload the page (its localStorage kept)
//   {"action": "wait"}
// each optionally with "until" ({selector, text?: expected in its innerText, count?: at least
// this many matches, absent?: text that must not be in it}) and "screenshot" (a PNG path).
// Replies: {"ok": true, "page": snapshot, "requests": [...], "errors": [...]}; "requests" holds
// every request the page made (to check that nothing leaves the gateway's origin). Every
// snapshot has `layout`: the window's width, whether the page is wider than it, and which
// visible controls lie outside it (beyond a box that scrolls sideways, which is fine); and
// `downloads`: the text of each file the page saved (a CSV export) since the page opened.
//
// Usage: node playground.mjs <gateway-url>/ <gateway-url>

import { readFile } from "node:fs/promises";

import { WAIT_MS, launch, recordPageErrors, seen, serve, waitFor } from "./driver.mjs";

const [pageUrl] = process.argv.slice(2);

const browser = await launch();

let context = null;
let page = null;
let downloads = [];

async function openPage(cmd) {
  if (context) await context.close();
  // The clipboard permissions let the page copy ("Copy as curl") and the snapshot read it back.
  context = await browser.newContext({
    viewport: { width: cmd.width || 1400, height: cmd.height || 860 }, locale: "en-GB",
    permissions: ["clipboard-read", "clipboard-write"], acceptDownloads: true });
  page = await context.newPage();
  downloads = [];
  page.on("download", (download) => {
    downloads.push(download.path().then((path) => readFile(path, "utf8")));
  });
  recordPageErrors(page);
  page.on("request", (req) => seen.requests.push({ method: req.method(), url: req.url() }));
  page.on("requestfailed", (req) => {
    // Streams the playground closes on purpose (reconnect, a new thread) end as ERR_ABORTED.
    if (req.failure()?.errorText !== "net::ERR_ABORTED") {
      seen.errors.push(`request failed: ${req.method()} ${req.url()} ${req.failure()?.errorText}`);
    }
  });
  await page.goto(cmd.url || pageUrl);
  await page.locator(cmd.ready || "#threads-pane").first().waitFor({ timeout: WAIT_MS });
}

async function waitUntil(until) {
  await waitFor(page,
    ({ selector, text, count, absent }) => {
      const found = [...document.querySelectorAll(selector)];
      if (found.length < (count ?? 1)) return false;
      const shown = found.map((el) => el.innerText).join("\n");
      if (text && ![text].flat().every((t) => shown.includes(t))) return false;
      if (absent && shown.includes(absent)) return false;
      return true;
    },
    until);
}

/** What a person reads off the page, as data (the playground's parts, or any page's text). */
async function snapshot() {
  const shown = await pageSnapshot();
  if (shown.curl !== undefined) {
    shown.clipboard = await page.evaluate(() => navigator.clipboard.readText()).catch(() => null);
  }
  shown.layout = await page.evaluate(() => {
    const width = window.innerWidth;
    const offscreen = [...document.querySelectorAll("button, input, select, textarea, a")]
      .filter((el) => el.offsetParent !== null && !el.closest(".scroll, #runs-box"))
      .filter((el) => {
        const box = el.getBoundingClientRect();
        return box.width > 0 && (box.right > width + 1 || box.left < -1);
      })
      .map((el) => el.id || el.name || el.textContent.trim().slice(0, 30));
    return { width, overflowX: document.documentElement.scrollWidth > width + 1, offscreen };
  });
  shown.downloads = await Promise.all(downloads);
  return shown;
}

function pageSnapshot() {
  return page.evaluate(() => {
    const text = (el) => (el ? el.innerText.trim() : null);
    if (!document.getElementById("threads-pane")) {
      return { url: location.pathname, text: document.body.innerText.slice(0, 20000) };
    }
    const json = (el) => {
      try { return JSON.parse(el?.innerText ?? "null"); } catch { return el?.innerText; }
    };
    return {
      // Where the page keeps the API key typed into it (tests/e2e/test_playground.py).
      keyStored: { local: localStorage.getItem("playground.apiKey"),
                   session: sessionStorage.getItem("playground.apiKey") },
      error: document.getElementById("error").hidden ? null : text(document.getElementById("error")),
      title: text(document.getElementById("thread-title")),
      status: text(document.getElementById("run-status")),
      runId: document.getElementById("run-id").value,
      afterId: document.getElementById("after-id").value,
      threads: [...document.querySelectorAll("#threads li")].map((li) => li.dataset.threadId),
      threadNames: [...document.querySelectorAll("#threads li .name")].map(text),
      models: [...document.querySelectorAll("#model option")].map((o) => o.value),
      modelShown: !document.getElementById("model").parentElement.hidden,
      runs: [...document.querySelectorAll("#runs tr")].map((tr) => ({
        id: tr.dataset.runId,
        cells: Object.fromEntries([...tr.children].map((td, i) => [
          document.querySelectorAll("#runs-box th")[i].innerText, td.innerText])),
      })),
      curl: document.getElementById("curl-box").hidden ? undefined
        : document.getElementById("curl").innerText,
      selectedThread: document.querySelector("#threads li.selected")?.dataset.threadId ?? null,
      messages: [...document.querySelectorAll("#conversation .message")].map((el) => ({
        id: el.dataset.messageId,
        role: el.classList.contains("user") ? "user" : "assistant",
        cancelled: el.classList.contains("cancelled"),
        text: [...el.querySelectorAll(".part.text")].map(text).join("\n"),
        reasoning: [...el.querySelectorAll(".part.reasoning")].map(text).join("\n"),
      })),
      tools: [...document.querySelectorAll("#conversation .tool")].map((el) => ({
        id: el.dataset.toolCallId, title: text(el.querySelector("h4")),
        args: text(el.querySelector("pre")), result: text(el.querySelector(".result")),
      })),
      components: [...document.querySelectorAll("#conversation .component")].map((el) => ({
        id: el.dataset.componentId, title: text(el.querySelector("h4")),
        props: json(el.querySelector(".props")), state: json(el.querySelector(".state")),
      })),
      pending: document.getElementById("pending").hidden ? [] :
        [...document.querySelectorAll("#pending-calls textarea")].map((t) => t.dataset.toolCallId),
      pendingCalls: document.getElementById("pending").hidden ? [] :
        [...document.querySelectorAll("#pending-calls .pending-call")].map((el) => ({
          id: el.dataset.toolCallId, kind: el.className.split(" ")[1], text: text(el),
          schema: json(el.querySelector(".schema")) })),
      pendingTitle: text(document.getElementById("pending-title")),
      waitingThreads: [...document.querySelectorAll("#threads li.waiting")].map(
        (li) => li.dataset.threadId),
      events: [...document.querySelectorAll("#events li")].map((li) => ({
        kind: li.className, id: li.dataset.id ?? null, lastId: li.dataset.lastId ?? null,
        text: text(li).replace(/\s+/g, " ").slice(0, 300),
      })),
    };
  });
}

async function perform(cmd) {
  switch (cmd.action) {
    case "open":
      await openPage(cmd);
      break;
    case "fill":
      await page.locator(cmd.selector).fill(cmd.value);
      await page.locator(cmd.selector).dispatchEvent("change");
      break;
    case "click":
      await page.locator(cmd.selector).first().click();
      break;
    case "select":
      await page.locator(cmd.selector).selectOption(cmd.value);
      break;
    case "reload":
      await page.reload();
      break;
    case "wait":
      break;
    default:
      throw new Error(`unknown action ${cmd.action}`);
  }
}

await serve({ browser, current: () => ({ page, context }), perform, waitUntil, snapshot });
