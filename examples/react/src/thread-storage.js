import { useEffect, useRef } from "react";
import { useTambo, useTamboThread } from "@tambo-ai/react";
import { threadStorageKey } from "./config.js";

/** The id React uses for a thread the server has not created yet. */
const PLACEHOLDER = "placeholder";

/**
 * Keep the current thread across page reloads.
 *
 * The SDK keeps threads in memory only. We remember the thread id in localStorage and, on the
 * first render, switch back to it: the SDK then loads its history from the gateway
 * (`GET /v1/threads/{id}/messages`) and its last run id (`GET /v1/threads/{id}`), so the next
 * message continues the same thread.
 *
 * The SDK (1.3) does not put the stored thread name back into its state, so it would show no
 * title and ask the gateway to name the thread again on the next message. We read the thread
 * (`useTamboThread`) and hand its name to the SDK.
 */
export function usePersistedThread() {
  const { currentThreadId, switchThread, startNewThread, thread, dispatch } = useTambo();
  const threadId = currentThreadId === PLACEHOLDER ? null : currentThreadId;
  const restored = useRef(false);
  const { data: storedThread } = useTamboThread(threadId ?? PLACEHOLDER, {
    enabled: threadId !== null,
  });

  useEffect(() => {
    if (restored.current) return;
    restored.current = true;
    const saved = window.localStorage.getItem(threadStorageKey);
    if (saved) switchThread(saved);
  }, [switchThread]);

  useEffect(() => {
    if (threadId) window.localStorage.setItem(threadStorageKey, threadId);
  }, [threadId]);

  const knownName = thread?.thread?.name;
  const storedName = storedThread?.id === threadId ? storedThread?.name : undefined;
  useEffect(() => {
    if (threadId && thread && storedName && !knownName) {
      dispatch({ type: "UPDATE_THREAD_NAME", threadId, name: storedName });
    }
  }, [threadId, thread, storedName, knownName, dispatch]);

  return {
    threadId,
    newThread: () => {
      window.localStorage.removeItem(threadStorageKey);
      startNewThread();
    },
  };
}
