// An AgentRunner for @copilotkit/runtime that keeps nothing: the gateway is the record, for every
// user of the runtime, each on their own threads.
//
// CopilotKit's runtime hands every agent call to its runner. The default one,
// InMemoryAgentRunner, keeps each thread's events in the runtime's memory, so a restarted
// runtime (or a second instance) has forgotten every conversation and a reloaded page shows an
// empty chat. This runner asks the gateway instead, which keeps every thread:
//
//   run          POST /v1/agui/agents/{agent}/run      the page's RunAgentInput
//   connect      POST /v1/agui/agents/{agent}/connect  the thread's messages and state, then its
//                                                      active run live (a reloaded page)
//   isRunning    GET  /v1/agui/threads/{threadId}      {running, runId}
//   stop         DELETE /v1/agui/threads/{threadId}/runs/{runId}   a real cancel: the model stops
//   listThreads  GET  /v1/agui/threads                 the user's threads, by the page's names
//                                                      (CopilotKit's `useThreads`)
//   getThreadMessages / getThreadEvents / getThreadState
//                connect's snapshot of one thread      (the runtime's /threads/{id}/...)
//
// Whose threads. Every call carries the end user's key (`?userKey=`), taken from the request
// the runtime is answering: `userOf(request)`, a function you give, reads it from the Fetch
// `Request` (your session cookie, a verified token...). The gateway files a new thread under it
// and answers a thread of another user as if it did not exist (404 for a run, an empty thread
// for connect), so one runtime serves many users, each seeing only their own threads.
//
// How the request reaches the runner. The runtime hands `run` and `connect` their input but not
// the request; `stop` and `isRunning` get only a thread id, `listThreads()` nothing at all, and
// `listThreads()` and the `getThread*` calls are synchronous (the runtime's own runner answers
// them from memory). So the runner carries each request's context with Node's
// `AsyncLocalStorage`: `runner.listener(nodeListener)` opens a context per HTTP request, and the
// runtime's hooks (`hooks: runner.hooks`, which it awaits before its handler) fill it: `onRequest`
// resolves the user (a request without one is refused, 401), and `onBeforeHandler` prefetches
// what a synchronous call will read (the user's page of threads for `GET /threads`, connect's
// snapshot for `GET /threads/{id}/messages|events|state`); `onResponse` adds the gateway's
// `nextCursor` to the list (the runtime's local list has no paging of its own), so
// `fetchMoreThreads` reads the next page. Every call made outside such a request throws rather
// than act for no one.
//
// The thread list is the runtime's local-thread seam (`ɵsupportsLocalThreadEndpoints`, which
// its InMemoryAgentRunner implements too): `/info` then reports `threadEndpoints.list: true`.
// The gateway has no archive and CopilotKit's rename/archive/delete need CopilotKit
// Intelligence, so the list is read-only; `clearThreads()` (the runtime's `POST
// /threads/clear`, a reset for its in-memory store) deletes nothing here: the gateway's threads
// are the record.
//
// Both run and connect add `forwardedProps.interrupts: true`: CopilotKit's @ag-ui/client 0.0.x
// declares no AG-UI version, and this tells the gateway that the page reads AG-UI 1.0's
// `interrupt` outcome anyway (CopilotKit's `useInterrupt`), so a server tool that needs approval
// reaches the page as an interrupt, answered with `resume` (see the gateway's
// docs/human-in-the-loop.md).
//
// `runner.agent()` is the runtime's agent for the gateway: the runtime lists it in `/info` with
// the gateway's capabilities (`GET /v1/agui/agents/{agent}/capabilities`: interrupts, shared
// state, approvals with edits...), which CopilotKit's `useCapabilities` reads; it runs through
// this runner (so on the request's user) when the runtime runs it directly (suggestions).
//
// Copy this file into your own runtime; it needs only @ag-ui/client and @copilotkit/runtime.
// Usage (server.mjs):
//   const runner = new GatewayRunner({ url, apiKey, userOf: (request) => yourSession(request) });
//   const runtime = new CopilotRuntime({ agents: { default: runner.agent() }, runner });
//   const listener = createCopilotNodeListener({ runtime, basePath, hooks: runner.hooks });
//   createServer(runner.listener(listener)).listen(4000);

import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { AgentRunner } from "@copilotkit/runtime/v2";

/** The opt-in to AG-UI 1.0 interrupts for a client that declares no version. */
const INTERRUPTS = { interrupts: true };
/** The gateway's page of threads: CopilotKit's `limit` if it asks, at most the gateway's 100. */
const PAGE = 20;
const MAX_PAGE = 100;

export class GatewayRunner extends AgentRunner {
  /**
   * @param {{url: string, apiKey: string,
   *          userOf: (request: Request) => string | undefined | Promise<string | undefined>,
   *          agent?: string}} options
   *   url: the gateway's base URL; apiKey: sent as x-api-key; userOf: the end user a request of
   *   the runtime is made for (the gateway's userKey), or nothing to refuse it (401); agent: the
   *   gateway agent's name (default "default"), which is also the runtime's name for it
   *   (`agents: { [agent]: runner.agent() }`): the runtime lists a thread under the agent id
   *   the gateway gives it.
   */
  constructor({ url, apiKey, userOf, agent = "default" }) {
    super();
    if (typeof userOf !== "function") throw new Error("GatewayRunner needs userOf(request)");
    this.ɵsupportsLocalThreadEndpoints = true;
    this.base = url.replace(/\/$/, "");
    this.agentName = agent;
    this.headers = { "x-api-key": apiKey };
    this.userOf = userOf;
    this.requests = new AsyncLocalStorage();
    this.hooks = {
      onRequest: ({ request }) => this.identify(request),
      onBeforeHandler: ({ request, route }) => this.prefetch(request, route),
      onResponse: ({ response, route }) => this.paged(response, route),
    };
  }

  /** The runtime's Node listener, each request in a context of its own (see the header). */
  listener(listener) {
    return (req, res) => this.requests.run({}, () => listener(req, res));
  }

  /** The runtime's agent for the gateway (see the header). */
  agent() {
    return new GatewayAgent(this);
  }

  // -- the request's context ----------------------------------------------------------------

  /** The context `listener` opened for the request being answered. */
  context() {
    const context = this.requests.getStore();
    if (!context) {
      throw new Error("GatewayRunner: no request context; serve the runtime through " +
                      "runner.listener(...) with hooks: runner.hooks");
    }
    return context;
  }

  /** The request's user, as `identify` resolved it. */
  user() {
    const { userKey } = this.context();
    if (!userKey) throw new Error("GatewayRunner: the request has no user");
    return userKey;
  }

  async identify(request) {
    const userKey = await this.userOf(request);
    if (!userKey) {
      throw Response.json({ error: "unauthorized", message: "Sign in first" }, { status: 401 });
    }
    this.context().userKey = userKey;
  }

  async prefetch(request, route) {
    const context = this.context();
    if (route.method === "threads/list") {
      const asked = new URL(request.url).searchParams;
      context.threads = await this.threadPage(asked);
    } else if (["threads/messages", "threads/events", "threads/state"].includes(route.method)) {
      context.thread = { id: route.threadId, events: await this.snapshot(route.threadId) };
    }
  }

  async paged(response, route) {
    const page = this.requests.getStore()?.threads;
    if (route?.method !== "threads/list" || !response.ok || !page) return response;
    const body = await response.json();
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    return Response.json({ ...body, nextCursor: page.nextCursor ?? null },
                         { status: response.status, headers });
  }

  // -- the gateway ----------------------------------------------------------------------------

  /** A gateway URL on the request's user. */
  url(path, params = {}) {
    const query = new URLSearchParams({ ...params, userKey: this.user() });
    return `${this.base}${path}?${query}`;
  }

  /** An HttpAgent for one of the gateway's AG-UI endpoints (`run` or `connect`). */
  endpoint(name) {
    return new HttpAgent({
      url: this.url(`/v1/agui/agents/${encodeURIComponent(this.agentName)}/${name}`),
      headers: this.headers,
    });
  }

  async gateway(path, params, init = {}) {
    const response = await fetch(this.url(path, params), { ...init, headers: this.headers });
    if (!response.ok) throw new Error(`gateway: ${path} answered ${response.status}`);
    return response;
  }

  /** The user's page of threads the runtime's `GET /threads` asks for (`asked`). */
  async threadPage(asked) {
    const params = { agent: this.agentName, limit: String(PAGE) };
    const limit = Number(asked.get("limit"));
    if (Number.isInteger(limit) && limit > 0) params.limit = String(Math.min(limit, MAX_PAGE));
    if (asked.get("cursor")) params.cursor = asked.get("cursor");
    return (await this.gateway("/v1/agui/threads", params)).json();
  }

  /** connect's snapshot of a thread (RUN_STARTED ... RUN_FINISHED), without its live run. */
  snapshot(threadId) {
    return new Promise((resolve, reject) => {
      const events = [];
      let finished = false;
      const subscription = this.connect({ threadId }).subscribe({
        next: (event) => {
          if (finished) return;
          events.push(event);
          if (event.type === "RUN_FINISHED") {
            finished = true;
            resolve(events);
            subscription?.unsubscribe();
          }
        },
        error: reject,
        complete: () => resolve(events),
      });
      if (finished) subscription.unsubscribe();
    });
  }

  async status(threadId) {
    return (await this.gateway(`/v1/agui/threads/${encodeURIComponent(threadId)}`)).json();
  }

  // -- AgentRunner ------------------------------------------------------------------------------

  run({ input }) {
    // The user is the request's: a `userKey` the page put in forwardedProps is not trusted.
    const { userKey: _ignored, ...forwarded } = input.forwardedProps ?? {};
    return this.endpoint("run").run({ ...input, forwardedProps: { ...forwarded, ...INTERRUPTS } });
  }

  connect({ threadId }) {
    return this.endpoint("connect").run({
      threadId, runId: randomUUID(), messages: [], tools: [], context: [], state: {},
      forwardedProps: INTERRUPTS,
    });
  }

  async isRunning({ threadId }) {
    return (await this.status(threadId)).running;
  }

  async stop({ threadId, runId }) {
    const active = await this.status(threadId);
    if (!active.running || (runId !== undefined && active.runId !== runId)) return false;
    const path = `/v1/agui/threads/${encodeURIComponent(threadId)}/runs/` +
      encodeURIComponent(active.runId);
    const response = await fetch(this.url(path), { method: "DELETE", headers: this.headers });
    return response.ok;
  }

  // -- the runtime's thread endpoints (synchronous: read what `prefetch` fetched) ---------------

  listThreads() {
    const { threads } = this.context();
    const userKey = this.user();
    return (threads?.threads ?? []).map((thread) => ({
      id: thread.threadId,
      name: thread.name ?? null,
      agentId: thread.agent ?? this.agentName,
      organizationId: "",
      createdById: userKey,
      archived: false,
      createdAt: thread.createdAt,
      updatedAt: thread.updatedAt,
    }));
  }

  getThreadEvents(threadId) {
    const { thread } = this.context();
    return thread?.id === threadId ? thread.events : [];
  }

  getThreadMessages(threadId) {
    const snapshot = this.getThreadEvents(threadId).find((e) => e.type === "MESSAGES_SNAPSHOT");
    return snapshot?.messages ?? [];
  }

  getThreadState(threadId) {
    const snapshot = this.getThreadEvents(threadId).find((e) => e.type === "STATE_SNAPSHOT");
    return snapshot?.snapshot ?? null;
  }

  clearThreads() {
    // Nothing: the gateway's threads are the record (see the header).
  }
}

/** The runtime's agent for the gateway: `/info` capabilities from the gateway, runs through
 * the runner (on the request's user). */
class GatewayAgent extends HttpAgent {
  constructor(runner) {
    super({ url: `${runner.base}/v1/agui/agents/${encodeURIComponent(runner.agentName)}/run`,
            headers: runner.headers });
    this.runner = runner;
  }

  clone() {
    const copy = super.clone(); // HttpAgent's clone copies its own fields only
    copy.runner = this.runner;
    return copy;
  }

  run(input) {
    return this.runner.run({ input });
  }

  async getCapabilities() {
    const { base, agentName, headers } = this.runner;
    const response = await fetch(
      `${base}/v1/agui/agents/${encodeURIComponent(agentName)}/capabilities`, { headers });
    if (!response.ok) throw new Error(`gateway: capabilities answered ${response.status}`);
    return response.json();
  }
}
