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

/** The localStorage key under which the current thread id survives a page reload. */
export const threadStorageKey = `gateway-example:thread:${userKey}`;
