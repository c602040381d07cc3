// The playground: a page that talks to the gateway through its public API only, exactly as any
// client does (x-api-key, userKey, the run streams, DELETE to cancel, component state).
// Plain browser JavaScript with no build step and no dependency, so it works offline.
//
// Two views of one stream: the rendered conversation (built from the thread's REST messages,
// then updated by each event) and the raw events with their ids.
//
// Keeping up with a fast stream (real models send 50-150 tokens a second): events only change
// the page's state, and the page is redrawn at most once per animation frame; the read loop
// gives the browser a turn after each chunk it reads, so a click (Cancel) is handled at once
// whatever the stream's speed.

import { agentQuery, initAgentPicker, modelChoice } from "/web/agent_picker.js";
import { copyCurl } from "/web/curl.js";
import { api, headers, problem, withUser } from "/web/http.js";
import { el, fromRest, pretty, renderBasicPart, renderMessage } from "/web/messages.js";
import { kindOf, renderPendingCalls } from "/web/pending.js";
import { loadRuns } from "/web/run_list.js";
import { initRename, nameAfterFirstAnswer, threadLabel } from "/web/thread_names.js";

const $ = (id) => document.getElementById(id);
// The API key is kept for this tab only (sessionStorage: a reload keeps it, closing the tab
// forgets it), never in localStorage, which any later visitor of this browser profile (and any
// script of this origin, for ever) could read; the other fields are preferences.
const SESSION_ONLY = new Set(["apiKey"]);
const storage = (key) => (SESSION_ONLY.has(key) ? sessionStorage : localStorage);
const stored = (key, fallback) => storage(key).getItem(`playground.${key}`) ?? fallback;
const store = (key, value) => storage(key).setItem(`playground.${key}`, value);

const DEFAULT_EXTRAS = {
  availableComponents: [{
    name: "WeatherCard",
    description: "Shows the weather of a city.",
    propsSchema: {
      type: "object",
      properties: { city: { type: "string", examples: ["Paris"] },
                    temperature: { type: "number" } },
      required: ["city"],
    },
    stateSchema: { type: "object", properties: { pinned: { type: "boolean" } } },
  }],
  tools: [{
    name: "get_local_time",
    description: "The user's local time (answered in the browser).",
    inputSchema: { type: "object", properties: { timezone: { type: "string" } } },
  }],
};

const state = {
  thread: null,        // the selected thread (REST shape), null for a new one
  messages: [],        // rendered messages: {id, role, parts, cancelled}
  runId: null,         // the run being watched
  lastId: 0,           // the last event id read from it
  stream: null,        // AbortController of the open stream
  pending: [],         // client tool calls awaiting results
  settling: false,     // a run's stream is open, or its thread is being read again after it
};

function showError(error) {
  $("error").hidden = !error;
  $("error").textContent = error ? String(error.message || error) : "";
}

// -- the SSE reader -----------------------------------------------------------------------------

/** Reads an SSE response body and calls onEvent({id, data}) / onComment(text) per message. */
async function readSse(response, onEvent, onComment) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) onComment(line.slice(1).trim());
        else if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent({ id, data: JSON.parse(data.join("\n")) });
    }
    await nextTask();  // input events (a click on Cancel) come before the next chunk
  }
}

/** Resolves after the browser has had a turn (its queued input and rendering tasks). */
function nextTask() {
  if (globalThis.scheduler?.yield) return globalThis.scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

// -- runs -------------------------------------------------------------------------------------

function extras() {
  try {
    return JSON.parse($("extras").value || "{}");
  } catch (error) {
    throw new Error(`The tools and components JSON is not valid: ${error.message}`);
  }
}

/** The run request for `message` on the selected thread (or a new one): {path, body}. */
function runRequest(message) {
  const thread = state.thread;
  const body = { ...extras(), message };
  const user = $("user-key").value.trim();
  if (user) body.userKey = user;
  if (thread?.lastCompletedRunId) body.previousRunId = thread.lastCompletedRunId;
  const model = modelChoice();
  if (model) body.model = model;
  const path = thread ? `/v1/threads/${thread.id}/runs` : `/v1/threads/runs${agentQuery()}`;
  return { path, body };
}

async function startRun(message) {
  const { path, body } = runRequest(message);
  await stream("POST", path, body, "started");
}

/** The composer's message as a run request, copied as a curl command. */
async function copyComposerCurl() {
  const text = $("message").value.trim();
  if (!text) throw new Error("Type a message first: its run request is what gets copied.");
  await copyCurl(runRequest({ role: "user", content: [{ type: "text", text }] }));
}

async function reconnect() {
  const runId = $("run-id").value.trim();
  if (!state.thread || !runId) throw new Error("Pick a thread and a run to reconnect to.");
  const after = $("after-id").value.trim();
  const path = `/v1/threads/${state.thread.id}/runs/${runId}${after ? `?after=${after}` : ""}`;
  await loadThread(state.thread.id);  // what is persisted; the stream adds what follows
  await stream("GET", path, null, `reconnected after id ${after || 0}`);
}

/** A run's events, then the thread as the run left it. Sending stays off until then: the next
 * run must name the run that just ended as its `previousRunId`, which the thread tells. */
async function stream(method, path, body, note) {
  state.settling = true;
  try {
    await streamOnce(method, path, body, note);
  } finally {
    state.settling = false;
    setStatus($("run-status").textContent);
  }
}

async function streamOnce(method, path, body, note) {
  closeStream();
  const controller = new AbortController();
  state.stream = controller;
  const init = { method, signal: controller.signal,
                 headers: headers({ accept: "text/event-stream",
                                    ...(body ? { "content-type": "application/json" } : {}) }) };
  if (body) init.body = JSON.stringify(body);
  setStatus("connecting");
  const response = await fetch(withUser(path), init);
  if (!response.ok) {
    setStatus("");
    throw problem(response.status, await response.json().catch(() => null));
  }
  const threadId = response.headers.get("X-Thread-Id");
  const runId = response.headers.get("X-Run-Id");
  if (threadId && state.thread?.id !== threadId) {
    await selectThread(threadId, { keepEvents: true });
    await loadThreads();  // the new thread appears in the list at once
  }
  if (runId) {
    setRun(runId);
    refreshRuns();  // the run list shows the new run as running
  }
  rawNote(`${method} ${path.split("?")[0]}: ${note}`);
  setStatus("streaming");
  try {
    await readSse(response, onEvent, (text) => rawComment(text));
  } catch (error) {
    if (controller.signal.aborted) return;
    throw error;
  } finally {
    if (state.stream === controller) state.stream = null;
  }
  rawNote("stream closed");
  await afterRun();
}

function closeStream() {
  if (state.stream) {
    state.stream.abort();
    rawNote("stream closed by the playground");
  }
  state.stream = null;
}

function setRun(runId) {
  if (state.runId !== runId) state.lastId = 0;
  state.runId = runId;
  $("run-id").value = runId;
}

async function afterRun() {
  if (state.thread) {
    await loadThread(state.thread.id);
    await nameThread();
  }
  await loadThreads();
  if (state.pending.length) setStatus("waiting for you");
}

async function cancel() {
  const runId = $("run-id").value.trim() || state.runId;
  if (!state.thread || !runId) throw new Error("No run to cancel.");
  const { status, data } = await api("DELETE", `/v1/threads/${state.thread.id}/runs/${runId}`);
  rawNote(`DELETE run ${runId}: ${status} ${data?.status ?? ""}`);
}

// -- events -> the two panes ------------------------------------------------------------------

function onEvent({ id, data: event }) {
  if (id) {
    state.lastId = Number(id);
    $("after-id").value = id;
  }
  rawEvent(id, event);
  applyEvent(event);
  scheduleConversation();
}

function message(id, role = "assistant") {
  let found = state.messages.find((m) => m.id === id);
  if (!found) {
    found = { id, role, parts: [] };
    state.messages.push(found);
  }
  state.current = found;
  return found;
}

function currentMessage() {
  return state.current && state.current.role === "assistant" && !state.current.done
    ? state.current : message(`live-${state.runId}-${state.messages.length}`);
}

function openPart(msg, kind) {
  const last = msg.parts[msg.parts.length - 1];
  if (last && last.kind === kind && !last.closed) return last;
  const part = { kind, text: "" };
  msg.parts.push(part);
  return part;
}

function findPart(predicate) {
  for (const msg of state.messages) {
    const part = msg.parts.find(predicate);
    if (part) return part;
  }
  return null;
}

function applyEvent(event) {
  const value = event.value || {};
  switch (event.type) {
    case "RUN_STARTED":
      state.pending = [];
      renderPending();
      state.current = null;
      break;
    case "TEXT_MESSAGE_START":
      openPart(adopt(event.messageId), "text");
      break;
    case "TEXT_MESSAGE_CONTENT":
      openPart(adopt(event.messageId), "text").text += event.delta;
      break;
    case "TEXT_MESSAGE_END":
      openPart(adopt(event.messageId), "text").closed = true;
      break;
    case "THINKING_TEXT_MESSAGE_START":
      openPart(currentMessage(), "reasoning");
      break;
    case "THINKING_TEXT_MESSAGE_CONTENT":
      openPart(currentMessage(), "reasoning").text += event.delta;
      break;
    case "THINKING_TEXT_MESSAGE_END":
      openPart(currentMessage(), "reasoning").closed = true;
      break;
    case "TOOL_CALL_START":
      adopt(event.parentMessageId).parts.push(
        { kind: "tool", id: event.toolCallId, name: event.toolCallName, args: "" });
      break;
    case "TOOL_CALL_ARGS": {
      const part = findPart((p) => p.kind === "tool" && p.id === event.toolCallId);
      if (part) part.args += event.delta;
      break;
    }
    case "TOOL_CALL_RESULT": {
      const part = findPart((p) => p.kind === "tool" && p.id === event.toolCallId);
      if (part) part.result = event.content;
      break;
    }
    case "CUSTOM":
      applyCustom(event.name, value);
      break;
    case "RUN_FINISHED":
      setStatus("finished");
      break;
    case "RUN_ERROR":
      setStatus(`ended: ${event.code}`);
      break;
    default:
      break;
  }
}

/** The message an event names; a placeholder made before its id was known takes that id. */
function adopt(messageId) {
  const live = state.current;
  if (live && live.id.startsWith("live-") && !state.messages.some((m) => m.id === messageId)) {
    live.id = messageId;
    return live;
  }
  return message(messageId);
}

function applyCustom(name, value) {
  if (name === "tambo.component.start") {
    adopt(value.messageId).parts.push(
      { kind: "component", id: value.componentId, name: value.componentName, props: {} });
    return;
  }
  const component = findPart((p) => p.kind === "component" && p.id === value.componentId);
  if (name === "tambo.component.props_delta" && component) {
    component.props = applyPatch(component.props, value.operations);
  } else if (name === "tambo.component.end" && component) {
    if (value.props) component.props = value.props;
    if (value.state) component.state = value.state;
  } else if (name === "tambo.component.state_delta" && component) {
    component.state = applyPatch(component.state || {}, value.operations);
    component.revision = value.revision;
  } else if (name === "tambo.run.awaiting_input") {
    state.pending = value.pendingToolCalls || [];
    renderPending();
  }
}

// Keys that would reach an object's prototype instead of its own data.
const UNSAFE_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** RFC 6902 for what the gateway sends (add, replace, remove, test); returns a new value. An
 * operation whose path names a prototype key or goes through a missing member is skipped. */
function applyPatch(document, operations) {
  let root = structuredClone(document);
  for (const op of operations || []) {
    const keys = op.path.split("/").slice(1).map((k) => k.replace(/~1/g, "/").replace(/~0/g, "~"));
    if (keys.some((key) => UNSAFE_KEYS.has(key))) continue;
    if (!keys.length) {
      if (op.op !== "remove" && op.op !== "test") root = structuredClone(op.value);
      continue;
    }
    let parent = root;
    for (const key of keys.slice(0, -1)) {
      parent = parent !== null && typeof parent === "object" && Object.hasOwn(parent, key)
        ? parent[key] : undefined;
      if (parent === undefined) break;
    }
    if (parent === null || typeof parent !== "object") continue;
    const last = keys[keys.length - 1];
    if (op.op === "remove") {
      if (Array.isArray(parent)) parent.splice(Number(last), 1); else delete parent[last];
    } else if (op.op === "add" && Array.isArray(parent)) {
      parent.splice(last === "-" ? parent.length : Number(last), 0, structuredClone(op.value));
    } else if (op.op === "add" || op.op === "replace") {
      parent[last] = structuredClone(op.value);
    }
  }
  return root;
}

// -- rendering --------------------------------------------------------------------------------

let conversationQueued = false;

/** Redraws the conversation on the next animation frame, once however many events came. */
function scheduleConversation() {
  if (conversationQueued) return;
  conversationQueued = true;
  requestAnimationFrame(() => {
    conversationQueued = false;
    renderConversation();
  });
}

function renderConversation() {
  const box = $("conversation");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  box.replaceChildren(...state.messages.map((msg) => renderMessage(msg, renderPart)));
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function renderPart(part) {
  return part.kind === "component" ? renderComponent(part) : renderBasicPart(part);
}

function renderComponent(part) {
  const patch = el("textarea", { rows: "2", spellcheck: "false", "aria-label": "JSON Patch" });
  const first = Object.keys(part.state || {})[0];
  patch.value = JSON.stringify(first !== undefined
    ? [{ op: "replace", path: `/${first}`, value: !part.state[first] }]
    : [{ op: "add", path: "/pinned", value: true }]);
  const button = el("button", { type: "button" }, "Patch state");
  button.addEventListener("click", () => guard(() => patchState(part, patch.value)));
  return el("div", { class: "part component", "data-component-id": part.id },
            el("h4", {}, `component: ${part.name}`),
            el("div", {}, "props"), el("pre", { class: "props" }, pretty(part.props)),
            el("div", {}, `state${part.revision !== undefined ? ` (revision ${part.revision})`
                                                              : ""}`),
            el("pre", { class: "state" }, pretty(part.state ?? null)), patch, button);
}

async function patchState(part, text) {
  let operations;
  try {
    operations = JSON.parse(text);
  } catch (error) {
    throw new Error(`The patch is not valid JSON: ${error.message}`);
  }
  const path = `/v1/threads/${state.thread.id}/components/${part.id}/state`;
  const { data } = await api("POST", path, { patch: operations });
  // The thread may have been reloaded meanwhile (a run's end reloads it): its parts are new
  // objects, so the answer goes to the component as shown now, not only to the one clicked.
  const shown = state.messages.flatMap((m) => m.parts)
    .filter((p) => p.kind === "component" && p.id === part.id);
  for (const target of new Set([part, ...shown])) {
    if (target.revision === undefined || target.revision <= data.revision) {
      target.state = data.state;
      target.revision = data.revision;
    }
  }
  rawNote(`POST component ${part.id} state: revision ${data.revision}`);
  renderConversation();
}

// Streamed fragments of one message or tool call, one row for the run of them (ids first-last).
const COLLAPSED = new Set(["TEXT_MESSAGE_CONTENT", "THINKING_TEXT_MESSAGE_CONTENT",
                           "TOOL_CALL_ARGS"]);
let openRow = null;  // the collapsed row still growing: {type, key, count, text, node, span, pre}

function rawEvent(id, event) {
  const { type, ...rest } = event;
  const key = event.messageId ?? event.toolCallId ?? "";
  if (COLLAPSED.has(type) && openRow && openRow.type === type && openRow.key === key && id) {
    openRow.count += 1;
    openRow.text += event.delta ?? "";
    openRow.node.dataset.lastId = id;
    openRow.span.textContent = `${openRow.node.dataset.id}-${id}`;
    openRow.pre.textContent = `x${openRow.count} ${JSON.stringify(openRow.text)}`;
    return;
  }
  const label = type === "CUSTOM" ? `CUSTOM ${event.name}` : type;
  if (type === "CUSTOM") delete rest.name;
  const span = el("span", { class: "id" }, id ?? "");
  const pre = el("pre", {}, JSON.stringify(rest));
  const node = el("li", { class: "event", "data-id": id ?? "" }, span,
                  el("span", { class: "type" }, label), pre);
  openRow = COLLAPSED.has(type) && id
    ? { type, key, count: 1, text: event.delta ?? "", node, span, pre } : null;
  addRaw(node);
}

function rawComment(text) {
  openRow = null;
  addRaw(el("li", { class: "comment" }, el("span", { class: "id" }, ":"), el("span", {}, text)));
}

function rawNote(text) {
  openRow = null;
  addRaw(el("li", { class: "note" }, el("span", { class: "id" }, "—"), el("span", {}, text)));
}

const rawQueue = [];

/** Queues a row of the events pane; the rows of one animation frame are added together. */
function addRaw(node) {
  rawQueue.push(node);
  if (rawQueue.length === 1) requestAnimationFrame(flushRaw);
}

function flushRaw() {
  const list = $("events");
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  list.append(...rawQueue.splice(0));
  while (list.children.length > 3000) list.firstChild.remove();
  if (atBottom) list.scrollTop = list.scrollHeight;
}

let collectAnswers = () => [];

function renderPending() {
  collectAnswers = renderPendingCalls($("pending-calls"), state.pending,
                                      (content) => answerPending(content), guard);
  const kinds = new Set(state.pending.map(kindOf));
  $("pending-title").textContent = kinds.has("approval") ? "The run waits for your approval"
    : kinds.has("question") ? "A tool asks a question" : "The run is waiting for client tool results";
  $("pending-send").hidden = state.pending.length === 1 && !kinds.has("clientTool");
  $("pending").hidden = state.pending.length === 0;
}

async function answerPending(content) {
  state.pending = [];
  renderPending();
  await startRun({ role: "user", content });
}

async function sendToolResults(event) {
  event.preventDefault();
  await answerPending(collectAnswers());
}

/** A paused thread picked from the list: what its run waits for, from the run's status (not
 * again when the form shows those calls already: what was typed into it stays). */
async function loadPending(thread) {
  if (!thread.pendingToolCallIds?.length || !thread.lastCompletedRunId || state.stream) return;
  const shown = state.pending.map((call) => call.toolCallId).join(" ");
  if (shown === thread.pendingToolCallIds.join(" ")) return;
  const { data } = await api("GET", `/v1/threads/${thread.id}/runs/${thread.lastCompletedRunId}`);
  if (state.thread?.id !== thread.id) return;
  state.pending = data.pendingToolCalls || [];
  renderPending();
  setStatus("waiting for you");
}

function setStatus(text) {
  $("run-status").textContent = text;
  $("send").disabled = state.settling || text === "streaming" || text === "connecting";
}

// -- threads ----------------------------------------------------------------------------------

async function loadThreads() {
  const { data } = await api("GET", "/v1/threads?limit=50");
  $("threads").replaceChildren(...data.threads.map((thread) => {
    const waiting = thread.runStatus === "idle" && thread.pendingToolCallIds?.length > 0;
    const classes = [thread.id === state.thread?.id ? "selected" : "", waiting ? "waiting" : ""];
    const item = el("li", { "data-thread-id": thread.id, title: thread.id,
                            class: classes.filter(Boolean).join(" ") },
                    el("span", { class: "name" }, threadLabel(thread)),
                    el("small", {}, waiting ? "waiting for you" : thread.runStatus));
    item.addEventListener("click", () => guard(() => selectThread(thread.id)));
    return item;
  }));
}

async function selectThread(threadId, { keepEvents = false } = {}) {
  if (!keepEvents) {
    closeStream();
    $("events").replaceChildren();
    state.pending = [];
    renderPending();
  }
  await loadThread(threadId);
  const runId = state.thread.currentRunId || state.thread.lastCompletedRunId;
  if (!keepEvents && runId) setRun(runId);
  for (const item of $("threads").children) {
    item.classList.toggle("selected", item.dataset.threadId === threadId);
  }
}

async function loadThread(threadId) {
  const { data } = await api("GET", `/v1/threads/${threadId}`);
  state.thread = data;
  state.messages = data.messages.map(fromRest);
  state.current = null;
  showTitle(data);
  if (!state.stream) setStatus(data.runStatus);
  renderConversation();
  refreshRuns();
  await loadPending(data);
}

function showTitle(thread) {
  $("thread-title").textContent = threadLabel(thread);
  $("thread-title").title = thread.id;
  $("rename-thread").hidden = false;
}

/** Name the thread after its first answer (once; a failure leaves it unnamed, noted). */
async function nameThread() {
  try {
    const named = await nameAfterFirstAnswer(state.thread);
    if (named && state.thread?.id === named.id) {
      state.thread.name = named.name;
      showTitle(state.thread);
    }
  } catch (error) {
    rawNote(`naming the thread failed: ${error.message}`);
  }
}

/** Reload the run list of the selected thread, in the background. */
function refreshRuns() {
  const threadId = state.thread?.id;
  loadRuns(threadId, (runId) => setRun(runId)).catch((error) => {
    if (state.thread?.id === threadId) showError(error);
  });
}

function newThread() {
  closeStream();
  state.thread = null;
  state.messages = [];
  state.runId = null;
  state.pending = [];
  renderPending();
  $("events").replaceChildren();
  $("run-id").value = "";
  $("after-id").value = "";
  $("thread-title").textContent = "New thread";
  $("thread-title").title = "";
  $("rename-thread").hidden = true;
  setStatus("");
  renderConversation();
  refreshRuns();
  for (const item of $("threads").children) item.classList.remove("selected");
}

// -- wiring -----------------------------------------------------------------------------------

async function guard(action) {
  showError(null);
  try {
    await action();
  } catch (error) {
    showError(error);
    if (!state.stream) setStatus(state.thread?.runStatus ?? "");
  }
}

function init() {
  $("api-key").value = stored("apiKey", "");
  $("user-key").value = stored("userKey", "playground");
  $("extras").value = stored("extras", pretty(DEFAULT_EXTRAS));
  for (const [id, key] of [["api-key", "apiKey"], ["user-key", "userKey"], ["extras", "extras"]]) {
    $(id).addEventListener("change", () => store(key, $(id).value));
  }
  $("user-key").addEventListener("change", () => guard(async () => { newThread(); await loadThreads(); }));
  $("api-key").addEventListener("change", () => guard(loadThreads));
  $("new-thread").addEventListener("click", newThread);
  $("refresh-threads").addEventListener("click", () => guard(loadThreads));
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text) return;
    $("message").value = "";
    state.messages.push({ id: `local-${Date.now()}`, role: "user",
                          parts: [{ kind: "text", text }], done: true });
    renderConversation();
    guard(() => startRun({ role: "user", content: [{ type: "text", text }] }));
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("pending").addEventListener("submit", (event) => guard(() => sendToolResults(event)));
  $("reconnect").addEventListener("click", () => guard(reconnect));
  $("cancel").addEventListener("click", () => guard(cancel));
  $("copy-curl").addEventListener("click", () => guard(copyComposerCurl));
  $("close-curl").addEventListener("click", () => { $("curl-box").hidden = true; });
  initRename(() => state.thread, async (thread) => {
    state.thread.name = thread.name;
    showTitle(state.thread);
    await loadThreads();
  }, guard);
  guard(loadThreads);
  initAgentPicker();
}

init();
