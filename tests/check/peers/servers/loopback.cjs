// Preloaded with `node --require loopback.cjs SERVER.js`: a server that listens on every interface
// at a port of its own choosing (the TypeScript SDK's HTTP examples hard-code port 3000 and give no
// host) listens on 127.0.0.1 at MCPKIT_PEER_PORT instead, so that tests can run it beside others
// and nothing is served beyond this machine.
'use strict';
const net = require('node:net');

const listen = net.Server.prototype.listen;
const port = Number(process.env.MCPKIT_PEER_PORT);
if (!Number.isInteger(port) || port <= 0) throw new Error('loopback.cjs: set MCPKIT_PEER_PORT');
net.Server.prototype.listen = function (...args) {
  const done = args.find((a) => typeof a === 'function');
  return listen.call(this, port, '127.0.0.1', ...(done ? [done] : []));
};
