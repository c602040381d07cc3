import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { TamboProvider } from "@tambo-ai/react";
import { apiKey, gatewayUrl, idTokenUrl, userKey } from "./config.js";
import { components } from "./components/index.js";
import { tools } from "./tools.js";
import { App } from "./App.jsx";
import "./styles.css";

/**
 * TamboProvider is the whole integration: point `tamboUrl` at the gateway, pass any API key (or
 * one listed in the gateway's GATEWAY_API_KEYS), who the user is, and what the model may use.
 * The user is either a `userKey` the app chooses, or, for signed-in users, `userToken`: the
 * identity provider's token, which the gateway verifies (see config.js).
 */
function Root() {
  const [userToken, setUserToken] = useState(null);
  const [signInError, setSignInError] = useState(null);

  useEffect(() => {
    if (!idTokenUrl) return;
    fetch(idTokenUrl)
      .then((response) => (response.ok ? response.json() : Promise.reject(response.statusText)))
      .then((body) => setUserToken(body.id_token))
      .catch((error) => setSignInError(String(error)));
  }, []);

  if (idTokenUrl && !userToken) {
    return <p className="empty">{signInError ? `Sign-in failed: ${signInError}` : "Signing in…"}</p>;
  }
  const identity = idTokenUrl ? { userToken } : { userKey };
  return (
    <TamboProvider tamboUrl={gatewayUrl} apiKey={apiKey} {...identity} components={components}
                   tools={tools}>
      <App />
    </TamboProvider>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <Root />
  </StrictMode>,
);
