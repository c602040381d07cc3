// The console's Keys tab: the project's managed keys (never a key itself: its id and prefix),
// each with its kind, agent, state, limits and last use; a new one made with its limits and
// agent, shown once; a key revoked in two clicks. What `gateway keys` does, for this project.

import { $, api, cell, labelled, when } from "/web/admin_api.js";
import { el } from "/web/messages.js";

function limit(value, fallback) {
  if (value == null) return `default (${fallback === 0 ? "none" : fallback})`;
  return value === 0 ? "none" : String(value);
}

function revokeButton(key) {
  const button = el("button", { type: "button", class: "revoke" }, "Revoke");
  button.addEventListener("click", () => {
    if (!button.classList.contains("confirm")) {
      button.classList.add("confirm");
      button.textContent = "Really revoke?";
      return;
    }
    api(`/v1/admin/keys/${encodeURIComponent(key.id)}/revoke`, { method: "POST" })
      .then(() => loadKeys()).catch(window.showError);
  });
  return button;
}

export async function loadKeys() {
  let body;
  try {
    body = await api("/v1/admin/keys");
  } catch (error) {
    if (error.code !== "ADMIN_KEY_REQUIRED") throw error;
    $("keys-note").hidden = false;  // development mode: no key of its own to manage them with
    $("keys-note").textContent = error.message;
    $("key-form").hidden = true;
    $("keys").tBodies[0].replaceChildren();
    return;
  }
  $("keys-note").hidden = true;
  $("key-form").hidden = false;
  const agents = $("key-form").elements.agent;
  const picked = agents.value;
  agents.replaceChildren(el("option", { value: "" }, "any (the default)"),
                         ...body.agents.map((name) => el("option", { value: name }, name)));
  agents.value = picked;
  const rows = $("keys").tBodies[0];
  rows.replaceChildren(...body.keys.map((key) => {
    const row = document.createElement("tr");
    row.dataset.id = key.id;
    row.className = key.state;
    cell(row, `${key.prefix} ${key.id}`, "id");
    cell(row, key.kind);
    cell(row, key.kind === "admin" ? "" : key.agent || "any");
    cell(row, key.state, "status");
    cell(row, when(key.createdAt));
    cell(row, key.expiresAt ? when(key.expiresAt) : "never");
    cell(row, key.lastUsedAt ? when(key.lastUsedAt) : "never");
    cell(row, limit(key.maxConcurrentRuns, body.defaults.maxConcurrentRuns));
    cell(row, limit(key.runsPerMinute, body.defaults.runsPerMinute));
    cell(row, limit(key.dailyTokens, body.defaults.dailyTokens));
    const actions = cell(row, "");
    if (key.state === "active") actions.append(revokeButton(key));
    return row;
  }));
  labelled($("keys"));
}

async function makeKey(event) {
  event.preventDefault();
  const form = $("key-form").elements;
  const number = (name) => (form[name].value === "" ? undefined : Number(form[name].value));
  const body = { admin: form.kind.value === "admin",
                 agent: form.kind.value === "admin" ? undefined : form.agent.value || undefined,
                 expiresAt: form.expiresAt.value ? `${form.expiresAt.value}T00:00:00Z` : undefined,
                 maxConcurrentRuns: number("maxConcurrentRuns"),
                 runsPerMinute: number("runsPerMinute"), dailyTokens: number("dailyTokens") };
  const made = await api("/v1/admin/keys", { method: "POST", body });
  $("new-key-value").textContent = made.key;
  $("new-key").hidden = false;
  $("key-form").reset();
  await loadKeys();
}

export function wireKeys() {
  $("key-form").addEventListener("submit", (event) => makeKey(event).catch(window.showError));
  $("key-form").elements.kind.addEventListener("change", () => {
    $("key-form").elements.agent.disabled = $("key-form").elements.kind.value === "admin";
  });
  $("new-key-close").addEventListener("click", () => {
    $("new-key").hidden = true;
    $("new-key-value").textContent = "";
  });
}
