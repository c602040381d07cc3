import { useTambo, useTamboThreadList } from "@tambo-ai/react";

/**
 * The user's threads (`GET /v1/threads`, scoped by the userKey or the signed-in user's token);
 * picking one switches to it.
 */
export function ThreadList() {
  const { data, isLoading } = useTamboThreadList({ limit: 20 }, { refetchInterval: 2000 });
  const { currentThreadId, switchThread } = useTambo();
  if (isLoading) return null;
  const threads = data?.threads ?? [];
  return (
    <nav className="thread-list" data-testid="thread-list">
      {threads.length === 0 ? <span className="meta">No threads yet</span> : null}
      {threads.map((thread) => (
        <button key={thread.id} type="button" data-thread-id={thread.id}
                className={thread.id === currentThreadId ? "current" : ""}
                onClick={() => switchThread(thread.id)}>
          {thread.name || thread.id}
        </button>
      ))}
    </nav>
  );
}
