import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { TamboProvider } from "@tambo-ai/react";
import { apiKey, gatewayUrl, userKey } from "./config.js";
import { components } from "./components/index.js";
import { tools } from "./tools.js";
import { App } from "./App.jsx";
import "./styles.css";

// TamboProvider is the whole integration: point `tamboUrl` at the gateway, pass any API key
// (or one listed in the gateway's GATEWAY_API_KEYS), a userKey, and what the model may use.
createRoot(document.getElementById("root")).render(
  <StrictMode>
    <TamboProvider
      tamboUrl={gatewayUrl}
      apiKey={apiKey}
      userKey={userKey}
      components={components}
      tools={tools}
    >
      <App />
    </TamboProvider>
  </StrictMode>,
);
