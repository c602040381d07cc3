// The operator console: tabs over the operator API (/v1/admin/...), nothing else. The admin
// key is asked for once per tab, kept in sessionStorage and sent as the x-api-key header (never
// in a URL, so never in an access log). Every value from the server is written as text.
//
// Each tab is a module (admin_*.js) with its loader, registered in `tabs`.

import { $, ApiError, adminKey, forgetKey, keepKey } from "/web/admin_api.js";
import { loadAutomation } from "/web/admin_automation.js";
import { loadKeys, wireKeys } from "/web/admin_keys.js";
import { loadRuns, loadThreads, wireRuns } from "/web/admin_runs.js";
import { loadModels, loadUsage, wireUsage } from "/web/admin_usage.js";
import { loadWaiting, wireWaiting } from "/web/admin_waiting.js";

const tabs = { waiting: () => loadWaiting(), threads: () => loadThreads(), runs: () => loadRuns(),
               keys: () => loadKeys(), usage: () => loadUsage(), automation: () => loadAutomation(),
               settings: () => loadModels() };

/** A refusal of the key itself (unknown, revoked, not an admin key): sign in again. */
const refusesTheKey = (error) => error instanceof ApiError && (error.status === 401
  || error.status === 403 && error.code === "ADMIN_KEY_REQUIRED");

function showError(error) {
  if (error && refusesTheKey(error)) {
    forgetKey();
    signedIn(false);
  }
  $("error").textContent = error ? String(error.message || error) : "";
  $("error").hidden = !error;
}

function signedIn(yes) {
  $("sign-in").hidden = yes;
  $("console").hidden = !yes;
  $("tabs").hidden = !yes;
  $("sign-out").hidden = !yes || !adminKey();
  $("signed-in").hidden = !yes;
  $("signed-in").textContent = yes ? (adminKey() ? "signed in" : "development mode") : "";
}

function selectTab(name) {
  for (const button of $("tabs").querySelectorAll("button")) {
    button.classList.toggle("selected", button.dataset.tab === name);
  }
  for (const tab of Object.keys(tabs)) $(`${tab}-tab`).hidden = tab !== name;
}

function show(name) {
  selectTab(name);
  return tabs[name]().then(() => showError(null), showError);
}

async function start() {
  try {
    await loadThreads();  // answers without a key in development mode only
  } catch (error) {
    if (refusesTheKey(error)) {  // not signed in yet (the form, quietly), or a key refused
      const typed = !!adminKey();
      forgetKey();
      signedIn(false);
      showError(typed ? error : null);
      return;
    }
    signedIn(true);
    showError(error);
    return;
  }
  signedIn(true);
  showError(null);
  loadWaiting().catch(() => {});  // the count on its tab, for whoever signs in
}

function wire() {
  window.showError = showError;
  window.selectTab = selectTab;
  $("sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    keepKey($("admin-key").value.trim());
    $("admin-key").value = "";
    start();
  });
  $("sign-out").addEventListener("click", () => {
    forgetKey();
    signedIn(false);
  });
  for (const button of $("tabs").querySelectorAll("button")) {
    button.addEventListener("click", () => show(button.dataset.tab));
  }
  for (const [form, load] of [["thread-filters", loadThreads], ["run-filters", loadRuns],
                              ["usage-filters", loadUsage]]) {
    $(form).addEventListener("submit", (event) => {
      event.preventDefault();
      load().then(() => showError(null), showError);
    });
  }
  wireRuns();
  wireWaiting();
  wireKeys();
  wireUsage();
}

wire();
start();
