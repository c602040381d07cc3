// The selected thread's runs (GET /v1/threads/{id}/runs, newest first): status, model, duration,
// time to first token, tokens and cost of each, as the gateway stored them. Clicking a run makes
// it the one the events pane reconnects to or cancels.

import { api } from "/web/http.js";

const $ = (id) => document.getElementById(id);

/** Milliseconds as people read them: "840 ms", "2.41 s". */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

const between = (from, to) => (from && to ? Date.parse(to) - Date.parse(from) : null);

function cell(text, title = "") {
  const td = document.createElement("td");
  td.textContent = text;
  if (title) td.title = title;
  return td;
}

function tokens(usage) {
  if (!usage) return cell("—");
  return cell(`${usage.inputTokens} in · ${usage.outputTokens} out`,
              `reasoning ${usage.reasoningTokens}, cached input ${usage.cachedInputTokens}, `
              + `calls ${usage.models.map((m) => `${m.model}: ${m.calls}`).join(", ")}`);
}

function cost(usage) {
  if (!usage) return cell("—");
  if (usage.costUsd === null) return cell("unknown", "a model's price is not in litellm's map");
  return cell(`$${usage.costUsd.toFixed(usage.costUsd < 0.01 ? 5 : 2)}`);
}

function row(run, onPick) {
  const tr = document.createElement("tr");
  tr.dataset.runId = run.id;
  tr.className = `run ${run.status}`;
  const ended = run.finishedAt ? duration(between(run.startedAt, run.finishedAt))
                               : run.startedAt ? "running" : "queued";
  tr.append(cell(run.id.slice(-8), run.id),
            cell(run.status, run.error ? `${run.error.code}: ${run.error.message ?? ""}` : ""),
            cell(run.model ?? "—"),
            cell(ended),
            cell(duration(between(run.startedAt, run.firstTokenAt))),
            tokens(run.usage), cost(run.usage));
  tr.addEventListener("click", () => onPick(run.id));
  return tr;
}

/** Show the runs of `threadId` (none for a new thread); `onPick(runId)` on a click. */
export async function loadRuns(threadId, onPick) {
  const body = $("runs");
  if (!threadId) {
    body.replaceChildren();
    return;
  }
  const { data } = await api("GET", `/v1/threads/${threadId}/runs?limit=20`);
  body.replaceChildren(...data.runs.map((run) => row(run, onPick)));
}
