// realtime-ethers.mjs: follow a chain through web3gate with ethers v6, the way a dapp does, on
// a URL that carries the client id (the only credential a URL-only wallet has):
// provider.on("block") and a contract event listener, contract.on("Transfer"), on
//
//   WEB3GATE_MODE=ws    a WebSocketProvider (the `ws` package in Node): both listeners are
//                       eth_subscribe subscriptions (newHeads, logs) on the one socket
//   WEB3GATE_MODE=http  a JsonRpcProvider: "block" polls eth_blockNumber (every block number
//                       after the first poll is emitted), the contract listener is an
//                       eth_newFilter polled with eth_getFilterChanges at each new block
//
// It checks nothing itself: it reports what ethers delivered, one line each, and the Go test
// (realtime_test.go) compares that with the chain (every block and every event exactly once):
//
//   ready                                              ws: both eth_subscribe calls answered;
//                                                      http: eth_newFilter answered and a first
//                                                      eth_blockNumber
//   block <number> -                                   a "block" event (ethers gives no hash)
//   log <blockNumber> <txHash> <logIndex> <removed>    a Transfer event of the token
//   error <text>                                       an error event, a failed subscription or
//                                                      call, the socket closing, the wrong chain
//   calls <json>                                       (http, before done) how many calls of each
//                                                      method ethers sent, and the failed ones
//   done                                               after "stop" on stdin (or stdin's end)
//
// ethers' filter poller reports its own failures with console.log("@TODO", error): such a line
// is not of the forms above, and the Go test counts it as an error.
//
// Environment:
//   WEB3GATE_URL            ws://… (ws mode) or http://… (http mode) endpoint, e.g.
//                           ws://127.0.0.1:8545/v1/web3/mainnet/<clientId>
//   WEB3GATE_MODE           ws or http
//   WEB3GATE_CHAIN_ID       the chain id the provider must find (decimal)
//   WEB3GATE_TOKEN_ADDRESS  the ERC-20 whose Transfer events are followed
//
// Exits 0 after "done", 1 when the watchdog fires, 2 when the environment is incomplete.
//
// Run: node e2e/js/realtime-ethers.mjs   (after npm ci --prefix e2e)

import { Contract, JsonRpcProvider, WebSocketProvider, getAddress } from "ethers";

import { script } from "./harness.mjs";

const { env, chainID: readChainID, usage } = script("realtime-ethers", { watchdogMs: 120_000 });

const POLL_MS = 250; // the JsonRpcProvider's polling interval (http mode)

const url = env("WEB3GATE_URL");
const mode = env("WEB3GATE_MODE");
if (mode !== "ws" && mode !== "http") {
  usage(`WEB3GATE_MODE must be ws or http, got ${JSON.stringify(mode)}`);
}
const chainID = readChainID();
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
  return `${err?.shortMessage ?? err?.message ?? err}`.replace(/\s+/g, " ");
}

let stopping = false;
const provider =
  mode === "ws" ? new WebSocketProvider(url) : new JsonRpcProvider(url, undefined, { pollingInterval: POLL_MS, batchMaxCount: 1 });

if (mode === "ws") {
  provider.websocket.addEventListener("close", (ev) => {
    if (!stopping) {
      out(`error socket closed: code ${ev.code} ${JSON.stringify(ev.reason?.toString() ?? "")}`);
    }
  });
  provider.websocket.addEventListener("error", (ev) => {
    out(`error socket: ${describe(ev?.error ?? ev)}`);
  });
}

// Readiness, and the calls by method, seen through ethers' debug events: ws, the answers to
// its two eth_subscribe calls; http, the answer to eth_newFilter and a first eth_blockNumber.
const calls = {};
const failed = {};
const methodOf = new Map(); // request id → method
const answered = {};
let ready = false;
function checkReady() {
  const ok = mode === "ws" ? answered.eth_subscribe === 2 : answered.eth_newFilter >= 1 && answered.eth_blockNumber >= 1;
  if (ok && !ready) {
    ready = true;
    out("ready");
  }
}
provider.on("debug", (ev) => {
  if (ev.action === "sendRpcPayload") {
    for (const p of [ev.payload].flat()) {
      calls[p.method] = (calls[p.method] ?? 0) + 1;
      methodOf.set(p.id, p.method);
    }
  } else if (ev.action === "receiveRpcResult") {
    for (const r of [ev.result].flat()) {
      const method = methodOf.get(r?.id);
      if (r?.error) {
        failed[method] = (failed[method] ?? 0) + 1;
        out(`error ${method}: ${JSON.stringify(r.error)}`);
        continue;
      }
      answered[method] = (answered[method] ?? 0) + 1;
      checkReady();
    }
  } else if (ev.action === "receiveRpcError") {
    out(`error rpc: ${describe(ev.error)}`);
  }
});
provider.on("error", (err) => out(`error provider: ${describe(err)}`));

const network = await provider.getNetwork();
if (network.chainId !== chainID) {
  out(`error chain id ${network.chainId}, want ${chainID}`);
}

await provider.on("block", (number) => out(`block ${number} -`));

const contract = new Contract(token, ["event Transfer(address indexed from, address indexed to, uint256 value)"], provider);
await contract.on("Transfer", (from, to, value, payload) => {
  const l = payload.log;
  out(`log ${l.blockNumber} ${l.transactionHash} ${l.index} ${l.removed}`);
});

async function stop() {
  if (stopping) {
    return;
  }
  stopping = true;
  if (mode === "http") {
    out(`calls ${JSON.stringify({ calls, failed })}`);
  }
  await provider.destroy();
  out("done");
  process.exit(0);
}
process.stdin.on("data", (chunk) => {
  if (chunk.toString().includes("stop")) {
    stop();
  }
});
process.stdin.on("end", stop);
