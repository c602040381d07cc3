// "Copy as curl": the run request the composer would send, as a `curl -N` command a person can
// paste into a shell (or a bug report). The API key is written as `$GATEWAY_API_KEY`, never the
// key typed into the page, so the command can be shared; the shell fills it in when it runs.

import { withUser } from "/web/http.js";

const $ = (id) => document.getElementById(id);

/** `text` as one POSIX shell word: single quotes, each ' written as '\'' . */
export function shellQuote(text) {
  return `'${text.replace(/'/g, "'\\''")}'`;
}

/** The curl command for a streamed run request: `path` on this gateway, with `body`. */
export function curlCommand(path, body) {
  const lines = [`curl -N ${shellQuote(location.origin + withUser(path))}`];
  if ($("api-key").value.trim()) lines.push(`-H "x-api-key: $GATEWAY_API_KEY"`);
  lines.push("-H 'content-type: application/json'", "-H 'accept: text/event-stream'",
             `--data-raw ${shellQuote(JSON.stringify(body))}`);
  return lines.join(" \\\n  ");
}

/** Put the command on the clipboard and show it (selectable where the clipboard is refused:
 * browsers allow it on https and loopback origins only). */
export async function copyCurl({ path, body }) {
  const command = curlCommand(path, body);
  let copied = true;
  try {
    await navigator.clipboard.writeText(command);
  } catch {
    copied = false;
  }
  const keyed = !!$("api-key").value.trim();
  $("curl").textContent = command;
  $("curl-note").textContent = (copied ? "Copied to the clipboard." :
    "The browser refused the clipboard: select the command and copy it.")
    + (keyed ? " Set GATEWAY_API_KEY in your shell first (the key you typed here)."
             : " No key in it: development mode takes none.");
  $("curl-box").hidden = false;
}
