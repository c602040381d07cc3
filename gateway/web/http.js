// The playground's calls to the gateway: the typed API key (x-api-key) and userKey go on every
// request, exactly as any client sends them; a refusal becomes an Error whose message is the
// problem's code and detail. Shared by playground.js and the modules it uses.

const $ = (id) => document.getElementById(id);

/** The page's key as a header (none typed: none sent, for development mode), plus `extra`. */
export function headers(extra = {}) {
  const key = $("api-key").value.trim();
  return { ...(key ? { "x-api-key": key } : {}), ...extra };
}

/** `path` with the page's userKey as the query parameter the gateway reads. */
export function withUser(path) {
  const user = $("user-key").value.trim();
  if (!user) return path;
  return `${path}${path.includes("?") ? "&" : "?"}userKey=${encodeURIComponent(user)}`;
}

/** A JSON call; resolves to {status, data, response}, throws the problem on a refusal. */
export async function api(method, path, body) {
  const init = { method, headers: headers(body ? { "content-type": "application/json",
                                                   accept: "application/json" }
                                              : { accept: "application/json" }) };
  if (body) init.body = JSON.stringify(body);
  const response = await fetch(withUser(path), init);
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok && response.status !== 304) throw problem(response.status, data);
  return { status: response.status, data, response };
}

export function problem(status, data) {
  const error = new Error(data?.code ? `${status} ${data.code}: ${data.detail || data.message}`
                                     : `HTTP ${status}`);
  error.data = data;
  return error;
}
