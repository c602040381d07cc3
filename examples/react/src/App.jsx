import { useTambo, useTamboThreadInput } from "@tambo-ai/react";
import { gatewayUrl } from "./config.js";
import { Message } from "./Message.jsx";
import { Suggestions } from "./Suggestions.jsx";
import { ThreadList } from "./ThreadList.jsx";
import { InputExtras } from "./InputExtras.jsx";
import { usePersistedThread } from "./thread-storage.js";

export function App() {
  const { messages, thread, isIdle, isWaiting, streamingState, cancelRun } = useTambo();
  const { threadId, newThread } = usePersistedThread();
  const { value, setValue, submit, isPending, error, images } = useTamboThreadInput();
  const runError = streamingState?.error;

  async function onSubmit(event) {
    event.preventDefault();
    if (!value.trim() && images.length === 0) return;
    try {
      await submit();
    } catch {
      // `error` from useTamboThreadInput shows it below.
    }
  }

  return (
    <main>
      <header>
        <div>
          <h1>{thread?.thread?.name || "New conversation"}</h1>
          <div className="meta">
            Gateway <code>{gatewayUrl}</code> · thread{" "}
            <code data-testid="thread-id">{threadId ?? "(not started)"}</code>
          </div>
        </div>
        <button type="button" onClick={newThread}>
          New thread
        </button>
      </header>

      <ThreadList />

      <section className="messages" data-testid="messages">
        {messages.length === 0 ? (
          <p className="empty">
            Try: “Show me ACME and GLOBEX stock prices” or “What time is it here?”
          </p>
        ) : (
          messages.map((message) => <Message key={message.id} message={message} />)
        )}
      </section>

      {isIdle && messages.at(-1)?.role === "assistant" ? <Suggestions /> : null}

      <div className="status" data-testid="status" data-idle={isIdle ? "true" : "false"}>
        {isWaiting ? "Waiting for the model…" : isIdle ? "Idle" : "Streaming…"}
        {isIdle && thread?.thread?.lastRunCancelled ? " · stopped" : ""}
        {runError ? <span className="error"> · {runError.message}</span> : null}
        {error ? <span className="error"> · {error.message}</span> : null}
      </div>

      <InputExtras />

      <form onSubmit={onSubmit} data-pending={isPending ? "true" : "false"}>
        <input
          aria-label="Message"
          data-testid="input"
          placeholder="Ask something…"
          value={value}
          onChange={(e) => setValue(e.target.value)}
        />
        {isIdle ? (
          <button type="submit" data-testid="send" disabled={isPending || (!value.trim() && images.length === 0)}>
            Send
          </button>
        ) : (
          // Cancels the run on the gateway (DELETE /v1/threads/{id}/runs/{runId}); what was
          // already streamed stays in the thread.
          <button type="button" data-testid="stop" onClick={() => cancelRun()}>
            Stop
          </button>
        )}
      </form>
    </main>
  );
}
