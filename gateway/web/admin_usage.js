// The console's Usage and Settings tabs. Usage: the project's usage grouped by day, key, user,
// agent or model over a window (the last 24 hours, 7 or 30 days, or a since/until of one's
// own), with the command line that prints the same (`gateway usage`), and its CSV: the server's
// (`format=csv`), byte for byte what `gateway usage --format csv` prints. Settings: the models
// and where each one's price comes from.

import { $, api, cell, cost, labelled } from "/web/admin_api.js";

const DAY_MS = 86_400_000;

/** The window and grouping of the form: {by, since, until} as ISO instants. */
function chosen() {
  const form = $("usage-filters").elements;
  const until = form.until.value ? new Date(form.until.value) : new Date(Date.now() + 1000);
  const since = form.last.value
    ? new Date(until.getTime() - Number(form.last.value) * DAY_MS)
    : form.since.value ? new Date(form.since.value) : new Date(until.getTime() - 30 * DAY_MS);
  return { by: form.by.value, since: since.toISOString(), until: until.toISOString() };
}

function line(row, name, group) {
  cell(row, name);
  for (const value of [group.runs, group.calls, group.inputTokens, group.outputTokens,
    group.reasoningTokens, group.cachedInputTokens]) cell(row, value);
  cell(row, group.costUsd == null ? "-" : cost(group.costUsd));
  cell(row, group.unpriced);
  cell(row, group.estimatedCalls ?? 0, group.estimatedCalls ? "estimated" : "");
}

export async function loadUsage() {
  const params = chosen();
  const body = await api("/v1/admin/usage", { params });
  $("usage-command").textContent = `./scripts/gateway usage --project ${body.project} `
    + `--by ${params.by} --since ${params.since} --until ${params.until}`;
  const rows = $("usage").tBodies[0];
  rows.replaceChildren(...body.groups.map((group) => {
    const row = document.createElement("tr");
    line(row, group.name == null ? "-" : group.name, group);
    return row;
  }));
  const total = document.createElement("tr");
  line(total, "total", { runs: "", ...body.total });
  $("usage").tFoot.replaceChildren(total);
  labelled($("usage"));
}

async function exportCsv() {
  $("usage-saved").textContent = "";
  const params = chosen();
  const text = await api("/v1/admin/usage", { params: { ...params, format: "csv" }, text: true });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
  link.download = `usage-by-${params.by}.csv`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  $("usage-saved").textContent = `saved ${link.download}`;
}

export async function loadModels() {
  const body = await api("/v1/admin/models");
  const per = (value) => (value == null ? "—" : `$${value}`);
  $("models").tBodies[0].replaceChildren(...body.models.map((model) => {
    const row = document.createElement("tr");
    row.dataset.model = model.model;
    row.className = model.source;
    cell(row, model.model);
    cell(row, model.configured ? "yes" : "seen in usage");
    cell(row, { setting: "GATEWAY_MODEL_PRICES", litellm: "litellm's price map",
                none: "nowhere: cost unknown" }[model.source], "source");
    cell(row, per(model.inputPerMillion));
    cell(row, per(model.outputPerMillion));
    cell(row, per(model.cachedInputPerMillion));
    return row;
  }));
  labelled($("models"));
}

export function wireUsage() {
  $("usage-csv").addEventListener("click", () => exportCsv().catch(window.showError));
  $("usage-filters").elements.last.addEventListener("change", () => loadUsage().catch(window.showError));
}
