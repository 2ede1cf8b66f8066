// The TypeScript SDK's own client over stdio against a server of the Skills extension (SEP-2640).
// The SDK (1.x) has no skill helpers: it reads the extension in the server's capabilities, sends
// skills/list and skills/get as generic requests, and reads each file with readResource; this
// reports what it got, and the SHA-256 of each file's bytes as read, for the test to compare.
// Usage: node skills_client.cjs -- COMMAND [ARGS...]   (NODE_PATH: the SDK install)
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { z } = require("zod");
const crypto = require("crypto");

async function main() {
  const [dashdash, command, ...args] = process.argv.slice(2);
  if (dashdash !== "--") throw new Error("usage: skills_client.cjs -- COMMAND [ARGS...]");
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  const client = new Client({ name: "ts-skills-probe", version: "1" });
  await client.connect(transport);
  const any = z.object({}).passthrough();
  const extensions = (client.getServerCapabilities() || {}).extensions || null;
  const listed = await client.request({ method: "skills/list", params: {} }, any);
  const read = {};
  for (const entry of listed.skills) {
    const got = await client.request({ method: "skills/get", params: { uri: entry.uri } }, any);
    if (JSON.stringify(got.skill) !== JSON.stringify(entry)) throw new Error(`skills/get differs for ${entry.uri}`);
    for (const item of entry.resources) {
      const [content] = (await client.readResource({ uri: item.uri })).contents;
      const bytes = content.text !== undefined ? Buffer.from(content.text, "utf8") : Buffer.from(content.blob, "base64");
      read[item.uri] = { size: bytes.length, digest: "sha256:" + crypto.createHash("sha256").update(bytes).digest("hex") };
    }
  }
  await client.close();
  process.stdout.write(JSON.stringify({ extensions, skills: listed.skills, read }) + "\n");
}

main().catch((error) => { console.error(error); process.exit(1); });
