// Thread names: a thread is named after its first answer (POST /v1/threads/{id}/generate-name,
// as the Tambo React SDK does; the gateway keeps a name once set), and renamed inline with
// PATCH /v1/threads/{id}. The list and the title show names; the id stays a tooltip.

import { api } from "/web/http.js";

const $ = (id) => document.getElementById(id);

/** A thread's label: its name, else a placeholder (never its raw id). */
export function threadLabel(thread) {
  return thread.name || "Untitled thread";
}

/** Ask the gateway to name `thread` once it has an answer and no name; the named thread, or
 * null when nothing was asked. A failure (the model is away) leaves the thread unnamed. */
export async function nameAfterFirstAnswer(thread) {
  if (!thread || thread.name || !thread.messages?.some((m) => m.role === "assistant")) {
    return null;
  }
  const { data } = await api("POST", `/v1/threads/${thread.id}/generate-name`);
  return data;
}

/** The title's rename form: `current()` is the selected thread, `renamed(thread)` is called
 * with the thread as the gateway stored it; `guard(action)` shows what went wrong. */
export function initRename(current, renamed, guard) {
  const form = $("rename");
  const input = $("thread-name");
  $("rename-thread").addEventListener("click", () => {
    const thread = current();
    if (!thread) return;
    input.value = thread.name || "";
    form.hidden = false;
    $("thread-title").hidden = true;
    input.focus();
  });
  const close = () => {
    form.hidden = true;
    $("thread-title").hidden = false;
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") close();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const thread = current();
    close();
    if (!thread) return;
    guard(async () => {
      const { data } = await api("PATCH", `/v1/threads/${thread.id}`,
                                 { name: input.value.trim() || null });
      await renamed(data);
    });
  });
}
