// realtime-ethers.mjs: follow a chain through web3gate's WebSocket with ethers v6, the way a dapp
// does: a WebSocketProvider on a URL that carries the client id (the only credential a URL-only
// wallet has), provider.on("block") and a contract event listener, contract.on("Transfer").
// ethers' WebSocketProvider runs on the `ws` package in Node; both listeners are eth_subscribe
// subscriptions (newHeads, logs) on the one socket.
//
// It checks nothing itself: it reports what ethers delivered, one line each, and the Go test
// (realtime_test.go) compares that with the chain (every block and every event exactly once):
//
//   ready                                              both eth_subscribe calls answered
//   block <number> -                                   a "block" event (ethers gives no hash)
//   log <blockNumber> <txHash> <logIndex> <removed>    a Transfer event of the token
//   error <text>                                       an error event, a failed subscription,
//                                                      the socket closing, or the wrong chain
//   done                                               after "stop" on stdin (or stdin's end)
//
// Environment:
//   WEB3GATE_WS_URL         the WebSocket URL, e.g. ws://127.0.0.1:8545/v1/web3/mainnet/<clientId>
//   WEB3GATE_CHAIN_ID       the chain id the provider must find (decimal)
//   WEB3GATE_TOKEN_ADDRESS  the ERC-20 whose Transfer events are followed
//
// Exits 0 after "done", 1 when the watchdog fires, 2 when the environment is incomplete.
//
// Run: node e2e/js/realtime-ethers.mjs   (after npm ci --prefix e2e)

import { Contract, WebSocketProvider, getAddress } from "ethers";

import { script } from "./harness.mjs";

const { env, chainID: readChainID, usage } = script("realtime-ethers", { watchdogMs: 120_000 });

const url = env("WEB3GATE_WS_URL");
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
const provider = new WebSocketProvider(url);

provider.websocket.addEventListener("close", (ev) => {
  if (!stopping) {
    out(`error socket closed: code ${ev.code} ${JSON.stringify(ev.reason?.toString() ?? "")}`);
  }
});
provider.websocket.addEventListener("error", (ev) => {
  out(`error socket: ${describe(ev?.error ?? ev)}`);
});

// Readiness: the answers to ethers' eth_subscribe calls, seen through its debug events.
const subscribeIDs = new Set();
let subscribed = 0;
provider.on("debug", (ev) => {
  if (ev.action === "sendRpcPayload") {
    for (const p of [ev.payload].flat()) {
      if (p?.method === "eth_subscribe") {
        subscribeIDs.add(p.id);
      }
    }
  } else if (ev.action === "receiveRpcResult") {
    for (const r of [ev.result].flat()) {
      if (!subscribeIDs.has(r?.id)) {
        continue;
      }
      if (r.error) {
        out(`error eth_subscribe: ${JSON.stringify(r.error)}`);
        continue;
      }
      subscribed++;
      if (subscribed === 2) {
        out("ready");
      }
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
