// dropin-viem.mjs: send through a web3gate account the way a dapp does with viem and a JSON-RPC
// account (walletClient with `account: address`): viem puts in eth_sendTransaction only what
// the caller gave (no gas, no fees, no nonce; no `to` for a deployment) and leaves the rest to
// the node (here web3gate). No private key is used here.
//
// Environment:
//   WEB3GATE_URL             JSON-RPC endpoint, e.g. http://127.0.0.1:8545/v1/web3/mainnet
//   WEB3GATE_CLIENT_ID       sent as X-API-Key
//   WEB3GATE_TOKEN           sent as Authorization: Bearer <token>
//   WEB3GATE_CHAIN_ID        expected chain id (decimal)
//   WEB3GATE_ACCOUNT         an account the token's principal holds, funded on that chain, used
//                            by nothing else while this runs
//   WEB3GATE_ERC20_ARTIFACT  path of contracts/artifacts/TestERC20.json (abi, bytecode;
//                            constructor(name, symbol, decimals), mint open to anyone)
//   WEB3GATE_MODE            "fill": web3gate fills what the client left out
//                            (wallet.transactions.fill true), every send must be mined with
//                            status 1; "strict": fill false, every send must be refused with
//                            the specific error of the complete form
//
// Checks (fill): sendTransaction({to, value}); deployContract of TestERC20 (receipt
// contractAddress = the address of (account, nonce), code present); writeContract mint and
// transfer (the recipient's token balance checked).
// Checks (strict): the same calls answered -32602 with the missing field named.
// Each check first checks that viem left out what it is meant to leave out, so that the check
// tests what it says.
//
// Prints one line per check ("ok" or "FAIL") and exits 1 if any check failed, 2 if the
// environment is incomplete.
//
// Run: node e2e/js/dropin-viem.mjs   (after npm ci --prefix e2e)

import { readFileSync } from "node:fs";

import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  getContractAddress,
  http,
  isAddress,
  toHex,
} from "viem";

import { fail, script, viemDescribe, within } from "./harness.mjs";

const TIMEOUT_MS = 15_000; // per HTTP request
const RECEIPT_MS = 30_000; // per transaction, from send to receipt

const { usage, env, chainIDNumber, gateway, check, finish } = script("dropin-viem", {
  watchdogMs: 100_000,
  describe: viemDescribe,
});

const { url, clientID, token, account } = gateway(getAddress);
const chainID = chainIDNumber();
let artifact;
try {
  artifact = JSON.parse(readFileSync(env("WEB3GATE_ERC20_ARTIFACT"), "utf8"));
} catch (err) {
  usage(`WEB3GATE_ERC20_ARTIFACT: ${err.message}`);
}
const mode = env("WEB3GATE_MODE");
if (mode !== "fill" && mode !== "strict") {
  usage(`WEB3GATE_MODE must be fill or strict, got ${JSON.stringify(mode)}`);
}

const chain = defineChain({
  id: chainID,
  name: `web3gate ${chainID}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [url] } },
});

// wire records each JSON-RPC call the transports send and what came back (one call per HTTP
// request: no batch).
const wire = [];

const transport = http(url, {
  fetchOptions: { headers: { "X-API-Key": clientID, Authorization: `Bearer ${token}` } },
  timeout: TIMEOUT_MS,
  retryCount: 0,
  async onFetchRequest(req) {
    try {
      const body = await req.clone().json();
      const entry = { sent: body, received: undefined };
      wire.push(entry);
    } catch {
      // not JSON: nothing to record
    }
  },
  async onFetchResponse(res) {
    try {
      const body = await res.clone().json();
      const entry = wire.findLast((e) => e.received === undefined && e.sent?.id === body?.id);
      if (entry) {
        entry.received = body;
      }
    } catch {
      // not JSON
    }
  },
});

const wallet = createWalletClient({ account, chain, transport });
const client = createPublicClient({ chain, transport, pollingInterval: 250, cacheTime: 0 });

function freshAddress() {
  return getAddress(toHex(crypto.getRandomValues(new Uint8Array(20))));
}

// last is the last exchange of method.
function last(method) {
  return wire.findLast((x) => x.sent?.method === method);
}

// sentObject is the object viem sent in its last eth_sendTransaction; it fails unless every
// field of absent was left out.
function sentObject(absent) {
  const obj = last("eth_sendTransaction")?.sent.params?.[0];
  if (obj === undefined || typeof obj !== "object") {
    fail("viem sent no eth_sendTransaction object");
  }
  const there = absent.filter((f) => f in obj);
  if (there.length > 0) {
    fail(`viem now sends ${there.join(", ")} itself (${JSON.stringify(obj)}): this check no longer tests filling`);
  }
  return obj;
}

async function mined(hash, what) {
  const rc = await client.waitForTransactionReceipt({ hash, timeout: RECEIPT_MS, pollingInterval: 250 });
  if (rc.status !== "success") {
    fail(`${what} ${hash}: receipt status ${rc.status}, want success`);
  }
  return rc;
}

// refused runs send, which must be refused by web3gate's eth_sendTransaction with code and
// message (checked on the wire: viem may then try wallet_sendTransaction, and its error
// object carries the last answer).
async function refused(send, absent, code, message) {
  const before = wire.length;
  let result;
  try {
    result = await within(TIMEOUT_MS, "send", send());
  } catch {
    // the answer is checked on the wire below
  }
  if (result !== undefined) {
    fail(`accepted: ${JSON.stringify(result)}`);
  }
  const x = last("eth_sendTransaction");
  if (x === undefined || wire.indexOf(x) < before) {
    fail("viem sent no eth_sendTransaction");
  }
  const obj = sentObject(absent);
  const got = x.received?.error;
  if (got?.code !== code || got?.message !== message) {
    fail(`answered ${JSON.stringify(x.received)}, want error ${code} ${JSON.stringify(message)}`);
  }
  return `${code} ${message}; viem sent ${Object.keys(obj).join(", ")}`;
}

const FILLED = ["gas", "gasPrice", "maxFeePerGas", "maxPriorityFeePerGas", "nonce"];
const { abi, bytecode } = artifact;

async function fillChecks() {
  await check("sendTransaction {to, value}", async () => {
    const to = freshAddress();
    const hash = await within(TIMEOUT_MS, "sendTransaction", wallet.sendTransaction({ to, value: 1000n }));
    const obj = sentObject([...FILLED, "data", "input"]);
    const rc = await mined(hash, "transfer");
    const bal = await client.getBalance({ address: to });
    if (bal !== 1000n) {
      fail(`recipient balance ${bal}, want 1000`);
    }
    return `viem sent ${Object.keys(obj).join(", ")}; type ${rc.type}, gas used ${rc.gasUsed}, block ${rc.blockNumber}`;
  });

  let tokenAddress;
  await check("deployContract", async () => {
    const hash = await within(TIMEOUT_MS, "deployContract", wallet.deployContract({
      abi, bytecode, args: ["Dropin Viem", "DRV", 18],
    }));
    const obj = sentObject([...FILLED, "to"]);
    const rc = await mined(hash, "deployment");
    const tx = await client.getTransaction({ hash });
    const want = getContractAddress({ from: account, nonce: BigInt(tx.nonce) });
    if (rc.contractAddress === null || getAddress(rc.contractAddress) !== want) {
      fail(`receipt contractAddress ${rc.contractAddress}, want ${want} (account, nonce ${tx.nonce})`);
    }
    const code = await client.getCode({ address: want });
    if (code === undefined || code === "0x") {
      fail(`no code at ${want}`);
    }
    const symbol = await client.readContract({ address: want, abi, functionName: "symbol" });
    if (symbol !== "DRV") {
      fail(`symbol() ${symbol}, want DRV`);
    }
    tokenAddress = want;
    return `viem sent ${Object.keys(obj).join(", ")}; contract ${want}, block ${rc.blockNumber}`;
  });

  await check("writeContract mint and transfer", async () => {
    if (tokenAddress === undefined) {
      fail("no contract: the deployment failed");
    }
    const to = freshAddress();
    const mint = await within(TIMEOUT_MS, "mint", wallet.writeContract({
      address: tokenAddress, abi, functionName: "mint", args: [account, 1000n],
    }));
    sentObject(FILLED);
    await mined(mint, "mint");
    const transfer = await within(TIMEOUT_MS, "transfer", wallet.writeContract({
      address: tokenAddress, abi, functionName: "transfer", args: [to, 7n],
    }));
    const obj = sentObject([...FILLED, "value"]);
    const rc = await mined(transfer, "transfer");
    const bal = await client.readContract({ address: tokenAddress, abi, functionName: "balanceOf", args: [to] });
    if (bal !== 7n) {
      fail(`recipient's token balance ${bal}, want 7`);
    }
    return `viem sent ${Object.keys(obj).join(", ")}; block ${rc.blockNumber}`;
  });
}

async function strictChecks() {
  await check("strict: sendTransaction {to, value}", () =>
    refused(() => wallet.sendTransaction({ to: freshAddress(), value: 1000n }), [...FILLED, "data"], -32602, "missing field: gas"));

  await check("strict: deployContract", () =>
    refused(() => wallet.deployContract({ abi, bytecode, args: ["Dropin Viem", "DRV", 18] }), [...FILLED, "to"], -32602, "missing field: to"));

  await check("strict: writeContract transfer", () =>
    refused(() => wallet.writeContract({
      address: freshAddress(), abi, functionName: "transfer", args: [freshAddress(), 0n],
    }), FILLED, -32602, "missing field: gas"));
}

if (mode === "fill") {
  await fillChecks();
} else {
  await strictChecks();
}
finish();
