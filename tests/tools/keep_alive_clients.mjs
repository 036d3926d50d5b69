// keep_alive_clients.mjs PORT DELAY_S[,DELAY_S…]: Node's pooled HTTP clients as a new user runs
// them — an http.Agent made as Node 19+ makes its globalAgent ({keepAlive: true, timeout: 5000}:
// the same on Debian 12's Node 18, whose globalAgent does not keep sockets) and undici's default
// Agent — each sending GET /_health, waiting one of
// the delays, and sending again on the same pool, so the second request may reuse a socket the
// server is about to close. Prints one JSON line per client: requests, failures (with the first
// error), connections opened, and how many second requests went out on a reused socket.
import http from 'node:http';
import { Agent, request as undiciRequest } from 'undici';

const [port, delayList] = process.argv.slice(2);
const delays = delayList.split(',').map(Number);
const url = `http://127.0.0.1:${port}/_health`;
const sleep = (s) => new Promise((resolve) => setTimeout(resolve, s * 1000));

function nodeGet(agent) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, reused: req.reusedSocket }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

async function run(name, get, connections) {
  const out = { client: name, requests: 0, failures: 0, first_error: null, reused: 0, connections: 0 };
  for (const delay of delays) {
    for (const second of [false, true]) {
      out.requests += 1;
      try {
        const r = await get();
        if (r.status !== 200) throw new Error(`status ${r.status}`);
        if (second && r.reused) out.reused += 1;
      } catch (e) {
        out.failures += 1;
        out.first_error ??= `${e.code || ''} ${e.message} (after ${delay} s)`;
      }
      if (!second) await sleep(delay);
    }
  }
  out.connections = connections();
  return out;
}

let nodeSockets = 0;
const nodeAgent = new http.Agent({ keepAlive: true, timeout: 5000 });
const countSockets = (agent) => {
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (...args) => {
    nodeSockets += 1;
    return create(...args);
  };
};
countSockets(nodeAgent);

let undiciConnections = 0;
const undiciAgent = new Agent();
undiciAgent.on('connect', () => { undiciConnections += 1; });
// undici says whether a request reused a socket nowhere; a second request that opened no
// connection of its own did.
const undiciGet = async () => {
  const before = undiciConnections;
  const r = await undiciRequest(url, { dispatcher: undiciAgent });
  await r.body.dump();
  return { status: r.statusCode, reused: undiciConnections === before };
};

const results = await Promise.all([
  run('node http.Agent', () => nodeGet(nodeAgent), () => nodeSockets),
  run('undici Agent', undiciGet, () => undiciConnections),
]);
for (const r of results) console.log(JSON.stringify(r));
nodeAgent.destroy();
await undiciAgent.close();
