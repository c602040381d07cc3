// The console's Schedules tab: the project's schedules (every user scope's), each with its next
// due time and what its last one did; and the most recent completion webhooks with their
// outcome (a receiver is shown by its host only: a URL's path or query may carry its token).

import { $, api, cell, labelled, when } from "/web/admin_api.js";

function scheduleText(schedule) {
  if (schedule.every != null) return `every ${schedule.every} s`;
  return `${schedule.cron} (${schedule.timezone || "UTC"})`;
}

export async function loadAutomation() {
  const [crons, webhooks] = await Promise.all([api("/v1/admin/crons"),
                                              api("/v1/admin/webhooks")]);
  const cronRows = crons.crons.map((cron) => {
    const row = document.createElement("tr");
    cell(row, cron.id);
    cell(row, scheduleText(cron.schedule));
    cell(row, cron.userKey);
    cell(row, cron.agent);
    cell(row, cron.threadId || "new each time");
    cell(row, when(cron.nextRunAt));
    cell(row, cron.runsStarted);
    cell(row, cron.lastRunId);
    cell(row, cron.lastError, cron.lastError ? "error-code" : "");
    cell(row, cron.webhookHost);
    return row;
  });
  $("crons").tBodies[0].replaceChildren(...cronRows);
  labelled($("crons"));
  $("crons-none").hidden = cronRows.length > 0;
  const deliveryRows = webhooks.deliveries.map((delivery) => {
    const row = document.createElement("tr");
    cell(row, when(delivery.createdAt));
    cell(row, delivery.runId);
    cell(row, delivery.host);
    cell(row, delivery.state, delivery.state === "failed" ? "error-code" : "");
    cell(row, delivery.attempts);
    cell(row, delivery.lastStatus);
    cell(row, delivery.lastError);
    cell(row, when(delivery.doneAt || delivery.nextAttemptAt));
    return row;
  });
  $("webhooks").tBodies[0].replaceChildren(...deliveryRows);
  labelled($("webhooks"));
}
