/**
 * Drive the real @tambo-ai/client 1.1.3 against a Gateway (contract §20.2).
 *
 * Usage: GATEWAY_URL=http://127.0.0.1:PORT node run_scenario.mjs <scenario>
 *
 * Prints exactly one JSON line on stdout (the scenario result); all logging,
 * including the Tambo client's own console.warn noise, goes to stderr. A
 * scenario that throws still prints a line, `{scenario, crash, ...partial}`,
 * and exits 0, because "the client blew up" is a test outcome the Python side
 * asserts on. Exit code 2 means the harness itself failed (bad usage, a bug
 * here). SCENARIO_TIMEOUT_MS (default 50000) bounds a whole scenario.
 *
 * To add a scenario (client tool, component, cancel, ...), add an async
 * function to SCENARIOS taking (ctx, result) and filling `result`.
 */
import { TamboClient } from "@tambo-ai/client";

const log = (...args) => console.error("[run_scenario]", ...args);

/** The run being collected right now, reported if the scenario times out. */
let inProgress = null;

/** Everything a scenario needs, so scenarios stay short. */
function makeContext(gatewayUrl) {
  return {
    gatewayUrl,
    log,
    /** TamboClient as §20.2 creates it; `apiKey` must be non-empty even if unused. */
    newClient: (options = {}) =>
      new TamboClient({ apiKey: "test-key", tamboUrl: gatewayUrl, userKey: "user-1", ...options }),
    runAndCollect,
    threadSummary,
  };
}

/** Plain-JSON view of a thread's messages (content blocks are already plain data). */
function summarizeMessages(messages = []) {
  return messages.map((m) => ({ id: m.id, role: m.role, content: m.content, ...(m.reasoning ? { reasoning: m.reasoning } : {}) }));
}

/** What the client state says about a thread after a run (reducer view, §11). */
function threadSummary(client, threadId) {
  const state = threadId ? client.getState().threadMap[threadId] : undefined;
  return {
    error: state?.streaming?.error ?? null,
    status: state?.thread?.status ?? null,
    lastRunCancelled: state?.thread?.lastRunCancelled ?? null,
    lastCompletedRunId: state?.lastCompletedRunId ?? null,
    streamingRunId: state?.streaming?.runId ?? null,
    messages: summarizeMessages(state?.thread?.messages),
  };
}

/**
 * Start `client.run(message, options)`, iterate every yielded event, then
 * await `stream.thread`. A rejection (HTTP error, reducer fatal, abort) is
 * recorded in `rejected` instead of thrown, because tests assert on it.
 * `onEvent(event, stream)` lets a scenario act mid-stream (e.g. cancel).
 */
async function runAndCollect(client, message, options = {}, onEvent = undefined) {
  const stream = client.run(message, options);
  const out = { threadId: options.threadId ?? null, runIds: [], eventTypes: [], customNames: [], rejected: null };
  inProgress = out;
  try {
    for await (const { event } of stream) {
      out.eventTypes.push(event.type);
      if (event.type === "CUSTOM") out.customNames.push(event.name);
      if (event.type === "RUN_STARTED") {
        out.runIds.push(event.runId);
        out.threadId ??= event.threadId;
      }
      if (onEvent) await onEvent(event, stream);
    }
    const thread = await stream.thread;
    out.threadId ??= thread.id;
  } catch (err) {
    out.rejected = { name: err?.name ?? "Error", message: err?.message ?? String(err),
                     status: err?.status ?? null, code: err?.error?.code ?? null };
  }
  inProgress = null;
  return { ...out, ...threadSummary(client, out.threadId) };
}

const WEATHER_TOOL_SCHEMA = {
  type: "object",
  properties: { city: { type: "string" } },
  required: ["city"],
};

const SCENARIOS = {
  /** A client tool round trip (§10), then a follow-up on the same thread. */
  async client_tool(ctx, result) {
    const client = ctx.newClient();
    result.calls = [];
    client.registerTool({
      name: "get_weather",
      description: "Get the weather for a city",
      inputSchema: WEATHER_TOOL_SCHEMA,
      outputSchema: { type: "object" },
      tool: async (args) => {
        result.calls.push(args);
        return { city: args.city, tempC: 21 };
      },
    });
    result.firstRun = await ctx.runAndCollect(client, "What's the weather in Paris?");
    result.threadId = result.firstRun.threadId;
    if (!result.threadId) throw new Error("first run produced no threadId");
    result.followUp = await ctx.runAndCollect(client, "Thanks!", { threadId: result.threadId });
  },

  /**
   * A server tool that asks first (docs/human-in-the-loop.md): the app registers a tool under
   * the server tool's name whose function is the approval prompt; the client runs it when the
   * run pauses and sends its answer, `{approved: true}`, as the tool's result. APPROVE=no
   * answers `{approved: false}`; EDITED_TO approves with `editedArgs` sending to that address.
   */
  async approval(ctx, result) {
    const client = ctx.newClient();
    result.asked = [];
    client.registerTool({
      name: "send_email",
      description: "Approve sending an email",
      inputSchema: { type: "object", properties: { to: { type: "string" }, subject: { type: "string" } } },
      outputSchema: { type: "object" },
      tool: async (args) => {
        result.asked.push(args);
        if (process.env.APPROVE === "no") return { approved: false, reason: "not now" };
        if (process.env.EDITED_TO) {
          return { approved: true, editedArgs: { ...args, to: process.env.EDITED_TO } };
        }
        return { approved: true };
      },
    });
    result.run = await ctx.runAndCollect(client, "Email Ada");
  },

  /**
   * The page reloads while a client tool runs (issue 25): the first client never answers;
   * a second client (the reloaded page) cancels the paused run and sends a new message.
   */
  async reload_during_tool(ctx, result) {
    const before = ctx.newClient();
    let toolCalled;
    const called = new Promise((resolve) => { toolCalled = resolve; });
    before.registerTool({
      name: "get_weather",
      description: "Get the weather for a city",
      inputSchema: WEATHER_TOOL_SCHEMA,
      outputSchema: { type: "object" },
      tool: (args) => { toolCalled(args); return new Promise(() => {}); },  // the tab is gone
    });
    const ids = {};
    void ctx.runAndCollect(before, "What's the weather in Paris?", {}, async (event) => {
      if (event.type === "RUN_STARTED") Object.assign(ids, { threadId: event.threadId, runId: event.runId });
    });
    result.call = await called;
    const after = ctx.newClient();
    await after.switchThread(ids.threadId);
    result.deleted = await after.getSdkClient().threads.runs.delete(ids.runId, { threadId: ids.threadId });
    await after.fetchThread(ids.threadId);
    result.next = await ctx.runAndCollect(after, "Never mind, hello!", { threadId: ids.threadId });
    Object.assign(result, ids);
  },

  /**
   * A second message while the first answer streams (issue 25), the app choosing
   * `multitaskStrategy` (env STRATEGY, default "interrupt"; TamboClient has no option for it:
   * the app adds it to its run requests, here by wrapping fetch).
   */
  async double_text(ctx, result) {
    const plainFetch = globalThis.fetch;
    globalThis.fetch = (input, init = {}) => {
      const url = String(input instanceof Request ? input.url : input);
      if (init.method === "POST" && /\/runs$/.test(url) && typeof init.body === "string") {
        init = { ...init, body: JSON.stringify({ ...JSON.parse(init.body), multitaskStrategy: process.env.STRATEGY ?? "interrupt" }) };
      }
      return plainFetch(input, init);
    };
    const client = ctx.newClient();
    let secondRun;
    let texts = 0;
    let threadId;
    result.first = await ctx.runAndCollect(client, "Tell me a long story", {}, async (event) => {
      if (event.type === "RUN_STARTED") threadId = event.threadId;
      if (event.type === "TEXT_MESSAGE_CONTENT" && ++texts === 2) {
        secondRun = ctx.runAndCollect(client, "Actually, a short one", { threadId });
      }
    });
    result.second = await secondRun;
  },

  /** A component rendered from streamed props (§8, §12.1), then a follow-up. */
  async component(ctx, result) {
    const client = ctx.newClient();
    client.registerComponent("WeatherCard", {
      name: "WeatherCard",
      description: "Shows the weather for a city",
      props: { type: "object", properties: { city: { type: "string" }, tempC: { type: "number" } } },
      component: null,
    });
    result.firstRun = await ctx.runAndCollect(client, "Show me the weather in Paris");
    result.threadId = result.firstRun.threadId;
    if (!result.threadId) throw new Error("first run produced no threadId");
    result.followUp = await ctx.runAndCollect(client, "Thanks!", { threadId: result.threadId });
  },

  /**
   * Component state updated through the SDK while the run streams (§12.2): the gateway
   * publishes `tambo.component.state_delta`, which the reducer applies to its copy.
   */
  async state_delta(ctx, result) {
    const client = ctx.newClient();
    client.registerComponent("DataTable", {
      name: "DataTable",
      description: "A table of rows",
      props: { type: "object", properties: { title: { type: "string" } } },
      component: null,
    });
    const sdk = client.getSdkClient();
    let threadId = null;
    result.updates = [];
    result.run = await ctx.runAndCollect(client, "Show the users table", {}, async (event) => {
      if (event.type === "RUN_STARTED") threadId = event.threadId;
      if (event.type !== "CUSTOM" || event.name !== "tambo.component.start") return;
      const componentId = event.value.componentId;
      result.componentId = componentId;
      const update = (body) =>
        sdk.threads.state.updateState(componentId, { threadId, userKey: "user-1", ...body });
      result.updates.push(await update({ state: { rows: [], loading: true } }));
      result.updates.push(await update({ patch: [
        { op: "add", path: "/rows/-", value: { id: 1, name: "Ada" } },
        { op: "replace", path: "/loading", value: false },
      ] }));
    });
    result.threadId = result.run.threadId;
  },

  /** Fetch a thread the client never saw (reload), then continue it. */
  async reload(ctx, result) {
    const threadId = process.env.THREAD_ID;
    const client = ctx.newClient();
    await client.switchThread(threadId);
    result.loaded = ctx.threadSummary(client, threadId);
    result.followUp = await ctx.runAndCollect(client, "After reload", { threadId });
  },

  /**
   * `cancelRun` mid-stream (§13.1), twice, each followed by a run on the same thread:
   * `newThread`: a run that created its thread (the client only sends the DELETE, without
   * userKey, so the gateway must end the stream with RUN_ERROR {code: CANCELLED});
   * `existingThread`: a run on a known thread (the client also aborts its own stream).
   * With MODEL_URL (the scripted model's base URL), `upstreamClosedMs` is the time from calling
   * cancelRun to the upstream model seeing its stream closed (its `/_disconnects` log).
   */
  async cancel(ctx, result) {
    const client = ctx.newClient();
    const modelUrl = process.env.MODEL_URL?.replace(/\/+$/, "");
    const upstreamDisconnects = async () =>
      modelUrl ? (await (await fetch(`${modelUrl}/_disconnects`)).json()).length : 0;
    const waitForUpstreamClose = async (before, startedAt) => {
      while (modelUrl && Date.now() - startedAt < 10000) {
        if ((await upstreamDisconnects()) > before) return Date.now() - startedAt;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return null;
    };
    const cancelAtFirstText = (slot) => async (event) => {
      if (event.type === "RUN_STARTED") slot.threadId = event.threadId;
      if (event.type !== "TEXT_MESSAGE_CONTENT" || slot.cancelledAt) return;
      const before = await upstreamDisconnects();
      slot.cancelledAt = Date.now();
      await client.cancelRun(slot.threadId);
      slot.cancelRunMs = Date.now() - slot.cancelledAt;
      slot.upstreamClosedMs = await waitForUpstreamClose(before, slot.cancelledAt);
    };
    const first = {};
    result.newThread = { ...(await ctx.runAndCollect(client, "count slowly", {}, cancelAtFirstText(first))), ...first };
    result.threadId = result.newThread.threadId;
    if (!result.threadId) throw new Error("the cancelled run produced no threadId");
    result.afterNewThread = await ctx.runAndCollect(client, "after the cancel", { threadId: result.threadId });
    const second = {};
    result.existingThread = {
      ...(await ctx.runAndCollect(client, "count again", { threadId: result.threadId }, cancelAtFirstText(second))),
      ...second,
    };
    result.afterExistingThread = await ctx.runAndCollect(client, "after the second cancel", { threadId: result.threadId });
  },

  /**
   * `listSuggestions()` / `generateSuggestions()` on the last assistant message: the beta
   * paths, whose answer the client hands back as it is (apps `.map` over it).
   */
  async suggestions(ctx, result) {
    const client = ctx.newClient();
    result.run = await ctx.runAndCollect(client, "hello");
    const threadId = result.run.threadId;
    const messageId = result.run.messages.at(-1)?.id;
    const before = await client.listSuggestions(messageId, threadId);
    const generated = await client.generateSuggestions(messageId, threadId, { maxSuggestions: 2 });
    const after = await client.listSuggestions(messageId, threadId);
    const view = (list) => ({ isArray: Array.isArray(list), titles: Array.isArray(list) ? list.map((s) => s.title) : list });
    result.before = view(before);
    result.generated = view(generated);
    result.after = view(after);
  },

  /**
   * A long thread (issue 25): LONG_THREAD_MESSAGES long messages on one thread, past the
   * model's window; each run must finish and answer the message just sent (the scripted
   * model echoes the newest user message it was given).
   */
  async long_thread(ctx, result) {
    const client = ctx.newClient();
    const count = Number(process.env.LONG_THREAD_MESSAGES ?? 30);
    const words = ["river", "lamp", "orange", "quiet", "seventeen", "paper", "window", "garden"];
    result.runs = [];
    let threadId;
    for (let n = 0; n < count; n++) {
      let text = `message ${n}:`;
      for (let i = 0; i < 300; i++) text += " " + words[(n * 7 + i * 13 + (i >> 3)) % words.length];
      const run = await ctx.runAndCollect(client, text, threadId ? { threadId } : {});
      threadId ??= run.threadId;
      const last = run.messages[run.messages.length - 1];
      const answer = last ? last.content.filter((b) => b.type === "text").map((b) => b.text).join("") : "";
      result.runs.push({ rejected: run.rejected, error: run.error, status: run.status,
                         answered: answer === `You said: ${text}`, answer: answer.slice(0, 40) });
      if (run.rejected || run.error) break;
    }
    result.threadId = threadId;
  },

  /** New thread, one text run, then a follow-up on the same thread (previousRunId). */
  /**
   * A process at its cap (GATEWAY_MAX_ACTIVE_RUNS=1): a second user's run is refused with 503
   * OVERLOADED before any event; what the app gets is the rejection, and the same client's next
   * run, once the first has ended, answers.
   */
  async overloaded(ctx, result) {
    const first = ctx.newClient();
    const second = ctx.newClient({ userKey: "user-2" });
    const slot = {};
    result.held = await ctx.runAndCollect(first, "Tell me a long story", {}, async (event) => {
      if (event.type === "RUN_STARTED") slot.threadId = event.threadId;
      if (event.type !== "TEXT_MESSAGE_CONTENT" || slot.refused) return;
      slot.refused = await ctx.runAndCollect(second, "hello");
      await first.cancelRun(slot.threadId);
    });
    result.refused = slot.refused;
    result.after = await ctx.runAndCollect(second, "hello again");
  },

  async basic(ctx, result) {
    const client = ctx.newClient();
    result.firstRun = await ctx.runAndCollect(client, "hello");
    result.threadId = result.firstRun.threadId;
    result.runIds = [...result.firstRun.runIds];
    if (!result.threadId) throw new Error("first run produced no threadId");
    result.secondRun = await ctx.runAndCollect(client, "and again", { threadId: result.threadId });
    result.runIds.push(...result.secondRun.runIds);
  },
};

function emit(obj, code = 0) {
  process.stdout.write(JSON.stringify(obj) + "\n", () => process.exit(code));
}

async function main() {
  const name = process.argv[2];
  const gatewayUrl = process.env.GATEWAY_URL;
  if (!name || !SCENARIOS[name] || !gatewayUrl) {
    console.error(`usage: GATEWAY_URL=<url> node run_scenario.mjs <${Object.keys(SCENARIOS).join("|")}>`);
    process.exit(2);
  }
  const result = { scenario: name };
  const timeoutMs = Number(process.env.SCENARIO_TIMEOUT_MS ?? 50000);
  const timer = setTimeout(() => emit({ ...result, inProgress, crash: `scenario timed out after ${timeoutMs} ms` }), timeoutMs);
  try {
    await SCENARIOS[name](makeContext(gatewayUrl.replace(/\/+$/, "")), result);
    clearTimeout(timer);
    emit(result);
  } catch (err) {
    clearTimeout(timer);
    log(err?.stack ?? err);
    emit({ ...result, crash: err?.message ?? String(err) });
  }
}

main().catch((err) => {
  console.error(err?.stack ?? err);
  process.exit(2);
});
