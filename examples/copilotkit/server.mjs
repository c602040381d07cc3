// The CopilotKit runtime for this example: a small Node server whose one agent is the gateway.
//
// CopilotKit's browser code never talks to an agent directly: it talks to a CopilotRuntime,
// and the runtime runs the agents it was given. The gateway speaks AG-UI 1.0 natively
// (`POST /v1/agui/agents/default/run`), so the agent is a plain `HttpAgent` from @ag-ui/client
// pointed at that endpoint. The runtime clones it for every request and hands it the page's
// thread id, messages, state and frontend tools; the gateway keeps the thread and runs the model.
//
// The API key stays here, on the server: the browser only ever sees this runtime.
//
// Settings (environment): GATEWAY_URL (default http://127.0.0.1:8000), GATEWAY_API_KEY
// (default dev-key), GATEWAY_USER_KEY (the end user the gateway files threads under; default
// demo-user), HOST and PORT of this server (default 127.0.0.1:4000).

import { createServer } from "node:http";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { GatewayRunner } from "./gateway-runner.mjs";

const gatewayUrl = (process.env.GATEWAY_URL || "http://127.0.0.1:8000").replace(/\/$/, "");
const userKey = process.env.GATEWAY_USER_KEY || "demo-user";
const host = process.env.HOST || "127.0.0.1";
const port = Number(process.env.PORT || 4000);

// One user here; a real app would derive the user key from its own session, for instance with
// `agents: ({ request }) => ({ default: agentFor(userOf(request)) })`.
const apiKey = process.env.GATEWAY_API_KEY || "dev-key";
const gateway = new HttpAgent({
  url: `${gatewayUrl}/v1/agui/agents/default/run?userKey=${encodeURIComponent(userKey)}`,
  headers: { "x-api-key": apiKey },
});
const runner = new GatewayRunner({ url: gatewayUrl, apiKey, userKey });

const runtime = new CopilotRuntime({ agents: { default: gateway }, runner });

const server = createServer(
  createCopilotNodeListener({ runtime, basePath: "/api/copilotkit", cors: true }),
);
server.listen(port, host, () => {
  // The test waits for this line: the port is bound.
  console.log(`CopilotKit runtime on http://${host}:${server.address().port}/api/copilotkit ` +
              `-> gateway ${gatewayUrl}`);
});
