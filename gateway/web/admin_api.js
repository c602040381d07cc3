// The console's calls to the operator API (/v1/admin/...): the admin key from the tab's
// sessionStorage as the x-api-key header (never in a URL, so never in an access log), a refusal
// as an Error carrying the problem's status and code. Shared by admin.js and its tab modules.

const KEY = "gateway.adminKey";

export const $ = (id) => document.getElementById(id);

export function adminKey() { return sessionStorage.getItem(KEY) || ""; }
export function keepKey(key) { sessionStorage.setItem(KEY, key); }
export function forgetKey() { sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
  constructor(status, body) {
    super(`${body.code || status}: ${body.detail || "refused"}`);
    this.status = status;
    this.code = body.code || null;
  }
}

function query(params) {
  const entries = Object.entries(params).filter(([, v]) => v !== "" && v != null);
  return entries.length ? `?${new URLSearchParams(entries)}` : "";
}

/** A call; resolves to the response (JSON, or the text with `text: true`). */
export async function api(path, { method = "GET", params = {}, body, text = false } = {}) {
  const headers = adminKey() ? { "x-api-key": adminKey() } : {};
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path + query(params), {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!response.ok) {
    throw new ApiError(response.status, await response.json().catch(() => ({})));
  }
  return text ? response.text() : response.json();
}

export function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (className) td.className = className;
  row.append(td);
  return td;
}

/** Each cell of `table` labelled with its column's header (`data-label`): on a narrow screen
 * a row is drawn as a card of labelled lines (admin.css). */
export function labelled(table) {
  const names = [...table.tHead.rows[0].cells].map((th) => th.textContent);
  for (const row of [...table.tBodies[0].rows, ...(table.tFoot ? table.tFoot.rows : [])]) {
    [...row.cells].forEach((td, index) => { td.dataset.label = names[index] || ""; });
  }
}

export function when(iso) { return iso ? iso.replace("T", " ").slice(0, 19) : ""; }
export function ms(value) {
  return value == null ? "" : value < 1000 ? `${value} ms` : `${(value / 1000).toFixed(2)} s`;
}
export function cost(value) { return value == null ? "" : value.toFixed(6); }

/** A usage's tokens, with "≈" when some of its calls were cut off and estimated. */
export function tokens(usage) {
  if (!usage) return "";
  const mark = usage.estimatedCalls ? "≈ " : "";
  return `${mark}${usage.inputTokens} / ${usage.outputTokens}`;
}

/** A form's fields as query parameters (a datetime-local as ISO, in UTC). */
export function filters(form) {
  const params = {};
  for (const [name, value] of new FormData(form)) {
    const text = String(value).trim();
    if (!text) continue;
    params[name] = form.elements[name].type === "datetime-local" ? new Date(text).toISOString() : text;
  }
  return params;
}
