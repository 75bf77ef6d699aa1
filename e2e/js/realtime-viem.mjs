// realtime-viem.mjs: follow a chain through web3gate with viem 2, the way a dapp does, on a URL
// that carries the client id (viem's transports send no headers over WebSocket):
//
//   WEB3GATE_MODE=ws    the webSocket transport: watchBlocks (eth_subscribe newHeads, then viem's
//                       own eth_getBlockByNumber of each head) and watchContractEvent
//                       (eth_subscribe logs); no reconnection, so a closed socket is reported
//   WEB3GATE_MODE=http  the http transport: watchContractEvent polls, with eth_newFilter and
//                       eth_getFilterChanges when the node offers filters (web3gate does)
//
// It checks nothing itself: it reports what viem delivered, one line each, and the Go test
// (realtime_test.go) compares that with the chain (every block and every event exactly once):
//
//   ready                                              ws: both subscriptions established;
//                                                      http: eth_newFilter answered with an id
//   block <number> <hash>                              an onBlock of watchBlocks (ws)
//   log <blockNumber> <txHash> <logIndex> <removed>    a Transfer log of the token
//   error <text>                                       an onError, or an onBlock without a block
//   calls <json>                                       (http, before done) how many calls of each
//                                                      method viem sent, and the failed ones
//   done                                               after "stop" on stdin (or stdin's end)
//
// Environment:
//   WEB3GATE_URL            ws://… (ws mode) or http://… (http mode) endpoint
//   WEB3GATE_CHAIN_ID       the chain id (decimal)
//   WEB3GATE_TOKEN_ADDRESS  the ERC-20 whose Transfer events are followed
//   WEB3GATE_MODE           ws or http
//
// Exits 0 after "done", 1 when the watchdog fires, 2 when the environment is incomplete.
//
// Run: node e2e/js/realtime-viem.mjs   (after npm ci --prefix e2e)

import { createPublicClient, defineChain, getAddress, http, parseAbi, webSocket } from "viem";

import { script } from "./harness.mjs";

const POLL_MS = 250; // viem's polling interval (http mode)
const TIMEOUT_MS = 15_000; // per request

const { env, chainIDNumber, usage } = script("realtime-viem", { watchdogMs: 120_000 });

const url = env("WEB3GATE_URL");
const chainID = chainIDNumber();
const mode = env("WEB3GATE_MODE");
if (mode !== "ws" && mode !== "http") {
  usage(`WEB3GATE_MODE must be ws or http, got ${JSON.stringify(mode)}`);
}
let token;
try {
  token = getAddress(env("WEB3GATE_TOKEN_ADDRESS"));
} catch {
  usage("WEB3GATE_TOKEN_ADDRESS must be an address");
}

function out(line) {
  console.log(line);
}

function describe(err) {
  const details = err?.details ? ` (details: ${err.details})` : "";
  return `${err?.shortMessage ?? err?.message ?? err}${details}`.replace(/\s+/g, " ");
}

const chain = defineChain({
  id: chainID,
  name: `web3gate ${chainID}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [url] } },
});

// calls counts the JSON-RPC calls of the http transport by method, and the failed ones.
const calls = {};
const failed = {};
const methodOf = new Map(); // request id → method
let ready = false;

function recordRequest(body) {
  for (const c of [body].flat()) {
    calls[c.method] = (calls[c.method] ?? 0) + 1;
    methodOf.set(c.id, c.method);
  }
}

function recordResponse(body) {
  for (const r of [body].flat()) {
    const method = methodOf.get(r?.id);
    if (r?.error) {
      failed[method] = (failed[method] ?? 0) + 1;
      continue;
    }
    if (method === "eth_newFilter" && typeof r?.result === "string" && !ready) {
      ready = true;
      out("ready");
    }
  }
}

const transport =
  mode === "ws"
    ? webSocket(url, { reconnect: false, retryCount: 0, timeout: TIMEOUT_MS })
    : http(url, {
        retryCount: 0,
        timeout: TIMEOUT_MS,
        async onFetchRequest(req) {
          try {
            recordRequest(await req.clone().json());
          } catch {
            // not JSON
          }
        },
        async onFetchResponse(res) {
          try {
            recordResponse(await res.clone().json());
          } catch {
            // not JSON
          }
        },
      });

const client = createPublicClient({ chain, transport, pollingInterval: POLL_MS, cacheTime: 0 });

const got = await client.getChainId();
if (got !== chainID) {
  out(`error chain id ${got}, want ${chainID}`);
}

const unwatch = [];
const abi = parseAbi(["event Transfer(address indexed from, address indexed to, uint256 value)"]);
unwatch.push(
  client.watchContractEvent({
    address: token,
    abi,
    eventName: "Transfer",
    batch: false,
    onLogs(logs) {
      for (const l of logs) {
        out(`log ${l.blockNumber} ${l.transactionHash} ${l.logIndex} ${l.removed}`);
      }
    },
    onError(err) {
      out(`error watchContractEvent: ${describe(err)}`);
    },
  }),
);

if (mode === "ws") {
  unwatch.push(
    client.watchBlocks({
      onBlock(block) {
        if (!block) {
          out("error watchBlocks: onBlock without a block (viem's eth_getBlockByNumber of the head failed)");
          return;
        }
        out(`block ${block.number} ${block.hash}`);
      },
      onError(err) {
        out(`error watchBlocks: ${describe(err)}`);
      },
    }),
  );
  // Readiness: both subscriptions in the socket client's table (set when eth_subscribe answers).
  const rpc = await client.transport.getRpcClient();
  const timer = setInterval(() => {
    if (rpc.subscriptions.size >= 2) {
      clearInterval(timer);
      out("ready");
    }
  }, 20);
}

let stopping = false;
async function stop() {
  if (stopping) {
    return;
  }
  stopping = true;
  for (const u of unwatch) {
    u();
  }
  if (mode === "http") {
    out(`calls ${JSON.stringify({ calls, failed })}`);
  } else {
    (await client.transport.getRpcClient()).close();
  }
  out("done");
  process.exit(0);
}
process.stdin.on("data", (chunk) => {
  if (chunk.toString().includes("stop")) {
    stop();
  }
});
process.stdin.on("end", stop);
