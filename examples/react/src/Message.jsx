/** One thread message: its text, reasoning, tool calls and rendered components. */
export function Message({ message }) {
  const blocks = message.content ?? [];
  const onlyToolResults = blocks.length > 0 && blocks.every((b) => b.type === "tool_result");
  if (onlyToolResults) {
    // The results the browser sent back for client tools: shown small, they are plumbing.
    return (
      <div className="message tool-results" data-testid="tool-results">
        {blocks.map((block) => (
          <div key={block.toolUseId} className="tool-result">
            ↳ {block.isError ? "tool failed" : "tool result sent"}: <code>{resultText(block)}</code>
          </div>
        ))}
      </div>
    );
  }
  return (
    <div className={`message ${message.role}`} data-testid="message" data-role={message.role}>
      <div className="role">{message.role === "user" ? "You" : "Assistant"}</div>
      {message.reasoning?.length ? (
        <details className="reasoning">
          <summary>Thought for a moment</summary>
          {message.reasoning.join("")}
        </details>
      ) : null}
      {blocks.map((block, index) => (
        <Block key={block.id ?? `${block.type}-${index}`} block={block} />
      ))}
    </div>
  );
}

function Block({ block }) {
  switch (block.type) {
    case "text":
      return block.text ? <p className="text">{block.text}</p> : null;
    case "tool_use":
      return (
        <div className="tool-use" data-testid="tool-use" data-tool={block.name}>
          Tool call <code>{block.name}</code>
          <span className="tool-status">{block.hasCompleted ? " · done" : " · running…"}</span>
          {/* The SDK's label: the model's `_tambo_statusMessage` (or its completion message),
              else "Calling <tool>" / "Called <tool>". */}
          {block.statusMessage ? (
            <span className="tool-label" data-testid="tool-label"> · {block.statusMessage}</span>
          ) : null}
        </div>
      );
    case "resource": {
      // An attachment (React sends images as base64 `blob`s); the gateway passes it to the model.
      const { name, mimeType, blob, uri } = block.resource ?? {};
      return (
        <div className="resource" data-testid="resource">
          Attached <code>{name || uri || "file"}</code>
          {blob && mimeType?.startsWith("image/") ? (
            <img alt={name} src={`data:${mimeType};base64,${blob}`} height="48" />
          ) : null}
        </div>
      );
    }
    case "component":
      // The SDK wraps the registered React component so its hooks know their thread/component.
      return (
        <div className="component" data-testid="component" data-component={block.name}>
          {block.renderedComponent ?? <em>Unknown component {block.name}</em>}
        </div>
      );
    default:
      return null;
  }
}

function resultText(block) {
  const text = (block.content ?? []).map((part) => part.text ?? "").join(" ");
  return text.length > 160 ? `${text.slice(0, 157)}...` : text;
}
