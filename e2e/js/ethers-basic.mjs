// ethers-basic.mjs: talk to a web3gate JSON-RPC endpoint the way a dapp does, with ethers v6.
//
// Environment:
//   WEB3GATE_URL             JSON-RPC endpoint, e.g. http://127.0.0.1:8080/rpc/137
//   WEB3GATE_CLIENT_ID       sent as X-API-Key
//   WEB3GATE_TOKEN           sent as Authorization: Bearer <token>
//   WEB3GATE_CHAIN_ID        expected chain id (decimal)
//   WEB3GATE_FUNDED_ADDRESS  an address with a non-zero balance on that chain
//   WEB3GATE_EXPECT_AUTH=1   also check that a request without the bearer token is refused
//                            (HTTP 401, JSON-RPC code 4100, message containing "Not Authorized")
//
// Prints one line per check ("ok", "FAIL" or "skip") and exits 1 if any check failed,
// 2 if the environment is incomplete.
//
// Run: node e2e/js/ethers-basic.mjs   (after npm ci --prefix e2e)

import { FetchRequest, JsonRpcProvider, Network } from "ethers";

import { fail, script } from "./harness.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request

const { env, chainID: readChainID, check, finish } = script("ethers-basic", {
  describe: (err) => `${err?.message ?? err}${err?.cause ? ` (cause: ${err.cause.message ?? err.cause})` : ""}`,
});

const url = env("WEB3GATE_URL");
const clientID = env("WEB3GATE_CLIENT_ID");
const token = env("WEB3GATE_TOKEN");
const chainID = readChainID();
const funded = env("WEB3GATE_FUNDED_ADDRESS");
const expectAuth = process.env.WEB3GATE_EXPECT_AUTH === "1";

// request builds an ethers FetchRequest carrying the client's headers.
function request({ withToken = true } = {}) {
  const req = new FetchRequest(url);
  req.timeout = TIMEOUT_MS;
  req.setHeader("X-API-Key", clientID);
  if (withToken) {
    req.setHeader("Authorization", `Bearer ${token}`);
  }
  return req;
}

// headers builds the same headers for a raw fetch().
function headers({ withToken = true } = {}) {
  const h = { "Content-Type": "application/json", "X-API-Key": clientID };
  if (withToken) {
    h.Authorization = `Bearer ${token}`;
  }
  return h;
}

async function postJSON(body, opts) {
  const res = await fetch(url, {
    method: "POST",
    headers: headers(opts),
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

// WireProvider records every HTTP exchange: what was sent and what came back, unwrapped.
class WireProvider extends JsonRpcProvider {
  wire = [];

  async _send(payload) {
    const req = this._getConnection();
    req.body = JSON.stringify(payload);
    req.setHeader("content-type", "application/json");
    const res = await req.send();
    res.assertOk();
    const body = res.bodyJson;
    this.wire.push({ sent: payload, received: body });
    return Array.isArray(body) ? body : [body];
  }
}

const network = Network.from(chainID);
const providers = [];
function provider(options, opts) {
  const p = new WireProvider(request(opts), network, { staticNetwork: network, ...options });
  providers.push(p);
  return p;
}

function quantity(v, what) {
  if (typeof v !== "string" || !/^0x(0|[1-9a-f][0-9a-f]*)$/i.test(v)) {
    fail(`${what}: want a hex quantity, got ${JSON.stringify(v)}`);
  }
  return BigInt(v);
}

// One request per HTTP exchange (batchMaxCount 1), so these checks exercise the single-call path.
const single = provider({ batchMaxCount: 1 });

await check("eth_chainId", async () => {
  const got = await single.send("eth_chainId", []);
  const id = quantity(got, "eth_chainId");
  if (id !== chainID) {
    fail(`got ${got} (${id}), want ${chainID}`);
  }
  return `${got} = ${id}`;
});

await check("getBlockNumber", async () => {
  const n = await single.getBlockNumber();
  if (!Number.isSafeInteger(n) || n < 0) {
    fail(`got ${n}, want an integer >= 0`);
  }
  return `${n}`;
});

await check("getBalance", async () => {
  const bal = await single.getBalance(funded);
  if (typeof bal !== "bigint" || bal <= 0n) {
    fail(`balance of ${funded} is ${bal}, want > 0`);
  }
  return `${funded} has ${bal} wei`;
});

await check("single requests went unbatched", async () => {
  const batched = single.wire.filter((x) => Array.isArray(x.sent) || Array.isArray(x.received));
  if (single.wire.length !== 3 || batched.length !== 0) {
    fail(`want 3 single exchanges, got ${JSON.stringify(single.wire)}`);
  }
  return "3 HTTP requests, one call each";
});

// ethers batches calls made in the same tick (batchMaxCount > 1) into one JSON-RPC batch.
await check("ethers batch", async () => {
  const batching = provider({ batchMaxCount: 10 });
  const [id, block, bal] = await Promise.all([
    batching.send("eth_chainId", []),
    batching.send("eth_blockNumber", []),
    batching.getBalance(funded),
  ]);
  if (quantity(id, "eth_chainId") !== chainID) {
    fail(`eth_chainId in batch: got ${id}, want ${chainID}`);
  }
  quantity(block, "eth_blockNumber");
  if (bal <= 0n) {
    fail(`eth_getBalance in batch: ${bal}, want > 0`);
  }
  if (batching.wire.length !== 1) {
    fail(`want 1 HTTP request for 3 calls, got ${batching.wire.length}: ${JSON.stringify(batching.wire)}`);
  }
  const { sent, received } = batching.wire[0];
  if (!Array.isArray(sent) || sent.length !== 3) {
    fail(`ethers did not send a batch of 3: ${JSON.stringify(sent)}`);
  }
  if (!Array.isArray(received) || received.length !== 3) {
    fail(`server answered the batch with ${JSON.stringify(received)}, want an array of 3`);
  }
  const methods = sent.map((p) => p.method).join(",");
  return `1 HTTP request [${methods}] -> array of ${received.length}; chainId ${id}, block ${block}, balance ${bal}`;
});

await check("raw batch", async () => {
  const batch = [
    { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] },
    { jsonrpc: "2.0", id: 2, method: "eth_blockNumber", params: [] },
    { jsonrpc: "2.0", id: 3, method: "eth_getBalance", params: [funded, "latest"] },
  ];
  const { status, text, json } = await postJSON(batch);
  if (status !== 200) {
    fail(`HTTP ${status}: ${text}`);
  }
  if (!Array.isArray(json) || json.length !== batch.length) {
    fail(`want an array of ${batch.length} responses, got ${text}`);
  }
  json.forEach((r, i) => {
    if (r?.id !== batch[i].id) {
      fail(`response ${i} has id ${JSON.stringify(r?.id)}, want ${batch[i].id} (ids in request order): ${text}`);
    }
    if (r.jsonrpc !== "2.0" || "error" in r || !("result" in r)) {
      fail(`response ${i} (${batch[i].method}) is not a result: ${JSON.stringify(r)}`);
    }
  });
  if (quantity(json[0].result, "eth_chainId") !== chainID) {
    fail(`eth_chainId in raw batch: ${json[0].result}, want ${chainID}`);
  }
  quantity(json[1].result, "eth_blockNumber");
  if (quantity(json[2].result, "eth_getBalance") <= 0n) {
    fail(`eth_getBalance in raw batch: ${json[2].result}, want > 0`);
  }
  return `3 responses, ids ${json.map((r) => r.id).join(",")} in order`;
});

if (expectAuth) {
  await check("no bearer token (raw)", async () => {
    const { status, text, json } = await postJSON(
      { jsonrpc: "2.0", id: 7, method: "eth_chainId", params: [] },
      { withToken: false },
    );
    if (status !== 401) {
      fail(`HTTP ${status}, want 401: ${text}`);
    }
    const e = json?.error;
    if (e?.code !== 4100) {
      fail(`error code ${JSON.stringify(e?.code)}, want 4100: ${text}`);
    }
    if (typeof e.message !== "string" || !e.message.includes("Not Authorized")) {
      fail(`error message ${JSON.stringify(e.message)} does not contain "Not Authorized"`);
    }
    return `HTTP 401, code 4100, message ${JSON.stringify(e.message)}`;
  });

  await check("no bearer token (ethers)", async () => {
    const anonymous = provider({ batchMaxCount: 1 }, { withToken: false });
    let got;
    try {
      got = await anonymous.send("eth_chainId", []);
    } catch (err) {
      const status = err?.response?.statusCode;
      if (status !== 401) {
        fail(`ethers rejected with ${err?.code} HTTP ${status}, want HTTP 401: ${err?.shortMessage ?? err?.message}`);
      }
      return `rejected: ${err.code} HTTP ${status}`;
    }
    fail(`eth_chainId without a token answered ${got}, want a rejection`);
  });
} else {
  console.log("skip no bearer token: set WEB3GATE_EXPECT_AUTH=1 to check the 401 / 4100 refusal");
}

for (const p of providers) {
  p.destroy();
}
finish();
