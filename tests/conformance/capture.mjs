/**
 * CLI wrapper around captureAndVerify, for the Python helper
 * tests/support/node.py:capture_and_verify().
 *
 * Usage: node capture.mjs '<json>'   or   echo '<json>' | node capture.mjs
 * where <json> is {url, method?, headers?, body?, timeoutMs?}.
 * Prints exactly one JSON line (the captureAndVerify result) on stdout; exits 0
 * unless the request itself could not be made (then a message on stderr, exit 1).
 */
import { captureAndVerify } from "./agui_verify.mjs";

async function readStdin() {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

try {
  const args = JSON.parse(process.argv[2] ?? (await readStdin()));
  const result = await captureAndVerify(args);
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(0));
} catch (err) {
  console.error(`capture.mjs: ${err?.stack ?? err}`);
  process.exit(1);
}
