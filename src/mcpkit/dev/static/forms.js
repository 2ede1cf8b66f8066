// mcpkit dev: forms from JSON Schema (a tool's inputSchema, an elicitation's requestedSchema, a
// prompt's or template's arguments). Every node is built with textContent: nothing the server sends
// is parsed as HTML.
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

//: $ref chains deeper than this (a recursive model) are edited as JSON
const MAX_DEPTH = 6;

// The schema a local $ref names (pydantic's "#/$defs/Model", draft-07's "#/definitions/Model"),
// its own keywords (description, default, title) kept over the target's.
function resolve(schema, root) {
  let seen = 0;
  while (schema && typeof schema.$ref === "string" && schema.$ref.startsWith("#/") && seen++ < MAX_DEPTH) {
    let target = root;
    for (const part of schema.$ref.slice(2).split("/")) target = target && target[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    if (!target) break;
    const { $ref, ...own } = schema;
    schema = Object.assign({ "x-model": $ref.split("/").pop() }, target, own);
  }
  return schema || {};
}

// A nullable schema ({"type": ["string", "null"]}, or an anyOf with a {"type": "null"} branch, as
// `str | None` and `Model | None` give) is its other branch, optional.
function unwrapNull(schema, root) {
  if (Array.isArray(schema.type) && schema.type.includes("null") && schema.type.length === 2) {
    return [Object.assign({}, schema, { type: schema.type.find((t) => t !== "null") }), true];
  }
  for (const key of ["anyOf", "oneOf"]) {
    const branches = schema[key];
    if (Array.isArray(branches) && branches.length === 2 && branches.some((b) => b && b.type === "null")) {
      const { [key]: _, ...own } = schema;
      const other = resolve(branches.find((b) => !(b && b.type === "null")), root);
      return [Object.assign({}, other, own), true];
    }
  }
  return [schema, false];
}

function types(schema) {
  if (!schema || typeof schema !== "object") return [];
  if (typeof schema.type === "string") return [schema.type];
  if (Array.isArray(schema.type)) return schema.type;
  const kind = (v) => (v === null ? "null" : typeof v === "number" ? "number" : typeof v);
  if (Array.isArray(schema.enum)) return [...new Set(schema.enum.map(kind))];
  if ("const" in schema) return [kind(schema.const)];
  if (schema.properties) return ["object"];
  const branches = schema.anyOf || schema.oneOf || [];
  return [...new Set(branches.flatMap(types))];
}

function enumOf(schema) {
  if (Array.isArray(schema.enum)) return schema.enum;
  if ("const" in schema) return [schema.const];
  const branches = schema.anyOf || schema.oneOf;
  if (Array.isArray(branches) && branches.length && branches.every((b) => b && (Array.isArray(b.enum) || "const" in b))) {
    return branches.flatMap((b) => b.enum || [b.const]);
  }
  return null;
}

// an enum value as the user reads it: a string bare, anything else as JSON
const shown = (value) => (typeof value === "string" ? value : JSON.stringify(value));

// the labels of a titled enum (EL-02, 2025-11-25: oneOf/anyOf of {const, title}; the legacy
// enumNames), else the values themselves
function labelsOf(schema, choices) {
  const branches = schema.oneOf || schema.anyOf;
  if (Array.isArray(branches) && branches.every((b) => b && "const" in b)) return branches.map((b) => b.title || shown(b.const));
  if (Array.isArray(schema.enumNames) && schema.enumNames.length === choices.length) return schema.enumNames.map(String);
  return choices.map(shown);
}

// a multi-select: an array whose items are an enum (EL-02)
function multiOf(schema, root) {
  if (types(schema)[0] !== "array" || !schema.items) return null;
  const items = resolve(schema.items, root);
  const choices = enumOf(items);
  return choices ? [items, choices] : null;
}

// One input (or a fieldset, for an object with properties) per property; read() gives the value by
// the property's type, or undefined when left empty.
function field(path, raw, required, opts, depth) {
  const name = path[path.length - 1];
  const id = opts.prefix + path.join("-");
  const [schema, nullable] = unwrapNull(resolve(raw || {}, opts.root), opts.root);
  const kinds = types(schema);
  const choices = enumOf(schema);
  const kindText = (schema["x-model"] || kinds.join(" | ") || "any") + (nullable ? " | null" : "");
  const label = el("label", { for: id }, name, required ? el("span", { class: "req", text: " *" }) : null);
  const help = el("div", { class: "help", text: [kindText, schema.description].filter(Boolean).join(" · ") });
  const empty = () => (required && nullable ? null : undefined);
  let input;
  let read;
  let extra = null;
  if (kinds.length === 1 && kinds[0] === "object" && schema.properties && depth < MAX_DEPTH) {
    const inner = fields(schema, Object.assign({}, opts), path, depth + 1);
    const box = el("fieldset", { id, class: "nested" }, el("legend", { text: kindText }), ...inner.nodes);
    read = () => {
      const value = inner.values();
      return Object.keys(value).length || (required && !nullable) ? value : empty();
    };
    const note = schema.description ? el("div", { class: "help", text: schema.description }) : null;
    return { nodes: [label, box, note], read, name };
  }
  const multi = multiOf(schema, opts.root);
  if (multi) {
    const [items, values] = multi;
    const labels = labelsOf(items, values);
    input = el("select", { id, name, multiple: true, size: String(Math.min(values.length, 6)) },
      ...values.map((c, i) => el("option", { value: String(i), text: labels[i] })));
    for (const option of input.options) option.selected = (schema.default || []).some((d) => JSON.stringify(d) === JSON.stringify(values[Number(option.value)]));
    read = () => {
      const picked = [...input.selectedOptions].map((o) => values[Number(o.value)]);
      return picked.length || required ? picked : empty();
    };
  } else if (choices) {
    const labels = labelsOf(schema, choices);
    input = el("select", { id, name }, ...(required && !nullable ? [] : [el("option", { value: "", text: "" })]),
      ...choices.map((c, i) => el("option", { value: String(i), text: labels[i] })),
      // values the server would take but its policy gates (a manager's hidden actions): shown, not chosen
      ...((opts.gatedChoices || {})[path.join(".")] || []).map(([value, why]) =>
        el("option", { value: `gated:${value}`, disabled: true, text: `${shown(value)} (gated: ${why})` })));
    if ("default" in schema) input.value = String(choices.findIndex((c) => JSON.stringify(c) === JSON.stringify(schema.default)));
    read = () => (input.value === "" ? empty() : choices[Number(input.value)]);
  } else if (kinds.length === 1 && kinds[0] === "boolean" && !nullable) {
    const box = el("input", { id, name, type: "checkbox", disabled: opts.disabled });
    box.checked = schema.default === true;
    read = () => box.checked;
    input = el("span", { class: "check" }, box); // a checkbox sits at the start of its cell, not mid-column
  } else if (kinds.length === 1 && kinds[0] === "boolean") {
    input = el("select", { id, name }, el("option", { value: "", text: "" }), el("option", { value: "true", text: "true" }),
      el("option", { value: "false", text: "false" }));
    read = () => (input.value === "" ? empty() : input.value === "true");
  } else if (kinds.length === 1 && (kinds[0] === "integer" || kinds[0] === "number")) {
    input = el("input", { id, name, type: "number", step: kinds[0] === "integer" ? "1" : "any",
      min: schema.minimum, max: schema.maximum, placeholder: "default" in schema ? String(schema.default) : "" });
    read = () => (input.value === "" ? empty() : Number(input.value));
  } else if (kinds.length === 1 && kinds[0] === "string") {
    input = el("input", { id, name, type: "text", placeholder: "default" in schema && schema.default !== null ? String(schema.default) : "" });
    if (opts.complete) extra = offerCompletion(input, path, opts.complete);
    read = () => (input.value === "" ? empty() : input.value);
  } else {
    input = el("textarea", { id, name, placeholder: "JSON" + ("default" in schema ? ", default " + JSON.stringify(schema.default) : "") });
    read = () => {
      if (input.value.trim() === "") return empty();
      try { return JSON.parse(input.value); } catch (e) { throw new Error(`${path.join(".")}: not valid JSON (${e.message})`); }
    };
  }
  if (opts.disabled && input.tagName !== "SPAN") input.disabled = true;
  return { nodes: [label, input, extra, help], read, name };
}

// completion/complete as the user types (CP-01): the values offered become the input's datalist
function offerCompletion(input, path, complete) {
  const list = el("datalist", { id: input.id + "-options" });
  input.setAttribute("list", list.id);
  input.setAttribute("autocomplete", "off");
  let asked = 0;
  const ask = async () => {
    const mine = ++asked;
    let values = [];
    try { values = await complete(path[path.length - 1], input.value); } catch (e) { /* offered nothing */ }
    if (mine !== asked) return; // a newer keystroke asked again
    list.replaceChildren(...values.map((v) => el("option", { value: v })));
    input.dataset.offered = values.join("\n");
  };
  input.addEventListener("input", ask);
  input.addEventListener("focus", ask);
  return list; // hidden (display: none), so it takes no cell of the form's grid
}

function fields(schema, opts, path, depth) {
  const required = new Set(schema.required || []);
  const out = [];
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    if ((opts.skip || []).includes(name) && path.length === 0) continue;
    out.push(field([...path, name], prop || {}, required.has(name), opts, depth));
  }
  const values = () => {
    const value = {};
    for (const f of out) {
      const v = f.read();
      if (v !== undefined) value[f.name] = v;
    }
    return value;
  };
  return { nodes: out.flatMap((f) => f.nodes.filter(Boolean)), values, count: out.length };
}

// opts: prefix (element ids are unique across views: arg- for tools, res- for resources, prompt- for
// prompts, elicit- for elicitation), skip (top-level names left out), root (the schema $refs resolve
// in), complete(name, value) -> Promise<[values]>, disabled, gatedChoices ({"path.to.field": [[value, reason]]})
function buildForm(schema, opts = {}) {
  const options = Object.assign({ prefix: "arg-", root: schema }, opts);
  const form = el("form", { class: "params", onsubmit: (e) => e.preventDefault() });
  const built = fields(schema, options, [], 0);
  form.append(...built.nodes);
  return { form, values: built.values, empty: built.count === 0 };
}
