/**
 * Strict AG-UI check of one Tambo run endpoint (contract §20.5, §21).
 *
 * The Tambo clients never validate events, so a stream can "work" with them
 * and still be invalid AG-UI. This module fetches a run endpoint once, splits
 * the body in two (ReadableStream.tee):
 *   - branch A goes through the exact pipeline an @ag-ui/client 1.0.0
 *     HttpAgent applies to a response: runHttpRequest → transformHttpEventStream
 *     → CompatibilityBoundary (legacy THINKING_* → REASONING_*) → enforceEvents
 *     → transformChunks → verifyEvents. Any error of that observable is reported.
 *   - branch B is parsed here, by hand, to the end of the body, so callers can
 *     assert on the raw events and `id:` values even when the verifier gave up
 *     (and even after CUSTOM tambo.run.awaiting_input, where Tambo clients stop).
 */
import {
  CompatibilityBoundary,
  enforceEvents,
  runHttpRequest,
  transformChunks,
  transformHttpEventStream,
  verifyEvents,
} from "@ag-ui/client";

/** A RunAgentInput stand-in: CompatibilityBoundary.run() only reads `messages`. */
const DUMMY_INPUT = {
  threadId: "verify",
  runId: "verify",
  messages: [],
  tools: [],
  context: [],
  state: {},
  forwardedProps: {},
};

/**
 * Parse an SSE body by hand. Accepts LF and CRLF framing so that a stream the
 * AG-UI parser rejects (CRLF) can still be inspected.
 * @returns {{events: object[], ids: (number|string|null)[], rawErrors: string[], comments: number}}
 */
export function parseSseText(text) {
  const events = [];
  const ids = [];
  const rawErrors = [];
  let comments = 0;
  const frames = text.replace(/\r\n|\r/g, "\n").split("\n\n");
  for (const frame of frames) {
    if (!frame.trim()) continue;
    const data = [];
    let id = null;
    for (const line of frame.split("\n")) {
      if (line.startsWith(":")) comments += 1;
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line.startsWith("id:")) id = line.slice(3).trim();
    }
    if (data.length === 0) continue;
    const payload = data.join("\n");
    try {
      events.push(JSON.parse(payload));
    } catch {
      rawErrors.push(`non-JSON data: ${payload.slice(0, 200)}`);
      continue;
    }
    ids.push(id === null || id === "" ? null : Number.isFinite(Number(id)) ? Number(id) : id);
  }
  return { events, ids, rawErrors, comments };
}

/** Read a body to the end; on failure (timeout, reset) keep what arrived so far. */
async function readAll(stream) {
  const reader = stream.getReader();
  const decoder = new TextDecoder("utf-8");
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    return { text: text + decoder.decode(), error: null };
  } catch (err) {
    return { text, error: err?.message ?? String(err) };
  }
}

/** Run the AG-UI 1.0 pipeline over a Response; resolves to the error message or null. */
function verifyResponse(response) {
  const source = {
    run: () => transformHttpEventStream(runHttpRequest(() => Promise.resolve(response))),
  };
  const events$ = new CompatibilityBoundary()
    .run(structuredClone(DUMMY_INPUT), source)
    .pipe(enforceEvents(), transformChunks(), verifyEvents());
  return new Promise((resolve) => {
    let count = 0;
    events$.subscribe({
      next: () => (count += 1),
      error: (err) => resolve({ error: err?.message ?? String(err), verified: count }),
      complete: () => resolve({ error: null, verified: count }),
    });
  });
}

/**
 * Fetch a Tambo run endpoint and verify the SSE response.
 * @param {{url: string, method?: string, headers?: object, body?: object|string, timeoutMs?: number}} req
 * @returns {Promise<{status: number, events: object[], ids: (number|null)[], errors: string[],
 *   warnings: string[], verified: number, bodyText?: string}>}
 *   `errors` holds verifier errors (at most one: the observable stops at the
 *   first) plus raw-capture problems prefixed "raw:". `warnings` are what
 *   enforceEvents/CompatibilityBoundary printed (dropped event types, stripped
 *   fields such as RUN_ERROR.category). `verified` counts events that passed.
 *   `status` is 0 when no response arrived at all (error "fetch failed: ...").
 */
export async function captureAndVerify({ url, method = "POST", headers = {}, body, timeoutMs = 30000 }) {
  const init = {
    method,
    headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...headers },
    signal: AbortSignal.timeout(timeoutMs),
  };
  if (body !== undefined && method !== "GET") {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const result = { status: 0, events: [], ids: [], errors: [], warnings: [], verified: 0 };
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    // No response headers at all (refused, or not flushed before the timeout): status 0.
    result.errors.push(`fetch failed: ${err?.cause?.message ?? err?.message ?? err}`);
    return result;
  }
  result.status = response.status;

  // Collect what the AG-UI operators print; they warn through console.warn.
  const originalWarn = console.warn;
  console.warn = (...args) => result.warnings.push(args.map(String).join(" "));
  try {
    if (!response.ok || !response.body) {
      const text = await response.text();
      result.bodyText = text;
      const verdict = await verifyResponse(new Response(text, response));
      if (verdict.error) result.errors.push(verdict.error);
      return result;
    }
    const [forVerifier, forRaw] = response.body.tee();
    const copy = new Response(forVerifier, { status: response.status, headers: response.headers });
    const [verdict, raw] = await Promise.all([
      verifyResponse(copy),
      readAll(forRaw).then(({ text, error }) => {
        const parsed = parseSseText(text);
        if (error) parsed.rawErrors.push(`read failed: ${error}`);
        return parsed;
      }),
    ]);
    if (verdict.error) result.errors.push(verdict.error);
    result.verified = verdict.verified;
    result.events = raw.events;
    result.ids = raw.ids;
    for (const msg of raw.rawErrors) result.errors.push(`raw: ${msg}`);
    return result;
  } finally {
    console.warn = originalWarn;
  }
}
