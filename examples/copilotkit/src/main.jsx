import "@copilotkit/react-core/v2/styles.css";
import { CopilotKit } from "@copilotkit/react-core/v2";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import App from "./App.jsx";
import "./styles.css";

// The page talks to the CopilotKit runtime (server.mjs), never to the gateway itself: the
// runtime holds the gateway's URL and API key. Vite inlines VITE_* variables at build time.
const runtimeUrl = import.meta.env.VITE_RUNTIME_URL || "/api/copilotkit";

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <CopilotKit runtimeUrl={runtimeUrl} enableInspector={false}>
      <App />
    </CopilotKit>
  </StrictMode>,
);
