// The operator console: tables over the operator API (/v1/admin/...), nothing else. The admin
// key is asked for once per tab, kept in sessionStorage and sent as the x-api-key header (never
// in a URL, so never in an access log). Every value from the server is written as text.

const KEY = "gateway.adminKey";
const $ = (id) => document.getElementById(id);
const cursors = { threads: null, runs: null };
let frameAfter = 0;
let shownRun = null;

function key() { return sessionStorage.getItem(KEY) || ""; }

class Refused extends Error {}

async function api(path, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null));
  const url = query.toString() ? `${path}?${query}` : path;
  const response = await fetch(url, { headers: key() ? { "x-api-key": key() } : {} });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401 || response.status === 403) {
    throw new Refused(`${body.code || response.status}: ${body.detail || "refused"}`);
  }
  if (!response.ok) throw new Error(`${body.code || response.status}: ${body.detail || ""}`);
  return body;
}

function showError(error) {
  if (error instanceof Refused) {
    signedIn(false);
    $("error").textContent = error.message;
  } else {
    $("error").textContent = error ? String(error.message || error) : "";
  }
  $("error").hidden = !error;
}

function signedIn(yes) {
  $("sign-in").hidden = yes;
  $("console").hidden = !yes;
  $("tabs").hidden = !yes;
  $("sign-out").hidden = !yes || !key();
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (className) td.className = className;
  row.append(td);
  return td;
}

function when(iso) { return iso ? iso.replace("T", " ").slice(0, 19) : ""; }
function ms(value) { return value == null ? "" : value < 1000 ? `${value} ms` : `${(value / 1000).toFixed(2)} s`; }
function tokens(usage) { return usage ? `${usage.inputTokens} / ${usage.outputTokens}` : ""; }
function cost(value) { return value == null ? "" : value.toFixed(6); }

function filters(form) {
  const params = {};
  for (const [name, value] of new FormData(form)) {
    const text = String(value).trim();
    if (!text) continue;
    params[name] = form.elements[name].type === "datetime-local" ? new Date(text).toISOString() : text;
  }
  return params;
}

async function loadThreads(more = false) {
  const body = await api("/v1/admin/threads", { ...filters($("thread-filters")), cursor: more ? cursors.threads : null });
  const rows = $("threads").tBodies[0];
  if (!more) rows.replaceChildren();
  for (const thread of body.threads) {
    const row = document.createElement("tr");
    row.dataset.id = thread.id;
    cell(row, when(thread.updatedAt));
    cell(row, thread.id).className = "id";
    cell(row, thread.name);
    cell(row, thread.userKey, "user");
    cell(row, thread.agent);
    cell(row, thread.status, "status");
    cell(row, thread.lastRunError ? `${thread.lastRunError.code || ""} ${thread.lastRunError.message || ""}` : "", "error-code");
    row.addEventListener("click", () => showThreadRuns(thread.id));
    rows.append(row);
  }
  cursors.threads = body.nextCursor || null;
  $("threads-more").hidden = !body.hasMore;
}

async function showThreadRuns(threadId) {
  const form = $("run-filters");
  form.reset();
  form.elements.threadId.value = threadId;
  selectTab("runs");
  await loadRuns();
}

async function loadRuns(more = false) {
  const body = await api("/v1/admin/runs", { ...filters($("run-filters")), cursor: more ? cursors.runs : null });
  const rows = $("runs").tBodies[0];
  if (!more) rows.replaceChildren();
  for (const run of body.runs) {
    const row = document.createElement("tr");
    row.dataset.id = run.id;
    row.className = run.status;
    cell(row, when(run.createdAt));
    cell(row, run.id, "id");
    cell(row, run.userKey, "user");
    cell(row, run.agent);
    cell(row, run.model);
    cell(row, run.status, "status");
    cell(row, ms(run.durationMs));
    cell(row, tokens(run.usage));
    cell(row, run.error ? run.error.code : "", "error-code");
    row.addEventListener("click", () => showRun(run.id).catch(showError));
    rows.append(row);
  }
  cursors.runs = body.nextCursor || null;
  $("runs-more").hidden = !body.hasMore;
}

async function showRun(runId) {
  const run = await api(`/v1/admin/runs/${encodeURIComponent(runId)}`);
  shownRun = run.id;
  $("run-title").textContent = `Run ${run.id}`;
  const facts = $("run-facts");
  facts.replaceChildren();
  const pairs = [["thread", run.threadId], ["user", run.userKey], ["agent", run.agent],
    ["model", run.model], ["status", run.status], ["key", run.apiKeyId], ["created", when(run.createdAt)],
    ["queued for", ms(run.queuedMs)], ["first token after", ms(run.firstTokenMs)],
    ["duration", ms(run.durationMs)], ["tokens in / out", tokens(run.usage)],
    ["cost (USD)", run.usage ? cost(run.usage.costUsd) : ""], ["frames", run.frames]];
  for (const [name, value] of pairs) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value == null ? "" : String(value);
    facts.append(dt, dd);
  }
  $("run-error").hidden = !run.error;
  $("run-error").textContent = run.error ? `${run.error.code || "error"}: ${run.error.message}` : "";
  $("frames").replaceChildren();
  frameAfter = 0;
  $("run-view").hidden = false;
  await loadFrames();
}

async function loadFrames() {
  const body = await api(`/v1/admin/runs/${encodeURIComponent(shownRun)}/frames`, { after: frameAfter || null });
  for (const entry of body.frames) {
    const item = document.createElement("li");
    item.value = entry.seq;
    item.textContent = `${when(entry.at)}  ${JSON.stringify(entry.frame)}`;
    $("frames").append(item);
    frameAfter = entry.seq;
  }
  $("frames-more").hidden = !body.hasMore;
}

async function loadUsage() {
  const body = await api("/v1/admin/usage", filters($("usage-filters")));
  const rows = $("usage").tBodies[0];
  rows.replaceChildren();
  const line = (row, name, group) => {
    cell(row, name);
    for (const value of [group.runs, group.calls, group.inputTokens, group.outputTokens,
      group.reasoningTokens, group.cachedInputTokens]) cell(row, value);
    cell(row, cost(group.costUsd) + (group.unpriced ? ` (+${group.unpriced} unpriced)` : ""));
  };
  for (const group of body.groups) {
    const row = document.createElement("tr");
    line(row, group.name == null ? "(none)" : group.name, group);
    rows.append(row);
  }
  const total = document.createElement("tr");
  line(total, "total", { runs: "", ...body.total });
  $("usage").tFoot.replaceChildren(total);
}

const loaders = { threads: () => loadThreads(), runs: () => loadRuns(), usage: () => loadUsage() };

function selectTab(name) {
  for (const button of $("tabs").querySelectorAll("button")) {
    button.classList.toggle("selected", button.dataset.tab === name);
  }
  for (const tab of Object.keys(loaders)) $(`${tab}-tab`).hidden = tab !== name;
}

async function start() {
  try {
    await loadThreads();  // answers without a key in development mode only
    signedIn(true);
    showError(null);
  } catch (error) {
    if (error instanceof Refused && !key()) {
      signedIn(false);  // not signed in yet: the form, without an error
      showError(null);
      return;
    }
    if (!(error instanceof Refused)) signedIn(true);
    showError(error);
  }
}

function wire() {
  $("sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("admin-key").value.trim());
    $("admin-key").value = "";
    start();
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    signedIn(false);
  });
  for (const button of $("tabs").querySelectorAll("button")) {
    button.addEventListener("click", () => {
      selectTab(button.dataset.tab);
      loaders[button.dataset.tab]().then(() => showError(null), showError);
    });
  }
  for (const [form, load] of [["thread-filters", loadThreads], ["run-filters", loadRuns], ["usage-filters", loadUsage]]) {
    $(form).addEventListener("submit", (event) => {
      event.preventDefault();
      load().then(() => showError(null), showError);
    });
  }
  $("threads-more").addEventListener("click", () => loadThreads(true).catch(showError));
  $("runs-more").addEventListener("click", () => loadRuns(true).catch(showError));
  $("frames-more").addEventListener("click", () => loadFrames().catch(showError));
  $("run-close").addEventListener("click", () => { $("run-view").hidden = true; });
}

wire();
start();
