# The Godot side of examples/godot: serves the bridge protocol (newline-delimited JSON-RPC 2.0)
# on 127.0.0.1 to the mcpkit server, and edits scenes in the engine. Written for Godot 3.2+
# (Debian's godot3-server); run it headless in the project:
#
#   GODOT_BRIDGE_PORT=6505 GODOT_BRIDGE_TOKEN=... godot3-server --path PROJECT -s bridge.gd
#
# Protocol: the first request must be `hello` with the shared token and protocolVersion "1";
# then `ping`, `scene.*`, `node.*`, `engine.*` requests; `notifications/cancelled` stops a
# pending `engine.wait`. Errors: -32602 bad params, -32004 not found, -32009 already exists,
# -32010 not a node type.
extends SceneTree

const PROTOCOL_VERSION = "1"
const SCHEMA_VERSION = 1
const MAX_LINE = 1048576

var server = TCP_Server.new()
var clients = []    # [{peer, buf, authed}]
var scenes = {}     # "res://..." -> root Node of an open scene
var waits = []      # [{client, id, until}] pending engine.wait answers
var token = ""


func _initialize():
	token = OS.get_environment("GODOT_BRIDGE_TOKEN")
	var port = int(OS.get_environment("GODOT_BRIDGE_PORT"))
	if token.length() < 16 or port <= 0:
		printerr("bridge.gd: set GODOT_BRIDGE_PORT and GODOT_BRIDGE_TOKEN (16+ characters)")
		quit(2)
		return
	var err = server.listen(port, "127.0.0.1")
	if err != OK:
		printerr("bridge.gd: cannot listen on 127.0.0.1:%d (error %d)" % [port, err])
		quit(3)
		return
	print(to_json({"event": "listening", "port": port}))


func _idle(_delta):
	while server.is_connection_available():
		var peer = server.take_connection()
		peer.set_no_delay(true)
		clients.append({"peer": peer, "buf": PoolByteArray(), "authed": false})
	for c in clients.duplicate():
		_pump(c)
	var now = OS.get_ticks_msec()
	for w in waits.duplicate():
		if now >= w.until:
			waits.erase(w)
			_answer(w.client, w.id, {"waitedMs": w.ms})
	return false


func _pump(c):
	var peer = c.peer
	if peer.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		_drop(c)
		return
	var n = peer.get_available_bytes()
	if n <= 0:
		return
	var got = peer.get_data(n)
	if got[0] != OK:
		_drop(c)
		return
	# PoolByteArray is a value type: work on a local copy, store it back
	var buf = c.buf
	buf.append_array(got[1])
	var size = buf.size()
	var start = 0
	for i in range(size):
		if buf[i] == 10:
			if i > start:
				_handle(c, buf.subarray(start, i - 1).get_string_from_utf8())
				if not clients.has(c):
					return
			start = i + 1
	if start >= size:
		c.buf = PoolByteArray()
	elif start > 0:
		c.buf = buf.subarray(start, size - 1)
	else:
		c.buf = buf
	if c.buf.size() > MAX_LINE:
		_drop(c)


func _drop(c):
	clients.erase(c)
	for w in waits.duplicate():
		if w.client == c:
			waits.erase(w)
	c.peer.disconnect_from_host()


func _send(c, message):
	c.peer.put_data((to_json(message) + "\n").to_utf8())


func _answer(c, id, result):
	_send(c, {"jsonrpc": "2.0", "id": id, "result": result})


func _fail(c, id, code, message, kind = ""):
	var error = {"code": code, "message": message}
	if kind != "":
		error["data"] = {"kind": kind}
	_send(c, {"jsonrpc": "2.0", "id": id, "error": error})


func _handle(c, line):
	var parsed = JSON.parse(line)
	if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY:
		_fail(c, null, -32700, "parse error")
		return
	var msg = parsed.result
	var method = str(msg.get("method", ""))
	var params = msg.get("params", {})
	if typeof(params) != TYPE_DICTIONARY:
		params = {}
	if not msg.has("id"):
		if method == "notifications/cancelled" and c.authed:
			for w in waits.duplicate():
				if w.client == c and str(w.id) == str(params.get("requestId")):
					waits.erase(w)
		return
	var id = msg["id"]
	if method == "hello":
		if str(params.get("token", "")) != token:
			_fail(c, id, -32001, "the token is not this editor's", "unauthorized")
			_drop(c)
			return
		c.authed = true
		_answer(c, id, {"protocolVersion": PROTOCOL_VERSION, "name": "godot",
			"version": Engine.get_version_info().string, "schemaVersion": SCHEMA_VERSION})
		return
	if not c.authed:
		_fail(c, id, -32001, "say hello with the token first", "unauthorized")
		_drop(c)
		return
	if method == "engine.wait":
		var ms = int(params.get("ms", 0))
		waits.append({"client": c, "id": id, "ms": ms, "until": OS.get_ticks_msec() + ms})
		return
	var out = _dispatch(method, params)
	if typeof(out) == TYPE_DICTIONARY and out.has("__error"):
		_fail(c, id, out.__error, out.message, out.get("kind", ""))
	else:
		_answer(c, id, out)


func _err(code, message, kind = ""):
	return {"__error": code, "message": message, "kind": kind}


func _dispatch(method, p):
	match method:
		"ping":
			return {"schemaVersion": SCHEMA_VERSION}
		"engine.info":
			return {"version": Engine.get_version_info().string, "openScenes": scenes.keys()}
		"scene.create":
			return _scene_create(p)
		"scene.open":
			return _scene_open(p)
		"scene.tree":
			var root = _scene(p)
			return root if typeof(root) == TYPE_DICTIONARY else _describe(root, root)
		"scene.save":
			return _scene_save(p)
		"scene.close":
			var root = _scene(p)
			if typeof(root) == TYPE_DICTIONARY:
				return root
			scenes.erase(str(p.path))
			root.free()
			return {"closed": str(p.path)}
		"node.add":
			return _node_add(p)
		"node.move":
			return _node_move(p)
		"node.delete":
			return _node_delete(p)
		"node.set":
			return _node_set(p)
	return _err(-32601, "no method " + method)


# ---------------------------------------------------------------------------------- scenes

func _scene(p):
	var path = str(p.get("path", p.get("scene", "")))
	if not scenes.has(path):
		return _err(-32004, "scene %s is not open (create or open it first)" % path, "not_found")
	return scenes[path]


func _scene_create(p):
	var path = str(p.get("path", ""))
	var type = str(p.get("rootType", "Node2D"))
	if not path.begins_with("res://") or not path.ends_with(".tscn"):
		return _err(-32602, "a scene path is res://....tscn")
	if scenes.has(path) or File.new().file_exists(path):
		return _err(-32009, "scene %s already exists" % path, "exists")
	var root = _instance(type)
	if root == null:
		return _err(-32010, "%s is not a node type" % type, "bad_type")
	root.name = str(p.get("rootName", path.get_file().get_basename()))
	scenes[path] = root
	return _describe(root, root)


func _scene_open(p):
	var path = str(p.get("path", ""))
	if scenes.has(path):
		return _describe(scenes[path], scenes[path])
	if not File.new().file_exists(path):
		return _err(-32004, "no scene file %s" % path, "not_found")
	var packed = load(path)
	if not (packed is PackedScene):
		return _err(-32602, "%s is not a scene" % path)
	var root = packed.instance()
	scenes[path] = root
	return _describe(root, root)


func _scene_save(p):
	var root = _scene(p)
	if typeof(root) == TYPE_DICTIONARY:
		return root
	var path = str(p.get("path", p.get("scene", "")))
	var packed = PackedScene.new()
	var err = packed.pack(root)
	if err != OK:
		return _err(-32603, "cannot pack the scene (error %d)" % err)
	Directory.new().make_dir_recursive(path.get_base_dir())
	err = ResourceSaver.save(path, packed)
	if err != OK:
		return _err(-32603, "cannot save %s (error %d)" % [path, err])
	return {"path": path, "nodes": _count(root)}


# ---------------------------------------------------------------------------------- nodes

func _node(root, path):
	path = str(path)
	if path == "" or path == ".":
		return root
	var node = root.get_node_or_null(NodePath(path))
	if node == null:
		return _err(-32004, "no node %s in the scene" % path, "not_found")
	return node


func _node_add(p):
	var root = _scene(p)
	if typeof(root) == TYPE_DICTIONARY:
		return root
	var parent = _node(root, p.get("parent", "."))
	if typeof(parent) == TYPE_DICTIONARY:
		return parent
	var name = str(p.get("name", ""))
	if name == "" or name.find("/") >= 0 or name.find(".") >= 0:
		return _err(-32602, "a node name is non-empty, without '/' or '.'")
	if parent.has_node(NodePath(name)):
		return _err(-32009, "%s already has a child %s" % [root.get_path_to(parent), name], "exists")
	var node = _instance(str(p.get("type", "Node")))
	if node == null:
		return _err(-32010, "%s is not a node type" % str(p.get("type")), "bad_type")
	node.name = name
	parent.add_child(node)
	node.owner = root
	return _describe(root, node)


func _node_move(p):
	var root = _scene(p)
	if typeof(root) == TYPE_DICTIONARY:
		return root
	var node = _node(root, p.get("node", ""))
	if typeof(node) == TYPE_DICTIONARY:
		return node
	var target = _node(root, p.get("newParent", "."))
	if typeof(target) == TYPE_DICTIONARY:
		return target
	if node == root or node == target or node.is_a_parent_of(target):
		return _err(-32602, "a node cannot move under itself, and the root does not move")
	node.get_parent().remove_child(node)
	target.add_child(node)
	_own(node, root)
	return _describe(root, node)


func _node_delete(p):
	var root = _scene(p)
	if typeof(root) == TYPE_DICTIONARY:
		return root
	var node = _node(root, p.get("node", ""))
	if typeof(node) == TYPE_DICTIONARY:
		return node
	if node == root:
		return _err(-32602, "the root cannot be deleted; close the scene instead")
	var where = str(root.get_path_to(node))
	node.get_parent().remove_child(node)
	node.free()
	return {"deleted": where}


func _node_set(p):
	var root = _scene(p)
	if typeof(root) == TYPE_DICTIONARY:
		return root
	var node = _node(root, p.get("node", "."))
	if typeof(node) == TYPE_DICTIONARY:
		return node
	var prop = str(p.get("property", ""))
	if not _has_property(node, prop):
		return _err(-32004, "%s has no property %s" % [node.get_class(), prop], "not_found")
	var value = _convert(node.get(prop), p.get("value"))
	if typeof(value) == TYPE_DICTIONARY and value.has("__error"):
		return value
	node.set(prop, value)
	return {"node": str(root.get_path_to(node)), "property": prop, "value": _jsonable(node.get(prop))}


# ---------------------------------------------------------------------------------- helpers

func _instance(type):
	if not ClassDB.class_exists(type) or not ClassDB.can_instance(type) or not ClassDB.is_parent_class(type, "Node"):
		return null
	return ClassDB.instance(type)


func _own(node, root):
	node.owner = root
	for child in node.get_children():
		_own(child, root)


func _count(node):
	var n = 1
	for child in node.get_children():
		n += _count(child)
	return n


func _has_property(node, prop):
	for entry in node.get_property_list():
		if entry.name == prop:
			return true
	return false


func _describe(root, node):
	var out = {"name": node.name, "type": node.get_class(), "path": str(root.get_path_to(node)), "children": []}
	if node is Node2D:
		out["position"] = _jsonable(node.position)
	for child in node.get_children():
		out.children.append(_describe(root, child))
	return out


func _convert(current, value):
	match typeof(current):
		TYPE_VECTOR2:
			if typeof(value) == TYPE_ARRAY and value.size() == 2:
				return Vector2(float(value[0]), float(value[1]))
			if typeof(value) == TYPE_DICTIONARY and value.has("x") and value.has("y"):
				return Vector2(float(value.x), float(value.y))
			return _err(-32602, "a Vector2 is [x, y]")
		TYPE_VECTOR3:
			if typeof(value) == TYPE_ARRAY and value.size() == 3:
				return Vector3(float(value[0]), float(value[1]), float(value[2]))
			return _err(-32602, "a Vector3 is [x, y, z]")
		TYPE_COLOR:
			if typeof(value) == TYPE_STRING and value.is_valid_html_color():
				return Color(value)
			if typeof(value) == TYPE_ARRAY and (value.size() == 3 or value.size() == 4):
				return Color(value[0], value[1], value[2], value[3] if value.size() == 4 else 1.0)
			return _err(-32602, "a Color is \"#rrggbb\" or [r, g, b, a]")
		TYPE_INT:
			return int(value)
		TYPE_REAL:
			return float(value)
		TYPE_BOOL:
			return bool(value)
		TYPE_STRING:
			return str(value)
		TYPE_NODE_PATH:
			return NodePath(str(value))
		TYPE_NIL, TYPE_OBJECT:
			if typeof(value) == TYPE_STRING and value.begins_with("res://"):
				if not ResourceLoader.exists(value):
					return _err(-32004, "no resource " + value, "not_found")
				return load(value)
	return value


func _jsonable(v):
	match typeof(v):
		TYPE_VECTOR2:
			return [v.x, v.y]
		TYPE_VECTOR3:
			return [v.x, v.y, v.z]
		TYPE_COLOR:
			return "#" + v.to_html(true)
		TYPE_NODE_PATH:
			return str(v)
		TYPE_OBJECT:
			return v.resource_path if v is Resource else str(v)
	return v
