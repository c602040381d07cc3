/**
 * Drive `HttpAgent` from @ag-ui/client 1.0.0 against a Gateway's AG-UI 1.0 endpoint.
 *
 * Usage: node agui_agent.mjs '<json plan>'   (or the plan on stdin)
 *
 * The plan: {url, headers?, threadId?, steps: [{user?, tools?, forwardedProps?, answerPending?,
 * resume?}]}. Each step adds the user's message (`user`) and/or a `tool` message answering every
 * tool call the previous run left pending (`answerPending`: the result text), and/or answers every
 * interrupt the previous run ended with (`resume`: `{status, payload?}`), then `agent.runAgent()`.
 * HttpAgent applies its own pipeline to the response (enforceEvents, transformChunks and
 * verifyEvents), so a stream that is not valid AG-UI makes `runAgent` reject: that rejection is
 * recorded as the run's `error`. What the client printed with console.warn (for instance a
 * STATE_DELTA it could not apply) is recorded as `warnings`.
 *
 * With `connect: true`, a second agent on the same thread (a page that reloaded) then loads it
 * with `connectAgent()`, its `connect()` posting to the gateway's `/connect` endpoint (what an
 * app's HttpAgent subclass does: the stock one implements no `connect`). The plan's
 * `afterConnect` steps then run on the reloaded agent (a `resume` step answers the interrupts
 * its connect loaded, `agent.pendingInterrupts`).
 *
 * A step may also set the agent's `state` before it runs, or `regenerate` (drop what followed
 * the last user message, as a chat UI's regenerate button does, and run again). With
 * `capabilities: true` the plan also calls `getCapabilities()` (the subclass fetches the
 * gateway's `/capabilities`, parsed with @ag-ui/core's AgentCapabilitiesSchema).
 *
 * Prints one JSON line: {threadId, runs: [{runId, events, error, outcome, pendingToolCallIds}],
 * messages, state, warnings, connected?: {events, error, messages, state, pendingInterrupts,
 * runs, messagesAfter}, capabilities?}.
 */
import { HttpAgent } from "@ag-ui/client";
import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";

class GatewayAgent extends HttpAgent {
  connect(input) {
    const url = this.url.replace(/\/run(\?|$)/, "/connect$1");
    return new HttpAgent({ url, headers: this.headers }).run(input);
  }

  async getCapabilities() {
    const url = this.url.replace(/\/run(\?|$)/, "/capabilities$1");
    const response = await fetch(url, { headers: this.headers });
    return AgentCapabilitiesSchema.parse(await response.json());
  }
}

async function readPlan() {
  if (process.argv[2]) return JSON.parse(process.argv[2]);
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

const plan = await readPlan();
const warnings = [];
const originalWarn = console.warn;
console.warn = (...args) => {
  warnings.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  originalWarn("[agui_agent]", ...args);
};

const agent = new HttpAgent({ url: plan.url, headers: plan.headers ?? {}, threadId: plan.threadId });
const runs = [];
let pending = [];
let interrupts = [];
let counter = 0;

/** Run one step of the plan on `agent`; returns the run's record. */
async function runStep(agent, step) {
  for (const toolCallId of step.answerPending !== undefined ? pending : []) {
    agent.addMessage({ id: `tool-result-${++counter}`, role: "tool", toolCallId,
                       content: step.answerPending });
  }
  if (step.regenerate) {
    // What a chat UI's "regenerate" does: drop what followed the last user message, run again.
    const last = agent.messages.map((m) => m.role).lastIndexOf("user");
    agent.setMessages(agent.messages.slice(0, last + 1));
  }
  if (step.state !== undefined) agent.setState(step.state);
  if (step.user !== undefined) {
    agent.addMessage({ id: `user-${++counter}`, role: "user", content: step.user });
  }
  const run = { runId: null, events: [], error: null, outcome: null, pendingToolCallIds: [],
                interrupts: [] };
  const resume = step.resume === undefined ? undefined
    : interrupts.map((i) => ({ interruptId: i.id, ...step.resume }));
  try {
    await agent.runAgent({ tools: step.tools ?? [], forwardedProps: step.forwardedProps ?? {},
                           ...(resume ? { resume } : {}) }, {
      onEvent: ({ event }) => {
        run.events.push(event);
        if (event.type === "RUN_STARTED") run.runId = event.runId;
      },
      onRunFinishedEvent: ({ outcome, pendingToolCallIds, interrupts: asked }) => {
        run.outcome = outcome;
        run.pendingToolCallIds = pendingToolCallIds ?? [];
        run.interrupts = asked ?? [];
      },
    });
  } catch (err) {
    run.error = err?.message ?? String(err);
  }
  pending = run.pendingToolCallIds;
  interrupts = run.interrupts;
  return run;
}

for (const step of plan.steps) runs.push(await runStep(agent, step));

let connected;
if (plan.connect) {
  const reloaded = new GatewayAgent({ url: plan.url, headers: plan.headers ?? {},
                                      threadId: agent.threadId });
  connected = { events: [], error: null };
  try {
    await reloaded.connectAgent({}, { onEvent: ({ event }) => { connected.events.push(event); } });
  } catch (err) {
    connected.error = err?.message ?? String(err);
  }
  connected.messages = reloaded.messages;
  connected.state = reloaded.state;
  connected.pendingInterrupts = reloaded.pendingInterrupts;
  // Steps after the reload run on the reloaded agent, answering what its connect loaded.
  interrupts = reloaded.pendingInterrupts ?? [];
  pending = [];
  connected.runs = [];
  for (const step of plan.afterConnect ?? []) connected.runs.push(await runStep(reloaded, step));
  connected.messagesAfter = reloaded.messages;  // as the steps after the reload left them
}

let capabilities;
if (plan.capabilities) {
  try {
    capabilities = await new GatewayAgent({ url: plan.url, headers: plan.headers ?? {} })
      .getCapabilities();
  } catch (err) {
    capabilities = { error: err?.message ?? String(err) };
  }
}

console.log(JSON.stringify({ threadId: agent.threadId, runs, messages: agent.messages,
                             state: agent.state, warnings, connected, capabilities }));
