// What a paused run waits for, answered by hand, on both pages (the playground's pending form,
// the console's Waiting tab): a server tool waiting for approval (Approve, or Deny with a
// reason), a tool's question (its JSON Schema shown, an answer or Decline), a client tool call
// (its result, as JSON). The answers go back as the next run's tool results, exactly as a
// client sends them (docs/human-in-the-loop.md).

import { el, pretty } from "/web/messages.js";

const QUESTION = "input_required";

/** A pending call as both pages read it: the Tambo dialect's `{toolCallId, toolName,
 * arguments, approval?}` (the playground) or the operator API's flat shape (the console). */
export function normalized(call) {
  if (call.kind) return call;
  const request = call.approval;
  const kind = !request ? "clientTool" : request.reason === QUESTION ? "question" : "approval";
  return { toolCallId: call.toolCallId, toolName: call.toolName, arguments: call.arguments,
           kind, message: request?.message ?? null, responseSchema: request?.responseSchema ?? null,
           expiresAt: request?.expiresAt ?? null, expired: false, rule: request?.rule ?? null };
}

export const kindOf = (call) => normalized(call).kind;

function argumentsOf(call) {
  try {
    return pretty(JSON.parse(call.arguments || "{}"));
  } catch {
    return call.arguments || "";
  }
}

function approvalControls(call, choose) {
  const reason = el("input", { class: "reason", placeholder: "reason (optional, the model reads it)",
                               maxlength: "2000", "aria-label": "Reason for denying" });
  const approve = el("button", { type: "button", class: "approve" }, "Approve");
  const deny = el("button", { type: "button", class: "deny" }, "Deny");
  // Approve with edited arguments (`editedArgs`): the tool runs with these instead.
  const edited = el("textarea", { rows: "2", spellcheck: "false", class: "edited-args",
                                  "aria-label": "Arguments to approve with (JSON)" });
  edited.value = argumentsOf(call);
  const approveEdited = el("button", { type: "button", class: "approve-edited" },
                           "Approve with these arguments");
  const always = el("button", { type: "button", class: "approve-always",
                               title: "Approve, and let this tool run without asking on this thread" },
                    "Always allow here");
  approve.addEventListener("click", () => choose(() => ({ approved: true })));
  always.addEventListener("click", () => choose(() => ({ approved: true, alwaysAllow: true })));
  approveEdited.addEventListener("click", () => choose(() => {
    let editedArgs;
    try {
      editedArgs = JSON.parse(edited.value);
    } catch (error) {
      throw new Error(`The arguments are not valid JSON: ${error.message}`);
    }
    if (!editedArgs || typeof editedArgs !== "object" || Array.isArray(editedArgs)) {
      throw new Error("The arguments must be a JSON object.");
    }
    return { approved: true, editedArgs };
  }));
  deny.addEventListener("click", () => choose(() => (reason.value.trim()
    ? { approved: false, reason: reason.value.trim() } : { approved: false })));
  return [el("div", { class: "choices" }, approve, always, deny, reason),
          el("details", { class: "edit-args" }, el("summary", {}, "Edit the arguments"),
             edited, el("div", { class: "choices" }, approveEdited))];
}

function jsonControls(call, choose, withButton) {
  const question = call.kind === "question";
  const area = el("textarea", { rows: question ? "3" : "2", spellcheck: "false",
                                "data-tool-call-id": call.toolCallId,
                                "aria-label": question ? "Answer (JSON)" : "Result" });
  area.value = question ? "{}" : JSON.stringify({ ok: true });
  const schema = call.responseSchema
    ? [el("div", { class: "schema-label" }, "answer's JSON Schema"),
       el("pre", { class: "schema" }, pretty(call.responseSchema))] : [];
  const buttons = [];
  if (question || withButton) {
    const send = el("button", { type: "button", class: "answer-send" },
                    question ? "Answer" : "Use this result");
    send.addEventListener("click", () => choose(() => {
      try {
        return question ? JSON.parse(area.value) : area.value;
      } catch (error) {
        throw new Error(`The answer is not valid JSON: ${error.message}`);
      }
    }));
    buttons.push(send);
  }
  if (question) {
    const decline = el("button", { type: "button", class: "decline" }, "Decline");
    decline.addEventListener("click", () => choose(() => ({ action: "decline" })));
    buttons.push(decline);
  }
  return [...schema, area, ...(buttons.length ? [el("div", { class: "choices" }, ...buttons)] : [])];
}

/** One call's row: what it is and asks, and its controls. `choose(make)` is called with a
 * function giving the answer (it may throw: a refused answer). The playground answers client
 * tools through its form's button (`clientToolButton` false); the console per call. */
export function callRow(given, choose, { clientToolButton = false } = {}) {
  const call = normalized(given);
  const kind = call.kind === "clientTool" ? "client tool" : call.kind;
  const row = el("div", { class: `pending-call ${call.kind}${call.expired ? " expired" : ""}`,
                          "data-tool-call-id": call.toolCallId },
                 el("span", { class: "badge" }, call.expired ? `${kind} (expired)` : kind),
                 el("div", { class: "ask" }, call.message || `${call.toolName} waits for its result`),
                 el("pre", {}, `${call.toolName}(${argumentsOf(call)}) · ${call.toolCallId}`),
                 call.rule ? el("small", { class: "rule" }, `asked by the rule ${call.rule}`) : "",
                 call.expiresAt ? el("small", {}, `expires ${call.expiresAt}`) : "");
  row.append(...(call.kind === "approval" ? approvalControls(call, choose)
    : jsonControls(call, choose, clientToolButton)));
  return row;
}

function toolResult(call, value) {
  return { type: "tool_result", toolUseId: call.toolCallId,
           content: [{ type: "text", text: typeof value === "string" ? value : JSON.stringify(value) }] };
}

/**
 * The playground's pending form: `calls` drawn into `box`. A pause of one approval or one
 * question is answered by its button (`onAnswers(content)` at once); otherwise the form's own
 * button sends, with `collect()` (returned), which gives each call's tool_result block.
 */
export function renderPendingCalls(box, calls, onAnswers, guard) {
  const chosen = new Map();
  const collect = () => calls.map((call) => {
    if (chosen.has(call.toolCallId)) return toolResult(call, chosen.get(call.toolCallId));
    if (kindOf(call) !== "clientTool") throw new Error(`Answer ${call.toolName} first.`);
    return toolResult(call, box.querySelector(`textarea[data-tool-call-id="${call.toolCallId}"]`).value);
  });
  box.replaceChildren(...calls.map((call) => {
    const row = callRow(call, (make) => guard(async () => {
      const value = make();
      chosen.set(call.toolCallId, value);
      row.classList.add("chosen");
      row.dataset.choice = JSON.stringify(value);
      if (calls.length === 1) await onAnswers(collect());
    }));
    return row;
  }));
  return collect;
}
