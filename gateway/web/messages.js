// A thread's messages as both pages show them (the playground at /, the console at /admin):
// the REST shape (GET /v1/threads/{id}, GET /v1/admin/threads/{id}/messages) turned into parts,
// and parts into elements. Every value from the server is written as text, never as HTML.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

export const pretty = (value) => JSON.stringify(value, null, 2);

/** A REST message as {id, role, parts, cancelled}: text, reasoning, tool calls (with their
 * results, when the same message holds them), tool results, components. */
export function fromRest(msg) {
  const parts = (msg.reasoning || []).map((text) => ({ kind: "reasoning", text, closed: true }));
  for (const block of msg.content) {
    if (block.type === "text") parts.push({ kind: "text", text: block.text, closed: true });
    else if (block.type === "tool_use") {
      parts.push({ kind: "tool", id: block.id, name: block.name, args: JSON.stringify(block.input) });
    } else if (block.type === "tool_result") {
      const text = typeof block.content === "string" ? block.content
        : block.content.map((c) => c.text ?? JSON.stringify(c)).join("");
      const call = parts.find((p) => p.kind === "tool" && p.id === block.toolUseId);
      if (call) call.result = text;
      else parts.push({ kind: "tool_result", id: block.toolUseId, text });
    } else if (block.type === "component") {
      parts.push({ kind: "component", id: block.id, name: block.name, props: block.props,
                   state: block.state });
    } else parts.push({ kind: "other", ...block });
  }
  return { id: msg.id, role: msg.role, parts, cancelled: msg.isCancelled, done: true };
}

/** One part, read-only (the playground renders components with a state box of its own). */
export function renderBasicPart(part) {
  if (part.kind === "text") return el("div", { class: "part text" }, part.text);
  if (part.kind === "reasoning") return el("div", { class: "part reasoning" }, part.text);
  if (part.kind === "tool") {
    const node = el("div", { class: "part tool", "data-tool-call-id": part.id },
                    el("h4", {}, `tool call: ${part.name}`), el("pre", {}, part.args));
    if (part.result !== undefined) node.append(el("pre", { class: "result" }, `→ ${part.result}`));
    return node;
  }
  if (part.kind === "tool_result") {
    return el("div", { class: "part tool" }, el("h4", {}, `tool result for ${part.id}`),
              el("pre", {}, part.text));
  }
  if (part.kind === "component") {
    return el("div", { class: "part component", "data-component-id": part.id },
              el("h4", {}, `component: ${part.name}`), el("pre", { class: "props" }, pretty(part.props)),
              el("pre", { class: "state" }, pretty(part.state ?? null)));
  }
  return el("div", { class: "part" }, pretty(part));
}

/** A message with its role (and "cancelled" when it was cut off), its parts drawn by `part`. */
export function renderMessage(msg, part = renderBasicPart) {
  const node = el("div", { class: `message ${msg.role}${msg.cancelled ? " cancelled" : ""}`,
                           "data-message-id": msg.id },
                  el("div", { class: "role" }, msg.role + (msg.cancelled ? " (cancelled)" : "")));
  for (const each of msg.parts) node.append(part(each));
  return node;
}
