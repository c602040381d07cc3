import {
  CopilotChat,
  useAgent,
  useDefaultRenderTool,
  useFrontendTool,
  useInterrupt,
  useRenderTool,
} from "@copilotkit/react-core/v2";
import { useState } from "react";
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

/** The page's thread, kept across reloads: the gateway holds its conversation (the runtime's
 * GatewayRunner loads it back with `connect`), so a reload or a restarted runtime shows it. */
function savedThreadId() {
  let id = localStorage.getItem("gateway-thread-id");
  if (!id) {
    id = crypto.randomUUID();
    localStorage.setItem("gateway-thread-id", id);
  }
  return id;
}

export default function App() {
  const [color, setColor] = useState("#6366f1");
  const [threadId] = useState(savedThreadId);
  useThemeColorAction(setColor);
  useWeatherCard();
  useApprovalCard();
  useInvoiceCard();
  useDefaultRenderTool(); // any other tool call: CopilotKit's own card
  const { agent } = useAgent(); // the runtime's "default" agent: the gateway

  return (
    <main style={{ "--accent": color, "--copilot-kit-primary-color": color }}>
      <header>
        <h1>CopilotKit on the gateway</h1>
        <p>
          <span data-testid="status" data-idle={String(!agent.isRunning)}>
            {agent.isRunning ? "Running…" : "Ready"}
          </span>{" "}
          · accent <span className="swatch" /> <code data-testid="accent">{color}</code> · thread{" "}
          <code data-testid="thread-id">{agent.threadId}</code>
        </p>
      </header>
      <CopilotChat
        threadId={threadId}
        className="chat"
        labels={{ chatInputPlaceholder: "Ask the gateway's agent…" }}
      />
    </main>
  );
}
