// mcpkit dev: the page's MCP client. It speaks Streamable HTTP to the server on this origin, as any
// client does: the handshake revisions (initialize, a session, a GET stream for notifications) or
// 2026-07-28 (server/discover, _meta and Mcp-* headers on every request, no session).
//
// It is a whole client (LC-02 capabilities): it declares roots, sampling and elicitation, and
// answers what the server asks. In the handshake era the server's requests arrive on the SSE
// streams (a POST's own stream or the session's GET stream) and are answered by POST; in
// 2026-07-28 the server sends none: a call answers with an InputRequiredResult (MR-01..MR-04) and
// the page retries it with inputResponses and the sealed requestState. Cancelling is
// notifications/cancelled in the handshake era and closing the POST's stream in 2026-07-28
// (HM-10); resource subscriptions are resources/subscribe there and subscriptions/listen here.
"use strict";

const CLIENT_INFO = { name: "mcpkit-dev-inspector", version: "1" };
// elicitation: both modes of 2025-11-25 (EL-04); a server of an earlier revision reads {} as forms
const CLIENT_CAPABILITIES = { roots: { listChanged: true }, sampling: {}, elicitation: { form: {}, url: {} } };
const META = {
  version: "io.modelcontextprotocol/protocolVersion",
  caps: "io.modelcontextprotocol/clientCapabilities",
  info: "io.modelcontextprotocol/clientInfo",
};
const NAME_PARAM = { "tools/call": "name", "prompts/get": "name", "resources/read": "uri" };
//: how many input rounds one modern request may take before the page gives up (a loop guard)
const MAX_ROUNDS = 16;

class McpClient {
  // hooks: {raw(dir, msg), notification(msg), lost(text), serverRequest(method, params, id) -> Promise<result>,
  //         serverCancelled(id)}
  constructor(endpoint, revision, modern, hooks) {
    this.endpoint = endpoint;
    this.revision = revision;
    this.modern = modern;
    this.hooks = hooks;
    this.sessionId = null;
    this.nextId = 1;
    this.getStream = null;
    this.listenStream = null;
    this.tools = new Map();
    this.running = new Map(); // request id -> AbortController of its POST
  }

  headers(method, params) {
    const h = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
    if (this.sessionId) h["Mcp-Session-Id"] = this.sessionId;
    if (this.revision && (this.modern || method !== "initialize")) h["MCP-Protocol-Version"] = this.revision;
    if (this.modern && method) {
      h["Mcp-Method"] = method;
      const field = NAME_PARAM[method];
      if (field && params && typeof params[field] === "string") h["Mcp-Name"] = headerValue(params[field]);
      if (method === "tools/call") Object.assign(h, this.paramHeaders(params));
    }
    return h;
  }

  paramHeaders(params) {
    // 2026-07-28: parameters a tool marks with x-mcp-header are mirrored in Mcp-Param-* headers
    const out = {};
    const schema = (this.tools.get(params.name) || {}).inputSchema || {};
    for (const [prop, spec] of Object.entries(schema.properties || {})) {
      const header = spec && spec["x-mcp-header"];
      const value = (params.arguments || {})[prop];
      if (header && value !== undefined && value !== null) out[`Mcp-Param-${header}`] = headerValue(String(value));
    }
    return out;
  }

  envelope(method, params) {
    if (!this.modern) return params;
    const meta = Object.assign({}, (params || {})._meta, {
      [META.version]: this.revision, [META.caps]: CLIENT_CAPABILITIES, [META.info]: CLIENT_INFO,
    });
    return Object.assign({}, params, { _meta: meta });
  }

  async connect() {
    if (this.modern) {
      const result = await this.request("server/discover");
      this.info = (result._meta || {})["io.modelcontextprotocol/serverInfo"] || result.serverInfo || {};
      this.capabilities = result.capabilities || {};
      this.listen(new Set());
      return result;
    }
    const result = await this.request("initialize", {
      protocolVersion: this.revision, capabilities: CLIENT_CAPABILITIES, clientInfo: CLIENT_INFO,
    });
    this.revision = result.protocolVersion;
    this.info = result.serverInfo || {};
    this.capabilities = result.capabilities || {};
    await this.notify("notifications/initialized");
    this.openGetStream();
    return result;
  }

  async notify(method, params) {
    const msg = { jsonrpc: "2.0", method };
    if (params) msg.params = params;
    this.hooks.raw("out", msg);
    const response = await fetch(this.endpoint, { method: "POST", headers: this.headers(method), body: JSON.stringify(msg) });
    if (response.status !== 202 && response.status !== 200) this.hooks.lost(`${method}: HTTP ${response.status}`);
  }

  // One request and its answer. onProgress gets its progress notifications; onStart(id) is told
  // the request's id (to cancel it). A 2026-07-28 InputRequiredResult is answered and retried here.
  async request(method, params, onProgress, onStart) {
    let extra = {};
    for (let round = 0; ; round++) {
      const result = await this.exchange(method, Object.assign({}, params, extra), onProgress, onStart);
      if (!(this.modern && result && result.resultType === "input_required")) return result;
      if (round >= MAX_ROUNDS) throw new RpcFailure({ code: -1, message: `${method}: still input_required after ${round} rounds` });
      const responses = {};
      for (const [key, asked] of Object.entries(result.inputRequests || {})) {
        responses[key] = await this.answer(asked.method, asked.params || {}, key);
      }
      extra = { inputResponses: responses };
      if (result.requestState !== undefined) extra.requestState = result.requestState;
    }
  }

  async exchange(method, params, onProgress, onStart) {
    const id = this.nextId++;
    let sent = this.envelope(method, params);
    if (onProgress) sent = Object.assign({}, sent, { _meta: Object.assign({}, (sent || {})._meta, { progressToken: `p${id}` }) });
    const msg = { jsonrpc: "2.0", id, method };
    if (sent !== undefined && Object.keys(sent).length) msg.params = sent;
    this.hooks.raw("out", msg);
    const controller = new AbortController();
    this.running.set(id, controller);
    if (onStart) onStart(id);
    try {
      const response = await fetch(this.endpoint, {
        method: "POST", headers: this.headers(method, params), body: JSON.stringify(msg), signal: controller.signal,
      });
      const sid = response.headers.get("Mcp-Session-Id");
      if (sid) this.sessionId = sid;
      if (response.status === 404 && this.sessionId) {
        this.sessionId = null;
        throw new SessionLost("the session is gone (the server restarted?)");
      }
      const type = response.headers.get("Content-Type") || "";
      let answer = null;
      const take = (message) => {
        this.hooks.raw("in", message);
        if (message.id === id && ("result" in message || "error" in message)) answer = message;
        else this.onMessage(message, onProgress, `p${id}`);
      };
      if (type.startsWith("text/event-stream")) {
        await readSse(response.body, take);
      } else {
        const text = await response.text();
        if (!text) throw new RpcFailure({ code: response.status, message: `HTTP ${response.status} with no body` });
        const parsed = JSON.parse(text);
        for (const message of Array.isArray(parsed) ? parsed : [parsed]) take(message);
      }
      if (!answer) throw new RpcFailure({ code: response.status, message: `no answer to ${method} (HTTP ${response.status})` });
      if (answer.error) throw new RpcFailure(answer.error);
      return answer.result;
    } catch (e) {
      if (controller.signal.aborted) throw new Cancelled(controller.signal.reason || "cancelled");
      throw e;
    } finally {
      this.running.delete(id);
    }
  }

  // Cancel a running request: tell the server (handshake era; 2026-07-28 has no such notification,
  // closing the stream is the cancellation there), then stop reading its stream.
  async cancel(id, reason) {
    const controller = this.running.get(id);
    if (!controller) return;
    if (!this.modern) await this.notify("notifications/cancelled", { requestId: id, reason });
    controller.abort(reason);
  }

  async ping() {
    if (this.modern) throw new RpcFailure({ code: -32601, message: "2026-07-28 has no ping" });
    return this.request("ping");
  }

  // A request of the server's (handshake era, on an SSE stream) or an input request (2026-07-28):
  // the page's answer, or a JSON-RPC error.
  async answer(method, params, id) {
    if (method === "ping") return {};
    return this.hooks.serverRequest(method, params, id);
  }

  onMessage(message, onProgress, token) {
    if (message.method === "notifications/progress" && onProgress && message.params && message.params.progressToken === token) {
      onProgress(message.params);
    }
    if (message.method && message.id !== undefined) {
      this.reply(message);
      return;
    }
    if (message.method === "notifications/cancelled") this.hooks.serverCancelled((message.params || {}).requestId);
    if (message.method) this.hooks.notification(message);
  }

  async reply(message) {
    let reply;
    try {
      reply = { jsonrpc: "2.0", id: message.id, result: await this.answer(message.method, message.params || {}, message.id) };
    } catch (e) {
      reply = { jsonrpc: "2.0", id: message.id, error: e.error || { code: -32603, message: e.message } };
    }
    this.hooks.raw("out", reply);
    fetch(this.endpoint, { method: "POST", headers: this.headers(), body: JSON.stringify(reply) });
  }

  openGetStream() {
    const controller = new AbortController();
    this.getStream = controller;
    fetch(this.endpoint, { method: "GET", headers: Object.assign(this.headers(), { Accept: "text/event-stream" }), signal: controller.signal })
      .then((response) => (response.ok ? readSse(response.body, (m) => { this.hooks.raw("in", m); this.onMessage(m); }) : null))
      .catch(() => {});
  }

  // 2026-07-28 (SB-01..SB-08): one subscriptions/listen stream for the list changes and the
  // subscribed URIs, opened again when the set changes.
  listen(uris) {
    if (this.listenStream) this.listenStream.abort();
    const controller = new AbortController();
    this.listenStream = controller;
    const id = `listen-${this.nextId++}`;
    const params = this.envelope("subscriptions/listen", { notifications: {
      toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true, resourceSubscriptions: [...uris],
    } });
    const msg = { jsonrpc: "2.0", id, method: "subscriptions/listen", params };
    this.hooks.raw("out", msg);
    fetch(this.endpoint, { method: "POST", headers: this.headers("subscriptions/listen", params), body: JSON.stringify(msg), signal: controller.signal })
      .then((response) => readSse(response.body, (m) => { this.hooks.raw("in", m); if (m.method) this.onMessage(m); }))
      .catch(() => {});
  }

  async subscribe(uri, subscribed) {
    if (this.modern) { this.listen(subscribed); return; }
    await this.request("resources/subscribe", { uri });
  }

  async unsubscribe(uri, subscribed) {
    if (this.modern) { this.listen(subscribed); return; }
    await this.request("resources/unsubscribe", { uri });
  }

  async rootsChanged() {
    // a session hears of it; 2026-07-28 has none, and reads the roots with each call's input request
    if (!this.modern && this.sessionId !== null) await this.notify("notifications/roots/list_changed");
  }

  async close() {
    for (const controller of this.running.values()) controller.abort("closed");
    if (this.getStream) this.getStream.abort();
    if (this.listenStream) this.listenStream.abort();
    if (this.sessionId) {
      const headers = this.headers();
      this.sessionId = null;
      try { await fetch(this.endpoint, { method: "DELETE", headers }); } catch (e) { /* gone already */ }
    }
  }

  async listAll(method, key) {
    const items = [];
    let cursor;
    do {
      const result = await this.request(method, cursor ? { cursor } : undefined);
      items.push(...(result[key] || []));
      cursor = result.nextCursor;
    } while (cursor);
    return items;
  }
}

class RpcFailure extends Error {
  constructor(error) { super(error.message); this.error = error; }
}
class SessionLost extends Error {}
class Cancelled extends Error {}

function headerValue(text) {
  return /^[\x20-\x7e]*$/.test(text) && text.trim() === text ? text
    : `=?base64?${btoa(String.fromCharCode(...new TextEncoder().encode(text)))}?=`;
}

async function readSse(body, onMessage) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.search(/\r?\n/)) >= 0) {
      const line = buffer.slice(0, cut);
      buffer = buffer.slice(buffer[cut] === "\r" ? cut + 2 : cut + 1);
      if (line === "") {
        if (data.length) {
          const text = data.join("\n");
          data = [];
          let message;
          try { message = JSON.parse(text); } catch (e) { continue; /* a priming event has no JSON */ }
          onMessage(message);
        }
      } else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
  }
}
