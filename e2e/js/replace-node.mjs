// replace-node.mjs: what replace-ethers.mjs and replace-viem.mjs share: the node behind the
// gateway, driven directly (base fee, blocks: the test's chain, not the gateway's), and the
// gateway's REST routes of a transaction (status, cancel).
//
// Environment (besides harness.mjs's gateway variables):
//   WEB3GATE_NODE_URL   JSON-RPC URL of the anvil node behind the gateway, started with
//                       --no-mining: blocks come only from this script's evm_mine

import { fail, within } from "./harness.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request

// nodeClient returns the calls to the node at nodeURL.
export function nodeClient(nodeURL) {
  let id = 0;
  async function call(method, params = []) {
    const res = await within(
      TIMEOUT_MS,
      `node ${method}`,
      fetch(nodeURL, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: ++id, method, params }),
      }),
    );
    const body = await res.json();
    if (body.error) {
      fail(`node ${method}: ${JSON.stringify(body.error)}`);
    }
    return body.result;
  }

  // mine mines one block; with baseFee (a BigInt) that block's base fee is baseFee.
  async function mine(baseFee) {
    if (baseFee !== undefined) {
      await call("anvil_setNextBlockBaseFeePerGas", [`0x${baseFee.toString(16)}`]);
    }
    await call("evm_mine");
  }

  // mineUntil mines a block every everyMs (each at baseFee when given) until settled (a
  // promise) settles, at most maxBlocks; it returns how many blocks it mined. The promise's
  // own rejection is left to its caller.
  async function mineUntil(settled, { baseFee, everyMs = 400, maxBlocks = 40 } = {}) {
    let done = false;
    settled.then(
      () => (done = true),
      () => (done = true),
    );
    let n = 0;
    while (!done && n < maxBlocks) {
      await mine(baseFee);
      n++;
      await new Promise((r) => setTimeout(r, everyMs));
    }
    if (!done) {
      fail(`still waiting after ${n} blocks`);
    }
    return n;
  }

  return { call, mine, mineUntil };
}

// gatewayREST returns the calls of the gateway whose JSON-RPC endpoint is url, with its
// headers: JSON-RPC to url, REST to its origin.
export function gatewayREST(url, clientID, token) {
  const origin = new URL(url).origin;
  const headers = { "X-API-Key": clientID, Authorization: `Bearer ${token}` };

  async function request(method, path, body) {
    const res = await within(
      TIMEOUT_MS,
      `${method} ${path}`,
      fetch(origin + path, {
        method,
        headers: body === undefined ? headers : { ...headers, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      fail(`${method} ${path}: HTTP ${res.status}, not JSON: ${text}`);
    }
    return { status: res.status, body: json };
  }

  // status is GET /v1/transactions/{hash}'s transaction object.
  async function status(hash) {
    const { status: code, body } = await request("GET", `/v1/transactions/${hash}`);
    if (code !== 200 || !body.transaction) {
      fail(`GET /v1/transactions/${hash}: HTTP ${code} ${JSON.stringify(body)}`);
    }
    return body.transaction;
  }

  // replace is POST /v1/transactions/{hash}/{action} (speedup or cancel) with an empty body
  // (fees by the bump rules): the route's answer, checked to have signed a version of kind
  // action.
  async function replace(hash, action) {
    const { status: code, body } = await request("POST", `/v1/transactions/${hash}/${action}`);
    if (code !== 200 || !body.signed?.hash || body.signed.kind !== action) {
      fail(`POST /v1/transactions/${hash}/${action}: HTTP ${code} ${JSON.stringify(body)}`);
    }
    return body;
  }

  // rpc is one JSON-RPC call to the gateway: its whole answer (result or error).
  let id = 0;
  async function rpc(method, params = []) {
    const res = await within(
      TIMEOUT_MS,
      `gateway ${method}`,
      fetch(url, {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: ++id, method, params }),
      }),
    );
    return res.json();
  }

  // eventually runs fn until it returns without throwing, for at most ms (the gateway
  // records a block a poll after the node mined it); the last error is the failure.
  async function eventually(fn, ms = 10_000) {
    const deadline = Date.now() + ms;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (Date.now() > deadline) {
          throw err;
        }
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  return { request, status, replace, rpc, eventually };
}

// sameAnswers checks that the gateway answers eth_getTransactionByHash and
// eth_getTransactionReceipt of each hash exactly as the node does (null for a replaced
// transaction: the gateway must not stand the mined version in for it).
export async function sameAnswers(rest, node, hashes) {
  const seen = [];
  for (const hash of hashes) {
    for (const method of ["eth_getTransactionByHash", "eth_getTransactionReceipt"]) {
      const want = await node.call(method, [hash]);
      const got = await rest.rpc(method, [hash]);
      if (got.error || canonical(got.result) !== canonical(want)) {
        fail(`${method}(${hash}): the gateway answered ${JSON.stringify(got)}, the node ${JSON.stringify(want)}`);
      }
      seen.push(`${method.replace("eth_getTransaction", "")} ${want === null ? "null" : "the same object"}`);
    }
  }
  return seen.join(", ");
}

// checkVersions checks the gateway's record of a request whose original hash is original and
// whose version mined is replacement of kind (bump, cancel): the same record under either hash,
// the original hash kept, every version listed oldest first with the original replaced and
// the replacement mined, and the request in one of wantStates. It returns a summary.
export async function checkVersions(rest, original, replacement, kind, wantStates) {
  const lower = (h) => h.toLowerCase();
  const byOriginal = await rest.status(original);
  const byReplacement = await rest.status(replacement);
  for (const [via, rec] of [
    ["original", byOriginal],
    ["replacement", byReplacement],
  ]) {
    if (lower(rec.hash) !== lower(original)) {
      fail(`the record found by the ${via} hash has hash ${rec.hash}, want the original ${original}`);
    }
  }
  const tx = byOriginal;
  if (!wantStates.includes(tx.state)) {
    fail(`state ${tx.state}, want one of ${wantStates.join(", ")}: ${JSON.stringify(tx)}`);
  }
  if (lower(tx.minedHash ?? "") !== lower(replacement)) {
    fail(`minedHash ${tx.minedHash}, want the replacement ${replacement}`);
  }
  const versions = tx.versions;
  if (!Array.isArray(versions) || versions.length < 2) {
    fail(`versions ${JSON.stringify(versions)}, want the original and the replacement at least`);
  }
  const first = versions[0];
  if (lower(first.hash) !== lower(original) || first.kind !== "original" || first.state !== "replaced") {
    fail(`first version ${JSON.stringify(first)}, want the original ${original}, kind original, state replaced`);
  }
  const mined = versions.filter((v) => v.state === "mined");
  if (mined.length !== 1 || lower(mined[0].hash) !== lower(replacement) || mined[0].kind !== kind) {
    fail(`mined versions ${JSON.stringify(mined)}, want only the replacement ${replacement} of kind ${kind}`);
  }
  const others = versions.filter((v) => v.state !== "mined" && v.state !== "replaced");
  if (others.length > 0) {
    fail(`versions neither mined nor replaced once one is mined: ${JSON.stringify(others)}`);
  }
  return `state ${tx.state}, ${versions.length} versions: ${versions.map((v) => `${v.kind} ${v.state}`).join(", ")}`;
}

// canonical is v as JSON with the members of every object in key order.
function canonical(v) {
  return JSON.stringify(v, (_, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]]))
      : x,
  );
}
