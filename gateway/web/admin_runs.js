// The console's Threads and Runs tabs: the project's threads and runs across user scopes, with
// filters and pages; a run's facts, error and usage, with its thread's conversation rendered
// beside its stored log (the Timbal frames every view is made from).

import { $, api, cell, cost, filters, labelled, ms, tokens, when } from "/web/admin_api.js";
import { fromRest, renderMessage } from "/web/messages.js";

const cursors = { threads: null, runs: null };
let frameAfter = 0;
let shownRun = null;

export async function loadThreads(more = false) {
  const body = await api("/v1/admin/threads", {
    params: { ...filters($("thread-filters")), cursor: more ? cursors.threads : null } });
  const rows = $("threads").tBodies[0];
  if (!more) rows.replaceChildren();
  for (const thread of body.threads) {
    const row = document.createElement("tr");
    row.dataset.id = thread.id;
    if (thread.waiting) row.className = "waiting";
    cell(row, when(thread.updatedAt));
    cell(row, thread.id, "id");
    cell(row, thread.name);
    cell(row, thread.userKey, "user");
    cell(row, thread.agent);
    cell(row, thread.waiting ? "waiting" : thread.status, "status");
    cell(row, thread.lastRunError ? `${thread.lastRunError.code || ""} ${thread.lastRunError.message || ""}` : "", "error-code");
    row.addEventListener("click", () => showThreadRuns(thread.id));
    rows.append(row);
  }
  labelled($("threads"));
  cursors.threads = body.nextCursor || null;
  $("threads-more").hidden = !body.hasMore;
}

/** The Runs tab, filtered to one thread (`select(tab)` shows it). */
export async function showThreadRuns(threadId, select = window.selectTab) {
  const form = $("run-filters");
  form.reset();
  form.elements.threadId.value = threadId;
  select("runs");
  await loadRuns();
}

export async function loadRuns(more = false) {
  const body = await api("/v1/admin/runs", {
    params: { ...filters($("run-filters")), cursor: more ? cursors.runs : null } });
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
    row.addEventListener("click", () => showRun(run.id).catch(window.showError));
    rows.append(row);
  }
  labelled($("runs"));
  cursors.runs = body.nextCursor || null;
  $("runs-more").hidden = !body.hasMore;
}

function facts(run) {
  const estimated = run.usage?.estimatedCalls
    ? `${run.usage.estimatedCalls} of ${run.usage.calls} (cut off: tokens and cost estimated)` : "";
  return [["thread", run.threadId], ["user", run.userKey], ["agent", run.agent],
    ["model", run.model], ["status", run.status], ["key", run.apiKeyId], ["created", when(run.createdAt)],
    ["queued for", ms(run.queuedMs)], ["first token after", ms(run.firstTokenMs)],
    ["duration", ms(run.durationMs)], ["tokens in / out", tokens(run.usage)],
    ["cost (USD)", run.usage ? cost(run.usage.costUsd) || "unknown (no price)" : ""],
    ["estimated calls", estimated], ["frames", run.frames]];
}

export async function showRun(runId) {
  const run = await api(`/v1/admin/runs/${encodeURIComponent(runId)}`);
  shownRun = run.id;
  $("run-title").textContent = `Run ${run.id}`;
  const list = $("run-facts");
  list.replaceChildren();
  for (const [name, value] of facts(run)) {
    if (value === "" && name === "estimated calls") continue;
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value == null ? "" : String(value);
    list.append(dt, dd);
  }
  $("run-error").hidden = !run.error;
  $("run-error").textContent = run.error ? `${run.error.code || "error"}: ${run.error.message}` : "";
  $("frames").replaceChildren();
  frameAfter = 0;
  $("run-view").hidden = false;
  await Promise.all([loadFrames(), loadConversation(run)]);
}

/** The thread's newest messages, rendered; this run's own messages marked. */
async function loadConversation(run) {
  const thread = await api(`/v1/admin/threads/${encodeURIComponent(run.threadId)}/messages`);
  const messages = thread.messages.map((msg) => {
    const node = renderMessage(fromRest(msg));
    if (msg.runId === run.id) node.classList.add("this-run");
    return node;
  });
  $("conversation").replaceChildren(...messages);
  $("conversation-note").hidden = !thread.hasMore;
  $("conversation-note").textContent = thread.hasMore ? "The thread's newest messages." : "";
}

export async function loadFrames() {
  const body = await api(`/v1/admin/runs/${encodeURIComponent(shownRun)}/frames`,
                         { params: { after: frameAfter || null } });
  for (const entry of body.frames) {
    const item = document.createElement("li");
    item.value = entry.seq;
    item.textContent = `${when(entry.at)}  ${JSON.stringify(entry.frame)}`;
    $("frames").append(item);
    frameAfter = entry.seq;
  }
  $("frames-more").hidden = !body.hasMore;
}

export function wireRuns() {
  $("threads-more").addEventListener("click", () => loadThreads(true).catch(window.showError));
  $("runs-more").addEventListener("click", () => loadRuns(true).catch(window.showError));
  $("frames-more").addEventListener("click", () => loadFrames().catch(window.showError));
  $("run-close").addEventListener("click", () => { $("run-view").hidden = true; });
}
