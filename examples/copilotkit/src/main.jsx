import "@copilotkit/react-core/v2/styles.css";
import { CopilotKit } from "@copilotkit/react-core/v2";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import App from "./App.jsx";
import "./styles.css";

// The page talks to the CopilotKit runtime (server.mjs), never to the gateway itself: the
// runtime holds the gateway's URL and API key. Vite inlines VITE_* variables at build time.
const runtimeUrl = import.meta.env.VITE_RUNTIME_URL || "/api/copilotkit";

// Who is using the page: `?user=` in its address (the runtime's default user without one). A
// stand-in for your sign-in: the page tells the runtime in an `x-demo-user` header, which
// CopilotKit sends with every call (runs, connects, the thread list). The runtime trusts it
// only because this is a demo (server.mjs, `userOf`); a real app sends its session cookie or
// token instead, which the runtime verifies.
const user = new URLSearchParams(window.location.search).get("user") || null;
const headers = user ? { "x-demo-user": user } : {};

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <CopilotKit runtimeUrl={runtimeUrl} headers={headers} enableInspector={false}>
      <App user={user} />
    </CopilotKit>
  </StrictMode>,
);
