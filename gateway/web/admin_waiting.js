// The console's Waiting tab: the project's threads whose run paused for a person, each call
// with what it waits for (drawn as the playground draws them: `pending.js`). A pause of one call
// is answered by its button; a pause of several by "Send answers", once each call has one. The
// answers start the thread's next run, which goes on by itself.

import { $, api, when } from "/web/admin_api.js";
import { el } from "/web/messages.js";
import { callRow } from "/web/pending.js";

let cursor = null;

function card(thread) {
  const chosen = new Map();
  const status = el("div", { class: "answered", role: "status" });
  const sendAll = el("button", { type: "button", class: "send-answers", disabled: "" }, "Send answers");
  const node = el("article", { class: "waiting-thread", "data-id": thread.id },
                  el("div", { class: "bar" }, el("h3", {}, thread.name || thread.id)),
                  el("small", {}, `${thread.userKey ?? "(no user)"} · ${thread.agent} · paused ${when(thread.updatedAt)}`));
  const send = async () => {
    const answers = thread.calls.map((call) => ({ toolCallId: call.toolCallId,
                                                  result: chosen.get(call.toolCallId) }));
    const started = await api(`/v1/admin/threads/${encodeURIComponent(thread.id)}/answers`,
                              { method: "POST", body: { answers } });
    node.classList.add("done");
    status.textContent = `Answered: run ${started.runId} started.`;
    const left = $("waiting").querySelectorAll(".waiting-thread:not(.done)").length;
    $("waiting-count").textContent = left ? `(${left})` : "";
    for (const control of node.querySelectorAll("button, input, textarea")) control.disabled = true;
  };
  const rows = thread.calls.map((call) => {
    const row = callRow(call, (make) => {
      try {
        chosen.set(call.toolCallId, make());
      } catch (error) {
        window.showError(error);
        return;
      }
      row.classList.add("chosen");
      row.dataset.choice = JSON.stringify(chosen.get(call.toolCallId));
      if (thread.calls.length === 1) send().catch(window.showError);
      else sendAll.disabled = chosen.size < thread.calls.length;
    }, { clientToolButton: true });
    return row;
  });
  sendAll.addEventListener("click", () => send().catch(window.showError));
  node.append(...rows, ...(thread.calls.length > 1 ? [sendAll] : []), status);
  return node;
}

export async function loadWaiting(more = false) {
  const body = await api("/v1/admin/waiting", { params: { cursor: more ? cursor : null } });
  if (!more) $("waiting").replaceChildren();
  $("waiting").append(...body.threads.map(card));
  cursor = body.nextCursor || null;
  const shown = $("waiting").children.length;
  $("waiting-more").hidden = !body.hasMore;
  $("waiting-none").hidden = shown > 0;
  $("waiting-count").textContent = shown ? `(${shown}${body.hasMore ? "+" : ""})` : "";
}

export function wireWaiting() {
  $("waiting-more").addEventListener("click", () => loadWaiting(true).catch(window.showError));
}
