// mcpkit dev: the inspector page. client.js speaks MCP, forms.js builds forms from schemas; this
// file lays out the views and answers what the server asks of the client (elicitation, sampling,
// roots), with the user in the loop. Server data only ever reaches the DOM as textContent.
"use strict";

const pretty = (value) => JSON.stringify(value, null, 2);
const now = () => new Date().toLocaleTimeString([], { hour12: false });
const SKILLS = "io.modelcontextprotocol/skills";

const state = {
  info: null, client: null, selected: {}, subscribed: new Set(), shownResource: null,
  roots: [{ uri: "file:///home/user/project", name: "project" }],
  sampling: { auto: false, text: "A canned answer from the mcpkit dev page." },
};

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
  } else if (message.method === "notifications/subscriptions/acknowledged") {
    feed("notice", `listening: ${JSON.stringify(p.notifications || {})}`);
  } else {
    feed("notice", `${message.method}${message.params ? " " + JSON.stringify(message.params) : ""}`);
    if (message.method === "notifications/resources/updated") resourceUpdated(p.uri);
    if (message.method.endsWith("/list_changed")) refreshLists();
  }
}

// ------------------------------------------------------------------------- what the server asks

// The server's requests wait in the panel above the views until the user answers; each resolves to
// the result the page sends back (or rejects with a JSON-RPC error).
const pending = new Map(); // request id or input key -> {card, reject}

function serverRequest(method, params, id) {
  if (method === "roots/list") {
    feed("notice", `roots/list answered with ${state.roots.length} root(s)`);
    return Promise.resolve({ roots: state.roots.filter((r) => r.uri) });
  }
  if (method === "sampling/createMessage" && state.sampling.auto) {
    feed("notice", "sampling/createMessage answered with the canned answer");
    return Promise.resolve(sampled(state.sampling.text, "mcpkit-dev-canned"));
  }
  if (method !== "elicitation/create" && method !== "sampling/createMessage") {
    return Promise.reject({ error: { code: -32601, message: `Method not found: ${method}` } });
  }
  return new Promise((resolve, reject) => {
    const finish = (settle, value) => {
      pending.delete(id);
      card.remove();
      $("#requests").hidden = pending.size === 0;
      settle(value);
    };
    const card = method === "elicitation/create" ? elicitationCard(params, (v) => finish(resolve, v))
      : samplingCard(params, (v) => finish(resolve, v), (e) => finish(reject, e));
    pending.set(id, { card, cancel: () => finish(reject, { error: { code: -32800, message: "cancelled by the server" } }) });
    $("#requests").append(card);
    $("#requests").hidden = false;
    feed("notice", `${method}: waiting for your answer`);
  });
}

function serverCancelled(id) {
  const entry = pending.get(id);
  if (entry) { feed("notice", `the server withdrew its request ${id}`); entry.cancel(); }
}

function elicitationCard(params, done) {
  const url = params.mode === "url";
  const built = url ? null : buildForm(params.requestedSchema || {}, { prefix: "elicit-" });
  const error = el("p", { class: "verdict err" });
  const answer = (action) => {
    if (action !== "accept" || url) { done({ action }); return; }
    try { done({ action, content: built.values() }); } catch (e) { error.textContent = e.message; }
  };
  return el("div", { class: "request", id: "elicitation" },
    el("h3", { text: url ? "The server asks you to open a URL (elicitation)" : "The server asks (elicitation)" }),
    el("p", { class: "description", text: params.message || "" }),
    url ? urlLink(params.url || "") : built.form, error,
    el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", id: "elicit-accept", text: "Accept", onclick: () => answer("accept") }),
      el("button", { type: "button", id: "elicit-decline", text: "Decline", onclick: () => answer("decline") }),
      el("button", { type: "button", id: "elicit-cancel", text: "Cancel", onclick: () => answer("cancel") })));
}

// EL-04: the URL is shown in full, and a link only for http(s) (never javascript: or data:), opened
// apart from this page (noopener)
function urlLink(url) {
  const safe = /^https?:\/\//i.test(url);
  return el("p", {}, safe ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer", id: "elicit-url", text: url })
    : el("code", { id: "elicit-url", text: url }));
}

function sampled(text, model) {
  return { role: "assistant", content: { type: "text", text }, model, stopReason: "endTurn" };
}

function samplingCard(params, done, fail) {
  const text = el("textarea", { id: "sample-text", rows: "3" });
  text.value = state.sampling.text;
  const model = el("input", { type: "text", id: "sample-model", value: "mcpkit-dev" });
  const messages = (params.messages || []).flatMap((m) => {
    const blocks = Array.isArray(m.content) ? m.content : [m.content];
    return blocks.map((b) => el("pre", { text: `${m.role}: ${b && b.type === "text" ? b.text : JSON.stringify(b)}` }));
  });
  return el("div", { class: "request", id: "sampling" },
    el("h3", { text: "The server asks your model (sampling)" }),
    ...(params.systemPrompt ? [el("p", { class: "description", text: `system: ${params.systemPrompt}` })] : []),
    ...messages,
    el("p", { class: "hint", text: `maxTokens ${params.maxTokens}; answer as the model:` }),
    el("form", { class: "params", onsubmit: (e) => e.preventDefault() },
      el("label", { for: "sample-text", text: "text" }), text, el("label", { for: "sample-model", text: "model" }), model),
    el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", id: "sample-send", text: "Send", onclick: () => done(sampled(text.value, model.value)) }),
      el("button", { type: "button", id: "sample-decline", text: "Decline",
        onclick: () => fail({ error: { code: -1, message: "User rejected sampling request" } }) })));
}

// ------------------------------------------------------------------------------- the client tab

function renderClientView() {
  const rows = $("#roots");
  rows.replaceChildren(...state.roots.map((root, i) => el("li", {},
    el("input", { type: "text", class: "root-uri", value: root.uri, "aria-label": "root URI",
      onchange: (e) => { root.uri = e.target.value; rootsEdited(false); } }),
    el("input", { type: "text", class: "root-name", value: root.name || "", "aria-label": "root name",
      onchange: (e) => { root.name = e.target.value; rootsEdited(false); } }),
    el("button", { type: "button", text: "remove", onclick: () => { state.roots.splice(i, 1); rootsEdited(); } }))));
  $("#sampling-auto").checked = state.sampling.auto;
  $("#sampling-text").value = state.sampling.text;
}

function rootsEdited(render = true) {
  if (render) renderClientView(); // a row added or removed; an edited row keeps its inputs (and the focus)
  // RT-03: a client that declares roots.listChanged tells the server when they change
  if (state.client) state.client.rootsChanged().catch((e) => feed("error", `roots: ${e.message}`));
}

// ------------------------------------------------------------------------------------ connecting

async function connect() {
  delete document.body.dataset.connected;
  if (state.client) await state.client.close();
  for (const entry of [...pending.values()]) entry.cancel();
  state.subscribed.clear();
  const revision = $("#revision").value;
  const client = new McpClient(state.info.endpoint, revision, state.info.modern.includes(revision), {
    raw: logRaw, notification: onNotification, lost: (text) => feed("error", text), serverRequest, serverCancelled,
  });
  state.client = client;
  setStatus("connecting…");
  try {
    await client.connect();
    const info = client.info || {};
    $("#server-name").textContent = `${info.title || info.name || state.info.name} ${info.version || ""}`;
    if (document.body.dataset.server === "down") setStatus("the server did not load (see above)", "err");
    else setStatus(`connected, ${client.revision}${client.sessionId ? ", session " + client.sessionId.slice(0, 8) : ""}`, "ok");
    $("#ping").disabled = client.modern;
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

async function ping() {
  const started = performance.now();
  try {
    await call(() => state.client.ping());
    feed("notice", `ping answered in ${Math.round(performance.now() - started)} ms`);
  } catch (e) { feed("error", `ping: ${e.message}`); }
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
  const skills = SKILLS in (caps.extensions || {}) ? await grab("resources", "skills/list", "skills") : [];
  // a tool the policy's gates hide is not listed; the dev app knows it from the server itself
  const gated = (state.info.gated || []).filter((g) => !client.tools.has(g.name));
  renderList("#tool-list", [...tools.map((t) => ({ key: t.name, name: t.name, sub: t.title || t.description, item: t })),
    ...gated.map((g) => ({ key: g.name, name: g.name, sub: `gated: ${g.reason}`, item: g, kind: "gated" }))], showTool, "tools");
  const resourceItems = resources.map((r) => ({ key: r.uri, name: r.name || r.uri, sub: r.uri, item: r, kind: "resource" }));
  const templateItems = templates.map((t) => ({ key: t.uriTemplate, name: t.name || t.uriTemplate, sub: t.uriTemplate, item: t, kind: "template" }));
  renderList("#resource-list", [...(resourceItems.length ? [{ group: "resources" }] : []), ...resourceItems,
    ...(templateItems.length ? [{ group: "templates" }] : []), ...templateItems], showResource, "resources");
  renderList("#prompt-list", prompts.map((p) => ({ key: p.name, name: p.name, sub: p.description, item: p })), showPrompt, "prompts");
  renderList("#skill-list", skills.map((s) => ({ key: s.uri, name: skillName(s), sub: (s.frontmatter || {}).description, item: s })),
    showSkill, "skills");
  $('#tabs button[data-view="skills"]').hidden = !(SKILLS in (caps.extensions || {}));
  count("#count-tools", tools.length + gated.length);
  count("#count-resources", resources.length + templates.length);
  count("#count-prompts", prompts.length);
  count("#count-skills", skills.length);
}

function renderList(selector, entries, show, kind) {
  const list = $(selector);
  list.replaceChildren();
  if (!entries.length) list.append(el("li", { class: "group", text: `no ${kind}` }));
  for (const entry of entries) {
    if (entry.group) { list.append(el("li", { class: "group", text: entry.group })); continue; }
    const li = el("li", { "data-name": entry.key, class: entry.kind === "gated" ? "gated" : "", onclick: () => {
      list.querySelectorAll("li.selected").forEach((n) => n.classList.remove("selected"));
      li.classList.add("selected");
      state.selected[kind] = entry.key;
      show(entry.item, entry.kind);
    } }, el("div", { class: "name", text: entry.name }), el("div", { class: "sub", text: entry.sub || "" }));
    list.append(li);
    if (state.selected[kind] === entry.key) li.classList.add("selected");
  }
}

// ------------------------------------------------------------------------------------ views

// A manager tool: an `action` selector and one oneOf branch per action, each with its own form;
// an action the gates hide is offered disabled, with its reason.
function actionForms(schema, gatedActions) {
  const branches = (schema.oneOf || []).filter((b) => b && b.properties && b.properties.action && "const" in b.properties.action);
  if (!branches.length || branches.length !== (schema.oneOf || []).length) return null;
  const holder = el("div");
  const names = branches.map((b) => b.properties.action.const);
  const hidden = Object.entries(gatedActions || {}).filter(([name]) => !names.includes(name));
  const select = el("select", { id: "arg-action", name: "action" }, ...names.map((n) => el("option", { value: n, text: n })),
    ...hidden.map(([name, why]) => el("option", { value: name, disabled: true, text: `${name} (gated: ${why})` })));
  let current;
  const show = () => {
    const branch = branches.find((b) => b.properties.action.const === select.value);
    current = buildForm(branch, { skip: ["action"], root: schema });
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

function failure(e) {
  return [el("p", { class: "verdict err", id: "call-verdict", text: "JSON-RPC error" }), el("pre", { text: pretty(e.error || { message: e.message }) })];
}

function showTool(tool, kind) {
  const detail = $("#tool-detail");
  const schema = tool.inputSchema || {};
  const gated = kind === "gated";
  const gatedActions = Object.fromEntries(((state.info.gated_actions || {})[tool.name] || []).map((a) => [a.name, a.reason]));
  const built = (!gated && actionForms(schema, gatedActions))
    || buildForm(schema, { disabled: gated, gatedChoices: { action: Object.entries(gatedActions) } });
  const outcome = el("div", { class: "outcome", id: "tool-outcome" });
  const bar = el("progress", { max: "1", value: "0", hidden: true });
  const run = el("button", { type: "button", class: "primary", id: "call-tool", text: "Call " + tool.name, disabled: gated });
  const stop = el("button", { type: "button", id: "cancel-call", text: "Cancel", hidden: true });
  let running = null;
  stop.addEventListener("click", () => {
    if (running !== null) state.client.cancel(running, "cancelled from the mcpkit dev page");
  });
  run.addEventListener("click", async () => {
    let args;
    try { args = built.values(); } catch (e) { outcome.replaceChildren(el("p", { class: "verdict err", text: e.message })); return; }
    outcome.replaceChildren(el("p", { class: "hint", text: "calling…" }));
    bar.hidden = false; bar.removeAttribute("value");
    stop.hidden = false;
    const started = performance.now();
    try {
      const result = await call(() => state.client.request("tools/call", { name: tool.name, arguments: args }, (p) => {
        if (p.total) { bar.max = p.total; bar.value = p.progress; }
      }, (id) => { running = id; }));
      const ms = Math.round(performance.now() - started);
      const isError = result.isError === true;
      outcome.replaceChildren(
        el("p", { class: "verdict " + (isError ? "err" : "ok"), id: "call-verdict", text: (isError ? "isError: the tool reported an error" : "result") + ` · ${ms} ms` }),
        ...section("content", ...renderContent(result.content)),
        ...("structuredContent" in result ? section("structuredContent", el("pre", { id: "structured", text: pretty(result.structuredContent) })) : []),
        ...section("envelope (the whole result)", el("pre", { text: pretty(result) })),
      );
    } catch (e) {
      if (e instanceof Cancelled) {
        outcome.replaceChildren(el("p", { class: "verdict cancelled", id: "call-verdict", text: `cancelled · request ${running}` }));
        feed("notice", `${tool.name}: request ${running} cancelled`);
      } else outcome.replaceChildren(...failure(e));
    } finally { bar.hidden = true; stop.hidden = true; running = null; }
  });
  detail.replaceChildren(
    el("h2", { text: tool.name }),
    ...(gated ? [el("p", { class: "gated-reason", id: "gated-reason", text: `Gated: not listed or callable in the current configuration: ${tool.reason}` })] : []),
    el("p", { class: "description", text: [tool.title, tool.description].filter(Boolean).join(" — ") }),
    badges(tool.annotations),
    built.form,
    el("div", { class: "actions" }, run, stop, bar),
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

// completion/complete for one argument of a prompt or template (CP-01..CP-03), with the other
// arguments filled so far as its context
function completer(ref, values) {
  if (!("completions" in (state.client.capabilities || {}))) return null;
  return async (name, value) => {
    let filled = {};
    try { filled = values() || {}; } catch (e) { /* no form yet, or a field not valid yet: no context */ }
    const others = Object.fromEntries(Object.entries(filled).filter(([k, v]) => k !== name && typeof v === "string"));
    const params = { ref, argument: { name, value } };
    if (Object.keys(others).length) params.context = { arguments: others };
    const result = await call(() => state.client.request("completion/complete", params));
    const completion = result.completion || {};
    const values = (completion.values || []).map(String);
    values.more = completion.hasMore === true || (completion.total || 0) > values.length;
    return values;
  };
}

async function readInto(outcome, uri) {
  try {
    const result = await call(() => state.client.request("resources/read", { uri }));
    outcome.replaceChildren(...(result.contents || []).flatMap((c) => section(`${c.uri} ${c.mimeType || ""}`,
      "text" in c ? el("pre", { class: "resource-text", text: c.text })
        : (c.mimeType || "").startsWith("image/") ? el("img", { src: `data:${c.mimeType};base64,${c.blob}`, alt: c.uri })
          : el("pre", { text: `${Math.floor((c.blob || "").length * 3 / 4)} bytes of binary content` }))),
    ...section("envelope (the whole result)", el("pre", { text: pretty(result) })));
  } catch (e) {
    outcome.replaceChildren(...failure(e));
  }
}

function resourceUpdated(uri) {
  const shown = state.shownResource;
  if (!shown || !state.subscribed.has(shown.uri) || !(uri === shown.uri || uri.startsWith(shown.uri))) return;
  shown.updates += 1;
  $("#res-updates").textContent = `updated ${shown.updates}× (last at ${now()}), read again`;
  readInto(shown.outcome, shown.uri);
}

function subscribeButton(uri) {
  const caps = (state.client.capabilities || {}).resources || {};
  if (!caps.subscribe) return null;
  const button = el("button", { type: "button", id: "subscribe" });
  const label = () => { button.textContent = state.subscribed.has(uri) ? "Unsubscribe" : "Subscribe"; };
  button.addEventListener("click", async () => {
    const on = !state.subscribed.has(uri);
    if (on) state.subscribed.add(uri); else state.subscribed.delete(uri);
    try {
      await call(() => (on ? state.client.subscribe(uri, state.subscribed) : state.client.unsubscribe(uri, state.subscribed)));
      feed("notice", `${on ? "subscribed to" : "unsubscribed from"} ${uri}`);
    } catch (e) {
      if (on) state.subscribed.delete(uri); else state.subscribed.add(uri);
      feed("error", `subscribe ${uri}: ${e.message}`);
    }
    label();
  });
  label();
  return button;
}

function showResource(item, kind) {
  const detail = $("#resource-detail");
  const outcome = el("div", { class: "outcome" });
  state.shownResource = null;
  if (kind === "template") {
    const schema = { properties: Object.fromEntries(templateVariables(item.uriTemplate).map((n) => [n, { type: "string" }])) };
    let built;
    built = buildForm(schema, { prefix: "res-", complete: completer({ type: "ref/resource", uri: item.uriTemplate }, () => built.values()) });
    detail.replaceChildren(el("h2", { text: item.uriTemplate }), el("p", { class: "description", text: item.description || item.name || "" }),
      built.form, el("div", { class: "actions" }, el("button", { type: "button", class: "primary", text: "Read",
        onclick: () => readInto(outcome, expand(item.uriTemplate, built.values())) })), outcome);
  } else {
    state.shownResource = { uri: item.uri, outcome, updates: 0 };
    detail.replaceChildren(el("h2", { text: item.uri }), el("p", { class: "description", text: [item.name, item.description].filter(Boolean).join(" — ") }),
      el("div", { class: "actions" }, el("button", { type: "button", class: "primary", text: "Read", onclick: () => readInto(outcome, item.uri) }),
        subscribeButton(item.uri), el("span", { class: "hint", id: "res-updates" })), outcome);
    readInto(outcome, item.uri);
  }
}

async function showPrompt(prompt) {
  const detail = $("#prompt-detail");
  detail.replaceChildren(el("h2", { text: prompt.name }), el("p", { class: "hint", text: "asking which values the arguments take…" }));
  const ref = { type: "ref/prompt", name: prompt.name };
  const schema = { properties: {}, required: [] };
  let built = null;
  const complete = completer(ref, () => built && built.values());
  for (const a of prompt.arguments || []) {
    schema.properties[a.name] = { type: "string", description: a.description };
    if (a.required) schema.required.push(a.name);
    // an argument whose completion offers every value up front (a Literal, an enum) is a choice
    if (complete) {
      let offered = [];
      try { offered = await complete(a.name, ""); } catch (e) { /* none */ }
      if (offered.length && !offered.more) schema.properties[a.name].enum = [...offered];
    }
  }
  if (state.selected.prompts !== prompt.name) return; // another prompt was picked while completion answered
  built = buildForm(schema, { prefix: "prompt-", complete });
  const outcome = el("div", { class: "outcome" });
  const get = async () => {
    try {
      const result = await call(() => state.client.request("prompts/get", { name: prompt.name, arguments: built.values() }));
      outcome.replaceChildren(...(result.messages || []).flatMap((m) => section(m.role, ...renderContent([m.content]))),
        ...section("envelope (the whole result)", el("pre", { text: pretty(result) })));
    } catch (e) {
      outcome.replaceChildren(...failure(e));
    }
  };
  detail.replaceChildren(el("h2", { text: prompt.name }), el("p", { class: "description", text: prompt.description || "" }),
    built.form, el("div", { class: "actions" }, el("button", { type: "button", class: "primary", id: "get-prompt", text: "Get prompt", onclick: get })), outcome);
}

function skillName(entry) {
  return (entry.frontmatter || {}).name || entry.uri.replace(/^skill:\/\//, "").replace(/\/SKILL\.md$/, "");
}

// A skill (the Skills extension, SEP-2640): its frontmatter, its SKILL.md, and each of its files
function showSkill(entry) {
  const detail = $("#skill-detail");
  const outcome = el("div", { class: "outcome", id: "skill-file" });
  const files = el("ul", { class: "files" }, ...(entry.resources || []).map((r) => el("li", {},
    el("button", { type: "button", class: "link", "data-uri": r.uri, text: r.uri.slice(entry.uri.length - "SKILL.md".length) || r.uri,
      onclick: () => readInto(outcome, r.uri) }),
    el("span", { class: "hint", text: ` ${r.size} bytes · ${r.digest}` }))));
  detail.replaceChildren(el("h2", { text: skillName(entry) }), el("p", { class: "description", text: (entry.frontmatter || {}).description || "" }),
    ...section("frontmatter", el("pre", { text: pretty(entry.frontmatter || {}) })), ...section("files", files), outcome);
  readInto(outcome, entry.uri);
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
  $("#ping").addEventListener("click", ping);
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => selectView(b.dataset.view)));
  $("#clear-feed").addEventListener("click", () => { $("#feed").replaceChildren(); count("#count-feed"); });
  $("#clear-raw").addEventListener("click", () => { $("#raw").replaceChildren(); count("#count-raw"); });
  $("#add-root").addEventListener("click", () => { state.roots.push({ uri: "file:///", name: "" }); rootsEdited(); });
  $("#sampling-auto").addEventListener("change", (e) => { state.sampling.auto = e.target.checked; });
  $("#sampling-text").addEventListener("input", (e) => { state.sampling.text = e.target.value; });
  renderClientView();
  window.addEventListener("beforeunload", () => state.client && state.client.close());
  if (state.info.attached) $("#attached").textContent = `attached to ${state.info.attached}`;
  await connect();
  watchServer();
  document.body.dataset.ready = "true";
}

start();
