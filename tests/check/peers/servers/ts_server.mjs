// A small server on the official TypeScript SDK (npm @modelcontextprotocol/sdk), written the way its
// README shows: two tools (one with structured output), a resource and a prompt.
//
//   MCP_TS_DIR=DIR node ts_server.mjs                 stdio
//   MCP_TS_DIR=DIR node ts_server.mjs --http PORT     Streamable HTTP (sessions) on 127.0.0.1:PORT/mcp
//
// DIR holds node_modules/@modelcontextprotocol/sdk (tools/install-mcp-servers.sh prints it); ESM
// ignores NODE_PATH, so the SDK is resolved from DIR with createRequire.
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';

const req = createRequire(path.join(process.env.MCP_TS_DIR || process.cwd(), 'package.json'));
const { McpServer } = await import(req.resolve('@modelcontextprotocol/sdk/server/mcp.js'));
const { StdioServerTransport } = await import(req.resolve('@modelcontextprotocol/sdk/server/stdio.js'));
const { StreamableHTTPServerTransport } = await import(req.resolve('@modelcontextprotocol/sdk/server/streamableHttp.js'));
const { isInitializeRequest } = await import(req.resolve('@modelcontextprotocol/sdk/types.js'));
const { z } = await import(req.resolve('zod'));

function buildServer() {
  const server = new McpServer({ name: 'peer-ts', version: '1.0.0' });
  server.registerTool('add', {
    description: 'Add two integers.',
    inputSchema: { a: z.number().int(), b: z.number().int() },
    outputSchema: { sum: z.number().int() },
    annotations: { readOnlyHint: true },
  }, async ({ a, b }) => ({ content: [{ type: 'text', text: JSON.stringify({ sum: a + b }) }], structuredContent: { sum: a + b } }));
  server.registerTool('echo', {
    description: 'Return the text unchanged.',
    inputSchema: { text: z.string() },
  }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerResource('hello', 'peer://hello', { mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Hello!' }] }));
  server.registerPrompt('greet', { description: 'Greet someone.', argsSchema: { who: z.string() } },
    ({ who }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Say hello to ${who}.` } }] }));
  return server;
}

const args = process.argv.slice(2);
if (args[0] === '--http') {
  // the SDK README's "with session management" example
  const transports = {};
  const httpServer = http.createServer(async (request, response) => {
    if (!request.url.startsWith('/mcp')) { response.writeHead(404).end(); return; }
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString('utf8');
    let body;
    try { body = text ? JSON.parse(text) : undefined; } catch { body = undefined; }
    const sid = request.headers['mcp-session-id'];
    let transport = sid ? transports[sid] : undefined;
    if (!transport && !sid && request.method === 'POST' && body && isInitializeRequest(body)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => { transports[id] = transport; },
      });
      transport.onclose = () => { if (transport.sessionId) delete transports[transport.sessionId]; };
      await buildServer().connect(transport);
    }
    if (!transport) {
      response.writeHead(sid ? 404 : 400, { 'Content-Type': 'application/json' });
      response.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: sid ? 'Session not found' : 'Bad Request: No valid session ID provided' }, id: null }));
      return;
    }
    await transport.handleRequest(request, response, body);
  });
  httpServer.listen(parseInt(args[1], 10), '127.0.0.1');
} else {
  await buildServer().connect(new StdioServerTransport());
}
