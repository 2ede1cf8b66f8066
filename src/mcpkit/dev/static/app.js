// mcpkit dev: a small MCP inspector. It speaks Streamable HTTP to the server on this origin, as any
// client does: the handshake revisions (initialize, a session, a GET stream for notifications) or
// 2026-07-28 (server/discover, _meta and Mcp-* headers on every request, no session).
"use strict";

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
};
const pretty = (value) => JSON.stringify(value, null, 2);
const now = () => new Date().toLocaleTimeString([], { hour12: false });

// ------------------------------------------------------------------------------------ the client

const CLIENT_INFO = { name: "mcpkit-dev-inspector", version: "1" };
const META = {
  version: "io.modelcontextprotocol/protocolVersion",
  caps: "io.modelcontextprotocol/clientCapabilities",
  info: "io.modelcontextprotocol/clientInfo",
};
const NAME_PARAM = { "tools/call": "name", "prompts/get": "name", "resources/read": "uri" };

class McpClient {
  constructor(endpoint, revision, modern, hooks) {
    this.endpoint = endpoint;
    this.revision = revision;
    this.modern = modern;
    this.hooks = hooks; // {raw(dir, msg), notification(msg), lost(text)}
    this.sessionId = null;
    this.nextId = 1;
    this.getStream = null;
    this.tools = new Map();
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
      [META.version]: this.revision, [META.caps]: {}, [META.info]: CLIENT_INFO,
    });
    return Object.assign({}, params, { _meta: meta });
  }

  async connect() {
    if (this.modern) {
      const result = await this.request("server/discover");
      this.info = (result._meta || {})["io.modelcontextprotocol/serverInfo"] || result.serverInfo || {};
      this.capabilities = result.capabilities || {};
      return result;
    }
    const result = await this.request("initialize", {
      protocolVersion: this.revision, capabilities: {}, clientInfo: CLIENT_INFO,
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

  async request(method, params, onProgress) {
    const id = this.nextId++;
    let sent = this.envelope(method, params);
    if (onProgress) sent = Object.assign({}, sent, { _meta: Object.assign({}, (sent || {})._meta, { progressToken: `p${id}` }) });
    const msg = { jsonrpc: "2.0", id, method };
    if (sent !== undefined) msg.params = sent;
    this.hooks.raw("out", msg);
    const response = await fetch(this.endpoint, {
      method: "POST", headers: this.headers(method, params), body: JSON.stringify(msg),
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
  }

  onMessage(message, onProgress, token) {
    if (message.method === "notifications/progress" && onProgress && message.params && message.params.progressToken === token) {
      onProgress(message.params);
    }
    if (message.method && message.id !== undefined) {
      // a request from the server: this inspector declared no client capabilities
      const reply = { jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "The inspector does not handle " + message.method } };
      this.hooks.raw("out", reply);
      fetch(this.endpoint, { method: "POST", headers: this.headers(), body: JSON.stringify(reply) });
      return;
    }
    if (message.method) this.hooks.notification(message);
  }

  openGetStream() {
    const controller = new AbortController();
    this.getStream = controller;
    fetch(this.endpoint, { method: "GET", headers: Object.assign(this.headers(), { Accept: "text/event-stream" }), signal: controller.signal })
      .then((response) => (response.ok ? readSse(response.body, (m) => { this.hooks.raw("in", m); this.onMessage(m); }) : null))
      .catch(() => {});
  }

  async close() {
    if (this.getStream) this.getStream.abort();
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
          try { onMessage(JSON.parse(text)); } catch (e) { /* a priming event has no JSON */ }
        }
      } else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
  }
}

// ------------------------------------------------------------------------------------ the page

const state = { info: null, client: null, selected: {} };

function setStatus(text, kind) {
  const status = $("#status");
  status.textContent = text;
  status.className = "status " + (kind || "");
}

function count(id, n) { $(id).textContent = n === undefined ? "" : `(${n})`; }

function logRaw(dir, message) {
  const list = $("#raw");
  list.append(el("li", {}, el("span", { class: "time", text: now() }),
    el("span", { class: dir, text: dir === "out" ? "→ " : "← " }), JSON.stringify(message)));
  count("#count-raw", list.children.length);
  list.scrollTop = list.scrollHeight;
}

function feed(kind, text) {
  const list = $("#feed");
  list.append(el("li", {}, el("span", { class: "time", text: now() }), el("span", { class: "kind " + kind, text: kind }), text));
  count("#count-feed", list.children.length);
  list.scrollTop = list.scrollHeight;
}

function onNotification(message) {
  const p = message.params || {};
  if (message.method === "notifications/message") {
    const data = typeof p.data === "string" ? p.data : JSON.stringify(p.data);
    feed("log", `[${p.level}]${p.logger ? " " + p.logger : ""} ${data}`);
  } else if (message.method === "notifications/progress") {
    feed("progress", `${p.progress}${p.total !== undefined ? "/" + p.total : ""}${p.message ? " " + p.message : ""}  (token ${p.progressToken})`);
  } else {
    feed("notice", `${message.method}${message.params ? " " + JSON.stringify(message.params) : ""}`);
    if (message.method.endsWith("/list_changed")) refreshLists();
  }
}

async function connect() {
  delete document.body.dataset.connected;
  if (state.client) await state.client.close();
  const revision = $("#revision").value;
  const client = new McpClient(state.info.endpoint, revision, state.info.modern.includes(revision), {
    raw: logRaw, notification: onNotification, lost: (text) => feed("error", text),
  });
  state.client = client;
  setStatus("connecting…");
  try {
    await client.connect();
    const info = client.info || {};
    $("#server-name").textContent = `${info.title || info.name || state.info.name} ${info.version || ""}`;
    if (document.body.dataset.server === "down") setStatus("the server did not load (see above)", "err");
    else setStatus(`connected, ${client.revision}${client.sessionId ? ", session " + client.sessionId.slice(0, 8) : ""}`, "ok");
    feed("notice", `connected with revision ${client.revision}`);
    await refreshLists();
    document.body.dataset.connected = client.revision; // the lists are those of this connection
  } catch (e) {
    setStatus(`not connected: ${e.message}`, "err");
    feed("error", `connect: ${e.message}`);
  }
}

async function call(fn) {
  // one retry after the server restarted (mcpkit dev --reload) and forgot our session
  try { return await fn(); } catch (e) {
    if (!(e instanceof SessionLost)) throw e;
    feed("notice", "the session ended (server restarted?): reconnecting");
    await connect();
    return fn();
  }
}

async function refreshLists() {
  const client = state.client;
  const caps = client.capabilities || {};
  const grab = async (cap, method, key) => {
    if (!(cap in caps)) return [];
    try { return await call(() => state.client.listAll(method, key)); } catch (e) {
      feed("error", `${method}: ${e.message}`);
      return [];
    }
  };
  const tools = await grab("tools", "tools/list", "tools");
  client.tools = new Map(tools.map((t) => [t.name, t]));
  const resources = await grab("resources", "resources/list", "resources");
  const templates = await grab("resources", "resources/templates/list", "resourceTemplates");
  const prompts = await grab("prompts", "prompts/list", "prompts");
  renderList("#tool-list", tools.map((t) => ({ key: t.name, name: t.name, sub: t.title || t.description, item: t })), showTool, "tools");
  const resourceItems = resources.map((r) => ({ key: r.uri, name: r.name || r.uri, sub: r.uri, item: r, kind: "resource" }));
  const templateItems = templates.map((t) => ({ key: t.uriTemplate, name: t.name || t.uriTemplate, sub: t.uriTemplate, item: t, kind: "template" }));
  renderList("#resource-list", [...(resourceItems.length ? [{ group: "resources" }] : []), ...resourceItems,
    ...(templateItems.length ? [{ group: "templates" }] : []), ...templateItems], showResource, "resources");
  renderList("#prompt-list", prompts.map((p) => ({ key: p.name, name: p.name, sub: p.description, item: p })), showPrompt, "prompts");
  count("#count-tools", tools.length);
  count("#count-resources", resources.length + templates.length);
  count("#count-prompts", prompts.length);
}

function renderList(selector, entries, show, kind) {
  const list = $(selector);
  list.replaceChildren();
  if (!entries.length) list.append(el("li", { class: "group", text: `no ${kind}` }));
  for (const entry of entries) {
    if (entry.group) { list.append(el("li", { class: "group", text: entry.group })); continue; }
    const li = el("li", { "data-name": entry.key, onclick: () => {
      list.querySelectorAll("li.selected").forEach((n) => n.classList.remove("selected"));
      li.classList.add("selected");
      state.selected[kind] = entry.key;
      show(entry.item, entry.kind);
    } }, el("div", { class: "name", text: entry.name }), el("div", { class: "sub", text: entry.sub || "" }));
    list.append(li);
    if (state.selected[kind] === entry.key) li.classList.add("selected");
  }
}

// ------------------------------------------------------------------------------------ forms

function types(schema) {
  if (!schema || typeof schema !== "object") return [];
  if (typeof schema.type === "string") return [schema.type];
  if (Array.isArray(schema.type)) return schema.type;
  if (Array.isArray(schema.enum)) return [...new Set(schema.enum.map((v) => (v === null ? "null" : typeof v === "number" ? "number" : typeof v)))];
  const branches = schema.anyOf || schema.oneOf || [];
  return [...new Set(branches.flatMap(types))];
}

function enumOf(schema) {
  if (Array.isArray(schema.enum)) return schema.enum;
  const branches = schema.anyOf || schema.oneOf;
  if (Array.isArray(branches) && branches.every((b) => b && (Array.isArray(b.enum) || "const" in b))) {
    return branches.flatMap((b) => b.enum || [b.const]);
  }
  return null;
}

// One input per property; read() gives the value by the property's type, or undefined when empty.
function field(name, schema, required, prefix) {
  const kinds = types(schema);
  const choices = enumOf(schema);
  const id = `${prefix}${name}`;
  let input;
  let read;
  if (choices) {
    input = el("select", { id, name }, ...(required ? [] : [el("option", { value: "", text: "" })]),
      ...choices.map((c, i) => el("option", { value: String(i), text: JSON.stringify(c) })));
    if ("default" in schema) input.value = String(choices.findIndex((c) => JSON.stringify(c) === JSON.stringify(schema.default)));
    read = () => (input.value === "" ? undefined : choices[Number(input.value)]);
  } else if (kinds.length === 1 && kinds[0] === "boolean") {
    input = el("input", { id, name, type: "checkbox" });
    input.checked = schema.default === true;
    read = () => input.checked;
  } else if (kinds.length === 1 && (kinds[0] === "integer" || kinds[0] === "number")) {
    input = el("input", { id, name, type: "number", step: kinds[0] === "integer" ? "1" : "any", placeholder: "default" in schema ? String(schema.default) : "" });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else if (kinds.length === 1 && kinds[0] === "string") {
    input = el("input", { id, name, type: "text", placeholder: "default" in schema ? String(schema.default) : "" });
    read = () => (input.value === "" ? undefined : input.value);
  } else {
    input = el("textarea", { id, name, placeholder: "JSON" + ("default" in schema ? ", default " + JSON.stringify(schema.default) : "") });
    read = () => {
      if (input.value.trim() === "") return undefined;
      try { return JSON.parse(input.value); } catch (e) { throw new Error(`${name}: not valid JSON (${e.message})`); }
    };
  }
  const label = el("label", { for: id }, name, required ? el("span", { class: "req", text: " *" }) : null);
  const kindText = kinds.join(" | ") || "any";
  const help = el("div", { class: "help", text: [kindText, schema.description].filter(Boolean).join(" · ") });
  return { nodes: [label, input, help], read, name };
}

// prefix: element ids are unique across views (arg- for tools, res- for resources, prompt- for prompts)
function buildForm(schema, skip = [], prefix = "arg-") {
  const form = el("form", { class: "params", onsubmit: (e) => e.preventDefault() });
  const required = new Set(schema.required || []);
  const fields = [];
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    if (skip.includes(name)) continue;
    const f = field(name, prop || {}, required.has(name), prefix);
    fields.push(f);
    form.append(...f.nodes);
  }
  const values = () => {
    const out = {};
    for (const f of fields) {
      const v = f.read();
      if (v !== undefined) out[f.name] = v;
    }
    return out;
  };
  return { form, values, empty: fields.length === 0 };
}

// A manager tool: an `action` selector and one oneOf branch per action, each with its own form.
function actionForms(schema) {
  const branches = (schema.oneOf || []).filter((b) => b && b.properties && b.properties.action && "const" in b.properties.action);
  if (!branches.length || branches.length !== (schema.oneOf || []).length) return null;
  const holder = el("div");
  const select = el("select", { id: "arg-action", name: "action" }, ...branches.map((b) => el("option", { value: b.properties.action.const, text: b.properties.action.const })));
  let current;
  const show = () => {
    const branch = branches.find((b) => b.properties.action.const === select.value);
    current = buildForm(branch, ["action"]);
    holder.replaceChildren(el("p", { class: "description", text: branch.description || "" }), current.form);
  };
  select.addEventListener("change", show);
  show();
  const wrap = el("div", {}, el("form", { class: "params", onsubmit: (e) => e.preventDefault() }, el("label", { for: "arg-action", text: "action" }), select), holder);
  return { form: wrap, values: () => Object.assign({ action: select.value }, current.values()) };
}

function badges(annotations) {
  const a = annotations || {};
  const names = [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"], ["openWorldHint", "open-world"]];
  return el("div", { class: "badges" }, ...names.filter(([k]) => a[k]).map(([, n]) => el("span", { text: n })));
}

function section(title, ...content) { return [el("h3", { text: title }), ...content]; }

function renderContent(blocks) {
  const out = [];
  for (const block of blocks || []) {
    if (block.type === "text") out.push(el("pre", { class: "content-text", text: block.text }));
    else if (block.type === "image") out.push(el("img", { src: `data:${block.mimeType};base64,${block.data}`, alt: "image content" }));
    else if (block.type === "audio") out.push(el("audio", { controls: true, src: `data:${block.mimeType};base64,${block.data}` }));
    else out.push(el("pre", { text: pretty(block) }));
  }
  return out;
}

// ------------------------------------------------------------------------------------ views

function showTool(tool) {
  const detail = $("#tool-detail");
  const schema = tool.inputSchema || {};
  const built = actionForms(schema) || buildForm(schema);
  const outcome = el("div", { class: "outcome", id: "tool-outcome" });
  const bar = el("progress", { max: "1", value: "0", hidden: true });
  const run = el("button", { type: "button", class: "primary", id: "call-tool", text: "Call " + tool.name });
  run.addEventListener("click", async () => {
    let args;
    try { args = built.values(); } catch (e) { outcome.replaceChildren(el("p", { class: "verdict err", text: e.message })); return; }
    outcome.replaceChildren(el("p", { class: "hint", text: "calling…" }));
    bar.hidden = false; bar.removeAttribute("value");
    const started = performance.now();
    try {
      const result = await call(() => state.client.request("tools/call", { name: tool.name, arguments: args }, (p) => {
        if (p.total) { bar.max = p.total; bar.value = p.progress; }
      }));
      const ms = Math.round(performance.now() - started);
      const isError = result.isError === true;
      outcome.replaceChildren(
        el("p", { class: "verdict " + (isError ? "err" : "ok"), id: "call-verdict", text: (isError ? "isError: the tool reported an error" : "result") + ` · ${ms} ms` }),
        ...section("content", ...renderContent(result.content)),
        ...("structuredContent" in result ? section("structuredContent", el("pre", { id: "structured", text: pretty(result.structuredContent) })) : []),
        ...section("envelope (the whole result)", el("pre", { text: pretty(result) })),
      );
    } catch (e) {
      outcome.replaceChildren(el("p", { class: "verdict err", id: "call-verdict", text: "JSON-RPC error" }),
        el("pre", { text: pretty(e.error || { message: e.message }) }));
    } finally { bar.hidden = true; }
  });
  detail.replaceChildren(
    el("h2", { text: tool.name }),
    el("p", { class: "description", text: [tool.title, tool.description].filter(Boolean).join(" — ") }),
    badges(tool.annotations),
    built.form,
    el("div", { class: "actions" }, run, bar),
    outcome,
    ...section("inputSchema", el("pre", { text: pretty(schema) })),
    ...(tool.outputSchema ? section("outputSchema", el("pre", { text: pretty(tool.outputSchema) })) : []),
  );
}

function templateVariables(template) {
  const names = [];
  for (const m of template.matchAll(/\{([^}]+)\}/g)) {
    for (const part of m[1].replace(/^[+#./;?&]/, "").split(",")) names.push(part.replace(/[*]$|:\d+$/, ""));
  }
  return names;
}

function expand(template, values) {
  return template.replace(/\{([+#./;?&]?)([^}]+)\}/g, (_, op, names) => {
    const parts = names.split(",").map((n) => n.replace(/[*]$|:\d+$/, "")).filter((n) => values[n] !== undefined && values[n] !== "");
    const enc = (v) => (op === "+" || op === "#" ? encodeURI(v) : encodeURIComponent(v));
    if (!parts.length) return "";
    const joined = parts.map((n) => (op === "?" || op === "&" || op === ";" ? `${n}=${enc(values[n])}` : enc(values[n])));
    const sep = { "": ",", "+": ",", "#": ",", ".": ".", "/": "/", ";": ";", "?": "&", "&": "&" }[op];
    return ({ "": "", "+": "", "#": "#", ".": ".", "/": "/", ";": ";", "?": "?", "&": "&" }[op]) + joined.join(sep);
  });
}

function showResource(item, kind) {
  const detail = $("#resource-detail");
  const outcome = el("div", { class: "outcome" });
  const read = async (uri) => {
    outcome.replaceChildren(el("p", { class: "hint", text: `reading ${uri}…` }));
    try {
      const result = await call(() => state.client.request("resources/read", { uri }));
      outcome.replaceChildren(...(result.contents || []).flatMap((c) => section(`${c.uri} ${c.mimeType || ""}`,
        "text" in c ? el("pre", { text: c.text })
          : (c.mimeType || "").startsWith("image/") ? el("img", { src: `data:${c.mimeType};base64,${c.blob}`, alt: c.uri })
            : el("pre", { text: `${Math.floor((c.blob || "").length * 3 / 4)} bytes of binary content` }))),
      ...section("envelope (the whole result)", el("pre", { text: pretty(result) })));
    } catch (e) {
      outcome.replaceChildren(el("p", { class: "verdict err", text: "JSON-RPC error" }), el("pre", { text: pretty(e.error || { message: e.message }) }));
    }
  };
  if (kind === "template") {
    const schema = { properties: Object.fromEntries(templateVariables(item.uriTemplate).map((n) => [n, { type: "string" }])) };
    const built = buildForm(schema, [], "res-");
    detail.replaceChildren(el("h2", { text: item.uriTemplate }), el("p", { class: "description", text: item.description || item.name || "" }),
      built.form, el("div", { class: "actions" }, el("button", { type: "button", class: "primary", text: "Read", onclick: () => read(expand(item.uriTemplate, built.values())) })), outcome);
  } else {
    detail.replaceChildren(el("h2", { text: item.uri }), el("p", { class: "description", text: [item.name, item.description].filter(Boolean).join(" — ") }),
      el("div", { class: "actions" }, el("button", { type: "button", class: "primary", text: "Read", onclick: () => read(item.uri) })), outcome);
    read(item.uri);
  }
}

function showPrompt(prompt) {
  const detail = $("#prompt-detail");
  const schema = { properties: {}, required: [] };
  for (const a of prompt.arguments || []) {
    schema.properties[a.name] = { type: "string", description: a.description };
    if (a.required) schema.required.push(a.name);
  }
  const built = buildForm(schema, [], "prompt-");
  const outcome = el("div", { class: "outcome" });
  const get = async () => {
    try {
      const result = await call(() => state.client.request("prompts/get", { name: prompt.name, arguments: built.values() }));
      outcome.replaceChildren(...(result.messages || []).flatMap((m) => section(m.role, ...renderContent([m.content]))),
        ...section("envelope (the whole result)", el("pre", { text: pretty(result) })));
    } catch (e) {
      outcome.replaceChildren(el("p", { class: "verdict err", text: "JSON-RPC error" }), el("pre", { text: pretty(e.error || { message: e.message }) }));
    }
  };
  detail.replaceChildren(el("h2", { text: prompt.name }), el("p", { class: "description", text: prompt.description || "" }),
    built.form, el("div", { class: "actions" }, el("button", { type: "button", class: "primary", id: "get-prompt", text: "Get prompt", onclick: get })), outcome);
}

// ------------------------------------------------------------------------------------ the server behind

// /dev/events: the state of the server behind this page (mcpkit dev --reload restarts it, the
// page's own port and session stay). A restart shows the new lists at once; a server that did not
// load shows why (file:line and message) until a change fixes it.
function watchServer() {
  const events = new EventSource("/dev/events");
  let first = true;
  events.onmessage = (event) => {
    const s = JSON.parse(event.data);
    const banner = $("#load-error");
    document.body.dataset.server = s.state;
    if (s.state === "down") {
      banner.textContent = `The server did not load: ${s.error}`;
      banner.hidden = false;
      setStatus("the server did not load (see above)", "err");
      feed("error", `the server did not load: ${s.error}`);
    } else if (s.state === "restarting" || s.state === "starting") {
      setStatus(`restarting the server${s.changed ? " (" + s.changed.join(", ") + " changed)" : ""}…`);
    } else if (s.state === "up") {
      banner.hidden = true;
      banner.textContent = "";
      if (!first) {
        feed("notice", "the server restarted: reconnecting");
        connect();
      }
    }
    first = false;
  };
}

// ------------------------------------------------------------------------------------ start

function selectView(name) {
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.view === name));
  document.querySelectorAll(".view").forEach((v) => v.classList.toggle("active", v.id === `view-${name}`));
}

async function start() {
  state.info = await (await fetch("/dev/info.json")).json();
  const select = $("#revision");
  for (const r of state.info.revisions) select.append(el("option", { value: r, text: r + (state.info.modern.includes(r) ? " (no handshake)" : "") }));
  select.value = state.info.latest;
  select.addEventListener("change", connect);
  $("#reconnect").addEventListener("click", connect);
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => selectView(b.dataset.view)));
  $("#clear-feed").addEventListener("click", () => { $("#feed").replaceChildren(); count("#count-feed"); });
  $("#clear-raw").addEventListener("click", () => { $("#raw").replaceChildren(); count("#count-raw"); });
  window.addEventListener("beforeunload", () => state.client && state.client.close());
  if (state.info.attached) $("#attached").textContent = `attached to ${state.info.attached}`;
  await connect();
  watchServer();
  document.body.dataset.ready = "true";
}

start();
