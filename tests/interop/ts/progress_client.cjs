// The TypeScript SDK's own client over stdio: call a tool N times with an onprogress callback and
// report, per call, the progress values it delivered and the errors the SDK raised.
// Usage: node progress_client.cjs TOOL CALLS -- COMMAND [ARGS...]   (NODE_PATH: the SDK install)
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const path = require("path");
const sdkVersion = require(path.join(path.dirname(require.resolve("@modelcontextprotocol/sdk/client/index.js")),
  "..", "..", "..", "package.json")).version;

async function main() {
  const [tool, calls, dashdash, command, ...args] = process.argv.slice(2);
  if (dashdash !== "--") throw new Error("usage: progress_client.cjs TOOL CALLS -- COMMAND [ARGS...]");
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  const client = new Client({ name: "ts-progress-probe", version: "1" });
  const errors = [];
  client.onerror = (error) => errors.push(String(error.message || error));
  await client.connect(transport);
  const results = [];
  for (let i = 0; i < Number(calls); i++) {
    const progress = [];
    const before = errors.length;
    const result = await client.callTool({ name: tool, arguments: {} }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    // let notification handlers queued as microtasks (or later) run before looking
    await new Promise((resolve) => setTimeout(resolve, 20));
    results.push({ progress, errors: errors.slice(before), isError: result.isError === true });
  }
  await client.close();
  process.stdout.write(JSON.stringify({ sdk: sdkVersion, results }) + "\n");
}

main().catch((error) => { console.error(error); process.exit(1); });
