// The playground's agent picker: shown when the gateway has more than one agent
// (GET /v1/agents), it chooses the agent of the next new thread (`?agent=` on
// POST /v1/threads/runs). A thread keeps its agent, so the picker only matters for new threads.
// Kept apart from playground.js, which calls `agentQuery()` when it starts a new thread.

const $ = (id) => document.getElementById(id);

/** `?agent=NAME` for a new thread when the picker shows one, else "". */
export function agentQuery() {
  const picker = $("agent");
  if (!picker || picker.hidden || !picker.value) return "";
  return `?agent=${encodeURIComponent(picker.value)}`;
}

/** Fill the picker from GET /v1/agents with the page's API key; hidden for one agent. */
export async function loadAgents() {
  const picker = $("agent");
  if (!picker) return;
  const key = $("api-key").value.trim();
  const response = await fetch("/v1/agents", { headers: key ? { "x-api-key": key } : {} });
  if (!response.ok) {
    picker.parentElement.hidden = true;
    return;
  }
  const { agents, defaultAgent } = await response.json();
  const chosen = picker.value || localStorage.getItem("playground.agent") || defaultAgent;
  picker.replaceChildren(...Object.values(agents).map((agent) => {
    const option = document.createElement("option");
    option.value = agent.name;
    option.textContent = agent.name;
    option.title = agent.description || "";
    return option;
  }));
  picker.value = agents[chosen] ? chosen : defaultAgent;
  picker.parentElement.hidden = Object.keys(agents).length < 2;
}

export function initAgentPicker() {
  const picker = $("agent");
  if (!picker) return;
  picker.addEventListener("change", () => localStorage.setItem("playground.agent", picker.value));
  $("api-key").addEventListener("change", () => loadAgents().catch(() => {}));
  loadAgents().catch(() => {});
}
