// An AgentRunner for @copilotkit/runtime that keeps nothing: the gateway is the record.
//
// CopilotKit's runtime hands every agent call to its runner. The default one,
// InMemoryAgentRunner, keeps each thread's events in the runtime's memory, so a restarted
// runtime (or a second instance) has forgotten every conversation and a reloaded page shows an
// empty chat. This runner asks the gateway instead, which keeps every thread:
//
//   run        POST /v1/agui/agents/{agent}/run      the page's RunAgentInput, as it is
//   connect    POST /v1/agui/agents/{agent}/connect  the thread's messages and state, then its
//                                                    active run live (a reloaded page)
//   isRunning  GET  /v1/agui/threads/{threadId}      {running, runId}
//   stop       DELETE /v1/agui/threads/{threadId}/runs/{runId}   a real cancel: the model stops
//
// Both run and connect add `forwardedProps.interrupts: true`: CopilotKit's @ag-ui/client 0.0.x
// declares no AG-UI version, and this tells the gateway that the page reads AG-UI 1.0's
// `interrupt` outcome anyway (CopilotKit's `useInterrupt`), so a server tool that needs approval
// reaches the page as an interrupt, answered with `resume` (see the gateway's
// docs/human-in-the-loop.md).
//
// Copy this file into your own runtime; it needs only @ag-ui/client and @copilotkit/runtime.
// Usage:
//   new CopilotRuntime({ agents: { default: gatewayAgent },
//                        runner: new GatewayRunner({ url, apiKey, userKey }) })

import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { AgentRunner } from "@copilotkit/runtime/v2";

/** The opt-in to AG-UI 1.0 interrupts for a client that declares no version. */
const INTERRUPTS = { interrupts: true };

export class GatewayRunner extends AgentRunner {
  /**
   * @param {{url: string, apiKey: string, userKey?: string, agent?: string}} options
   *   url: the gateway's base URL; apiKey: sent as x-api-key; userKey: the end user the
   *   gateway files threads under; agent: the gateway agent's name (default "default").
   */
  constructor({ url, apiKey, userKey, agent = "default" }) {
    super();
    this.base = url.replace(/\/$/, "");
    this.agent = agent;
    this.headers = { "x-api-key": apiKey };
    this.query = userKey ? `?userKey=${encodeURIComponent(userKey)}` : "";
  }

  /** An HttpAgent for one of the gateway's AG-UI endpoints (`run` or `connect`). */
  endpoint(name) {
    return new HttpAgent({
      url: `${this.base}/v1/agui/agents/${encodeURIComponent(this.agent)}/${name}${this.query}`,
      headers: this.headers,
    });
  }

  run({ input }) {
    return this.endpoint("run").run(
      { ...input, forwardedProps: { ...input.forwardedProps, ...INTERRUPTS } });
  }

  connect({ threadId }) {
    return this.endpoint("connect").run({
      threadId, runId: randomUUID(), messages: [], tools: [], context: [], state: {},
      forwardedProps: INTERRUPTS,
    });
  }

  async status(threadId) {
    const response = await fetch(
      `${this.base}/v1/agui/threads/${encodeURIComponent(threadId)}${this.query}`,
      { headers: this.headers });
    if (!response.ok) throw new Error(`gateway: thread status ${response.status}`);
    return response.json();
  }

  async isRunning({ threadId }) {
    return (await this.status(threadId)).running;
  }

  async stop({ threadId, runId }) {
    const active = await this.status(threadId);
    if (!active.running || (runId !== undefined && active.runId !== runId)) return false;
    const response = await fetch(
      `${this.base}/v1/agui/threads/${encodeURIComponent(threadId)}/runs/` +
        `${encodeURIComponent(active.runId)}${this.query}`,
      { method: "DELETE", headers: this.headers });
    return response.ok;
  }
}
