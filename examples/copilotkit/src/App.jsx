import {
  CopilotChat,
  useAgent,
  useCapabilities,
  useDefaultRenderTool,
  useFrontendTool,
  useInterrupt,
  useRenderTool,
  useThreads,
} from "@copilotkit/react-core/v2";
import { useEffect, useRef, useState } from "react";
import { z } from "zod";

/** A frontend action: the model asks, the browser runs the handler and renders the call. */
function useThemeColorAction(setColor) {
  useFrontendTool({
    name: "set_theme_color",
    description: "Change the page's accent colour.",
    parameters: z.object({ color: z.string().describe("A CSS colour, e.g. #0ea5e9 or teal") }),
    handler: async ({ color }) => {
      setColor(color);
      return `The accent colour is now ${color}.`;
    },
    render: ({ status, args, result }) => (
      <div className="card" data-testid="theme-card" data-status={status}>
        <span className="swatch" style={{ background: args.color }} />
        {status === "complete" ? result : `Setting the accent colour to ${args.color ?? "…"}`}
      </div>
    ),
  });
}

/** A tool call the gateway runs (its `get_weather` server tool): the page only shows it. */
function useWeatherCard() {
  useRenderTool({
    name: "get_weather",
    parameters: z.object({ city: z.string() }),
    render: ({ status, parameters, result }) => {
      const weather = status === "complete" ? parseJson(result) : null;
      return (
        <div className="card" data-testid="weather-card" data-status={status}>
          <strong>get_weather</strong> {parameters?.city ?? "…"}:{" "}
          {weather ? `${weather.sky}, ${weather.celsius} °C` : "asking the gateway…"}
        </div>
      );
    },
  });
}

/** A server tool that needs approval (`send_invoice`, `approval=True` in gateway_tools.py): the
 * gateway ends the run with an AG-UI interrupt before the tool runs, and this card answers it.
 * Approve resumes with `{approved: true}` (the gateway runs the tool, once); Deny cancels the
 * interrupt (the tool never runs and the model is told the user said no). */
function useApprovalCard() {
  useInterrupt({
    enabled: ({ value }) => value?.reason === "tool_approval",
    render: ({ interrupt, resolve, cancel }) => (
      <div className="card approval" data-testid="approval-card">
        <strong>{interrupt.metadata?.toolName}</strong> needs your approval:{" "}
        <code>{JSON.stringify(interrupt.metadata?.arguments)}</code>
        <div className="buttons">
          <button data-testid="approve" onClick={() => resolve({ approved: true })}>
            Approve
          </button>
          <button data-testid="deny" onClick={() => cancel()}>
            Deny
          </button>
        </div>
      </div>
    ),
  });
}

/** The approved call, once the gateway has run it. */
function useInvoiceCard() {
  useRenderTool({
    name: "send_invoice",
    parameters: z.object({ customer: z.string(), amount_eur: z.number() }),
    render: ({ status, parameters, result }) => {
      const invoice = status === "complete" ? parseJson(result) : null;
      const outcome = status !== "complete" ? "waiting for approval"
        : invoice?.sent ? `sent as ${invoice.number}` : `not sent (${result})`;
      return (
        <div className="card" data-testid="invoice-card" data-status={status}>
          <strong>send_invoice</strong> {parameters?.customer ?? "…"}, {parameters?.amount_eur} €:{" "}
          {outcome}
        </div>
      );
    },
  });
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The page's thread, kept across reloads (one per user): the gateway holds its conversation
 * (the runtime's GatewayRunner loads it back with `connect`), so a reload or a restarted
 * runtime shows it. */
function savedThreadId(user) {
  const key = `gateway-thread-id:${user ?? ""}`;
  let id = localStorage.getItem(key);
  if (!id) {
    id = crypto.randomUUID();
    localStorage.setItem(key, id);
  }
  return id;
}

function useSavedThread(user) {
  const [threadId, setThreadId] = useState(() => savedThreadId(user));
  const choose = (id) => {
    localStorage.setItem(`gateway-thread-id:${user ?? ""}`, id);
    setThreadId(id);
  };
  return [threadId, choose];
}

/** The user's threads, from the gateway (the runtime's GatewayRunner lists them for
 * `useThreads`): a click opens one, "New thread" starts another (listed once its first run
 * starts). CopilotKit reads the list when the page connects to the runtime; this runtime
 * pushes no thread updates, so the page reads it again each time a run ends. */
function ThreadList({ threadId, onPick, running }) {
  const { threads, isLoading, error, refetchThreads } = useThreads({ agentId: "default" });
  const wasRunning = useRef(running);
  useEffect(() => {
    if (wasRunning.current && !running) refetchThreads();
    wasRunning.current = running;
  }, [running, refetchThreads]);
  return (
    <aside className="threads" data-testid="threads" data-loading={String(isLoading)}>
      <button data-testid="new-thread" onClick={() => onPick(crypto.randomUUID())}>
        New thread
      </button>
      {error ? <p data-testid="threads-error">{error.message}</p> : null}
      <ul>
        {threads.map((thread) => (
          <li key={thread.id}>
            <button
              data-testid="thread"
              data-thread-id={thread.id}
              aria-current={thread.id === threadId ? "true" : undefined}
              onClick={() => onPick(thread.id)}
            >
              {thread.name ?? `Thread ${thread.id.slice(0, 8)}`}
              <small>{new Date(thread.updatedAt).toLocaleString()}</small>
            </button>
          </li>
        ))}
      </ul>
    </aside>
  );
}

/** What the gateway's agent says it can do (the runtime's `/info`, from the gateway's
 * capabilities endpoint through GatewayRunner's agent). */
function describe(capabilities) {
  if (!capabilities) return "…";
  const human = capabilities.humanInTheLoop ?? {};
  const can = [];
  if (human.interrupts) can.push("interrupts");
  if (human.approvals) can.push(human.approveWithEdits ? "approvals with edits" : "approvals");
  if (capabilities.state?.persistentState) can.push("kept state");
  if (capabilities.custom?.branches) can.push("branches");
  return can.join(", ") || "none declared";
}

export default function App({ user }) {
  const [color, setColor] = useState("#6366f1");
  const [threadId, setThreadId] = useSavedThread(user);
  useThemeColorAction(setColor);
  useWeatherCard();
  useApprovalCard();
  useInvoiceCard();
  useDefaultRenderTool(); // any other tool call: CopilotKit's own card
  const { agent } = useAgent(); // the runtime's "default" agent: the gateway
  const capabilities = useCapabilities();

  return (
    <main style={{ "--accent": color, "--copilot-kit-primary-color": color }}>
      <header>
        <h1>CopilotKit on the gateway</h1>
        <p>
          <span data-testid="status" data-idle={String(!agent.isRunning)}>
            {agent.isRunning ? "Running…" : "Ready"}
          </span>{" "}
          · user <code data-testid="user">{user ?? "(the runtime's default)"}</code> · accent{" "}
          <span className="swatch" /> <code data-testid="accent">{color}</code> · thread{" "}
          <code data-testid="thread-id">{agent.threadId}</code>
        </p>
        <p className="capabilities">
          The agent declares: <span data-testid="capabilities">{describe(capabilities)}</span>
        </p>
      </header>
      <div className="body">
        <ThreadList threadId={threadId} onPick={setThreadId} running={agent.isRunning} />
        <CopilotChat
          threadId={threadId}
          className="chat"
          labels={{ chatInputPlaceholder: "Ask the gateway's agent…" }}
        />
      </div>
    </main>
  );
}
