import { z } from "zod";

/**
 * A client-side tool: the model asks for it, the gateway pauses the run
 * (`tambo.run.awaiting_input`), the React SDK runs this function in the browser and sends the
 * result back in a continuation run. Only the browser knows the user's clock and time zone,
 * which is why this is a client tool and not a server one.
 */
export const getLocalTime = {
  name: "get_local_time",
  description: "Get the current local date, time and IANA time zone of the user's browser.",
  inputSchema: z.object({}),
  outputSchema: z.object({
    timeZone: z.string(),
    localTime: z.string(),
    iso: z.string(),
  }),
  tool: () => {
    const now = new Date();
    return {
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      localTime: now.toLocaleString("en-GB", { dateStyle: "full", timeStyle: "long" }),
      iso: now.toISOString(),
    };
  },
};

export const tools = [getLocalTime];
