/**
 * Where the app finds the gateway, and who it talks to it as.
 *
 * Vite inlines `import.meta.env.VITE_*` at build time, so these are set when you run
 * `npm run dev` or `npm run build` (for example `VITE_GATEWAY_URL=http://127.0.0.1:9000`).
 * The gateway accepts any API key until you set GATEWAY_API_KEYS on it; the userKey scopes the
 * threads to one end user (every request carries it).
 */
export const gatewayUrl = import.meta.env.VITE_GATEWAY_URL || "http://127.0.0.1:8000";
export const apiKey = import.meta.env.VITE_GATEWAY_API_KEY || "dev-key";
export const userKey = import.meta.env.VITE_USER_KEY || "demo-user";

/**
 * Signed-in users instead of a userKey: a URL that answers with the signed-in user's ID token
 * (JSON `{id_token}`), standing in for your identity provider's SDK (Auth0, Clerk, Google, ...).
 * With it, the app passes `userToken` to TamboProvider; the SDK exchanges it at the gateway's
 * `POST /oauth/token` and the gateway, not the browser, decides whose threads these are.
 */
export const idTokenUrl = import.meta.env.VITE_ID_TOKEN_URL || "";

/** The localStorage key under which the current thread id survives a page reload. */
export const threadStorageKey = `gateway-example:thread:${idTokenUrl ? "signed-in" : userKey}`;
