// The playground's agent and model pickers, both filled from GET /v1/agents.
// The agent picker (shown when the gateway has more than one agent) chooses the agent of the next
// new thread (`?agent=` on POST /v1/threads/runs): a thread keeps its agent, so it only matters
// for new threads. The model picker (shown when GATEWAY_MODELS allows more than one model) sets
// each run's `model`; the gateway refuses any model outside that list.
// Kept apart from playground.js, which asks `agentQuery()` and `modelChoice()` per run.

const $ = (id) => document.getElementById(id);

/** `?agent=NAME` for a new thread when the picker shows one, else "". */
export function agentQuery() {
  const picker = $("agent");
  if (!picker || picker.parentElement.hidden || !picker.value) return "";
  return `?agent=${encodeURIComponent(picker.value)}`;
}

/** The run's `model` when the model picker shows a choice, else null (the agent's model). */
export function modelChoice() {
  const picker = $("model");
  if (!picker || picker.parentElement.hidden || !picker.value) return null;
  return picker.value;
}

function options(picker, values, describe = () => "") {
  picker.replaceChildren(...values.map((value) => {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value || "the agent's own";
    option.title = describe(value);
    return option;
  }));
}

/** Fill both pickers from GET /v1/agents with the page's API key; each hidden for one choice. */
export async function loadAgents() {
  const agentPicker = $("agent");
  const modelPicker = $("model");
  const key = $("api-key").value.trim();
  const response = await fetch("/v1/agents", { headers: key ? { "x-api-key": key } : {} });
  if (!response.ok) {
    agentPicker.parentElement.hidden = true;
    modelPicker.parentElement.hidden = true;
    return;
  }
  const { agents, defaultAgent, models = [] } = await response.json();
  const agent = agentPicker.value || localStorage.getItem("playground.agent") || defaultAgent;
  options(agentPicker, Object.keys(agents), (name) => agents[name].description || "");
  agentPicker.value = agents[agent] ? agent : defaultAgent;
  agentPicker.parentElement.hidden = Object.keys(agents).length < 2;
  // First "" (no `model`: the agent's own, which an agent file may set), then the allow-list.
  const model = modelPicker.value || localStorage.getItem("playground.model") || "";
  options(modelPicker, ["", ...models]);
  modelPicker.value = models.includes(model) ? model : "";
  modelPicker.parentElement.hidden = models.length < 2;
}

export function initAgentPicker() {
  for (const id of ["agent", "model"]) {
    $(id).addEventListener("change", () => localStorage.setItem(`playground.${id}`, $(id).value));
  }
  $("api-key").addEventListener("change", () => loadAgents().catch(() => {}));
  loadAgents().catch(() => {});
}
