// The CopilotKit runtime for this example: a small Node server whose one agent is the gateway,
// serving every user of the page, each on their own threads.
//
// CopilotKit's browser code never talks to an agent directly: it talks to a CopilotRuntime,
// and the runtime runs the agents it was given. The gateway speaks AG-UI 1.0 natively
// (`POST /v1/agui/agents/default/run`); the runtime's runner, GatewayRunner
// (gateway-runner.mjs), sends each call there on the user of the request it answers, and lists
// that user's threads for CopilotKit's `useThreads`.
//
// The API key stays here, on the server: the browser only ever sees this runtime.
//
// Settings (environment): GATEWAY_URL (default http://127.0.0.1:8000), GATEWAY_API_KEY
// (default dev-key), GATEWAY_USER_KEY (the user of a request that names none; default
// demo-user), HOST and PORT of this server (default 127.0.0.1:4000).

import { createServer } from "node:http";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { GatewayRunner } from "./gateway-runner.mjs";

const gatewayUrl = (process.env.GATEWAY_URL || "http://127.0.0.1:8000").replace(/\/$/, "");
const apiKey = process.env.GATEWAY_API_KEY || "dev-key";
const defaultUser = process.env.GATEWAY_USER_KEY || "demo-user";
const host = process.env.HOST || "127.0.0.1";
const port = Number(process.env.PORT || 4000);

/**
 * The end user a request of the runtime is made for: the gateway files their threads under it
 * and shows them only theirs.
 *
 * REPLACE THIS WITH YOUR SESSION. Here the page says who it is, in an `x-demo-user` header
 * (`<CopilotKit headers>` in src/main.jsx), and a request without one is the default user: fine
 * for a demo on your own machine, and no protection at all, since anyone can send any header.
 * A real app verifies a credential the browser cannot forge and returns nothing for a request
 * without one (the runner then answers 401): for instance its signed session cookie
 * (`request.headers.get("cookie")`, with `credentials="include"` on `<CopilotKit>`), or a
 * bearer token it checks (`request.headers.get("authorization")`, sent with `headers`).
 */
function userOf(request) {
  return request.headers.get("x-demo-user") || defaultUser;
}

const runner = new GatewayRunner({ url: gatewayUrl, apiKey, userOf });
const runtime = new CopilotRuntime({ agents: { default: runner.agent() }, runner });

const server = createServer(runner.listener(createCopilotNodeListener({
  runtime, basePath: "/api/copilotkit", cors: true, hooks: runner.hooks,
})));
server.listen(port, host, () => {
  // The test waits for this line: the port is bound.
  console.log(`CopilotKit runtime on http://${host}:${server.address().port}/api/copilotkit ` +
              `-> gateway ${gatewayUrl}`);
});
