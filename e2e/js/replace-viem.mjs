// replace-viem.mjs: what viem shows a dapp when web3gate replaces the transaction it sent:
// waitForTransactionReceipt({ hash, onReplaced }) on the hash the dapp got calls onReplaced
// with reason 'repriced' for a fee bump or POST /v1/transactions/{hash}/speedup and
// 'cancelled' for .../cancel, and returns the replacement's receipt.
//
// viem detects a replacement from the original transaction, which it reads with
// eth_getTransactionByHash while it is pending (when the wait starts), then, while the
// original has no receipt, scans each new block for another transaction of the same sender
// and nonce. web3gate has to answer those reads as the node does for that to work.
//
// Environment:
//   WEB3GATE_URL        JSON-RPC endpoint, e.g. http://127.0.0.1:8545/v1/web3/mainnet
//   WEB3GATE_CLIENT_ID  sent as X-API-Key
//   WEB3GATE_TOKEN      sent as Authorization: Bearer <token>
//   WEB3GATE_CHAIN_ID   expected chain id (decimal)
//   WEB3GATE_ACCOUNT    an account the token's principal holds, funded, used by nothing else
//   WEB3GATE_NODE_URL   the anvil node behind the gateway, started with --no-mining; the gateway
//                       bumps a transaction not mined after a few blocks (bump.after)
//
// Checks:
//   repriced   wallet.sendTransaction({to, value}) (fees left to web3gate), then blocks whose
//              base fee is ten times the filled fee cap until web3gate bumps; onReplaced
//              gets reason 'repriced' and the wait returns the bump's receipt
//   sped up    a send, then POST .../speedup before any block; onReplaced gets 'repriced',
//              the wait returns the speed-up's receipt
//   cancelled  a send, then POST .../cancel before any block; onReplaced gets 'cancelled',
//              the wait returns the zero-value self-transfer's receipt
//   and for each, the gateway's record (both hashes, one replaced) and its answers for the
//   original hash equal the node's
//   late       a wait on each original hash started after its replacement was mined, with the
//              original's fields as `replacement`: onReplaced through
//              eth_getTransactionBySenderAndNonce (forwarded to the node)
//
// Run: node e2e/js/replace-viem.mjs   (after npm ci --prefix e2e; see e2e/replacement_test.go)

import { createPublicClient, createWalletClient, defineChain, getAddress, http, isAddressEqual, toHex } from "viem";

import { fail, script, viemDescribe, within } from "./harness.mjs";
import { checkVersions, gatewayREST, nodeClient, sameAnswers } from "./replace-node.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request
const SEND_MS = 20_000; // sendTransaction

const { env, chainIDNumber, gateway, check, finish } = script("replace-viem", {
  watchdogMs: 120_000,
  describe: viemDescribe,
});

const { url, clientID, token, account } = gateway(getAddress);
const chainID = chainIDNumber();
const node = nodeClient(env("WEB3GATE_NODE_URL"));
const rest = gatewayREST(url, clientID, token);

const chain = defineChain({
  id: chainID,
  name: `web3gate ${chainID}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [url] } },
});

// wire records the JSON-RPC calls viem sends, in order.
const wire = [];
const transport = http(url, {
  fetchOptions: { headers: { "X-API-Key": clientID, Authorization: `Bearer ${token}` } },
  timeout: TIMEOUT_MS,
  retryCount: 0,
  async onFetchRequest(req) {
    try {
      const body = await req.clone().json();
      for (const c of Array.isArray(body) ? body : [body]) {
        wire.push(c);
      }
    } catch {
      // not JSON: nothing to record
    }
  },
});
const wallet = createWalletClient({ account, chain, transport });
// client reads; each wait gets a client of its own (replaced): viem shares a block watcher
// between the waits of one client, and a new wait on a running watcher is not called until the
// next block, which here comes only after the wait has read the original.
let client = createPublicClient({ chain, transport, pollingInterval: 200, cacheTime: 0 });

function freshAddress() {
  return getAddress(toHex(crypto.getRandomValues(new Uint8Array(20))));
}

// sentTxs are the transactions sent, by hash, as the gateway read them while pending.
const sentTxs = new Map();

// send sends a transfer to a fresh address with every fee left to web3gate and returns its
// hash and the transaction as the gateway reads it.
async function send() {
  const to = freshAddress();
  const value = 1_000_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000));
  const hash = await within(SEND_MS, "sendTransaction", wallet.sendTransaction({ to, value }));
  const sent = wire.findLast((c) => c.method === "eth_sendTransaction")?.params?.[0];
  if (!sent || "maxFeePerGas" in sent || "gasPrice" in sent) {
    fail(`viem sent ${JSON.stringify(sent)}, want an eth_sendTransaction without fees`);
  }
  const tx = await client.getTransaction({ hash });
  sentTxs.set(hash, tx);
  if (tx.type !== "eip1559" || !isAddressEqual(tx.to, to) || tx.value !== value || !isAddressEqual(tx.from, account)) {
    fail(`${hash}: type ${tx.type} from ${tx.from} to ${tx.to} value ${tx.value}, want eip1559 ${account} ${to} ${value}`);
  }
  return tx;
}

// readOriginal waits until viem's wait, started when the wire held mark calls, has read the
// pending original (eth_getTransactionByHash, then the receipt it asks for after it): what
// it matches replacements against. A replacement broadcast before that read would leave
// viem nothing to match.
async function readOriginal(hash, mark) {
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const calls = wire.slice(mark);
    const read = calls.findIndex((c) => c.method === "eth_getTransactionByHash" && c.params?.[0] === hash);
    if (read >= 0 && calls.slice(read + 1).some((c) => c.method === "eth_getTransactionReceipt" && c.params?.[0] === hash)) {
      return;
    }
    if (Date.now() > deadline) {
      fail(`viem's waitForTransactionReceipt did not read ${hash} within ${TIMEOUT_MS} ms`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

// replaced runs waitForTransactionReceipt on tx's hash with onReplaced, then act (if any),
// then mines blocks (at baseFee) until the wait returns; it returns the receipt and what
// onReplaced got.
async function replaced(tx, { act, baseFee } = {}) {
  let replacement;
  const mark = wire.length;
  client = createPublicClient({ chain, transport, pollingInterval: 200, cacheTime: 0 });
  const waiting = client.waitForTransactionReceipt({
    hash: tx.hash,
    pollingInterval: 200,
    timeout: 90_000,
    onReplaced: (r) => {
      replacement = r;
    },
  });
  waiting.catch(() => {}); // awaited below
  await readOriginal(tx.hash, mark);
  const answer = act ? await act() : undefined;
  const blocks = await node.mineUntil(waiting, { baseFee });
  const receipt = await waiting;
  if (!replacement) {
    fail(`waitForTransactionReceipt returned the receipt of ${receipt.transactionHash} without calling onReplaced`);
  }
  return { receipt, replacement, blocks, answer };
}

// checkReplacement checks what onReplaced got and the receipt returned.
function checkReplacement(tx, { receipt, replacement }, wantReason) {
  const { reason, replacedTransaction, transaction: r, transactionReceipt } = replacement;
  if (reason !== wantReason) {
    fail(`onReplaced reason ${reason}, want ${wantReason}`);
  }
  if (replacedTransaction.hash !== tx.hash) {
    fail(`onReplaced replacedTransaction ${replacedTransaction.hash}, want ${tx.hash}`);
  }
  if (r.hash === tx.hash || transactionReceipt.transactionHash !== r.hash || receipt.transactionHash !== r.hash) {
    fail(`replacement ${r.hash}, its receipt ${transactionReceipt.transactionHash}, returned ${receipt.transactionHash}: want one new hash, not ${tx.hash}`);
  }
  if (receipt.status !== "success" || !isAddressEqual(receipt.from, account)) {
    fail(`replacement receipt status ${receipt.status} from ${receipt.from}`);
  }
  if (r.nonce !== tx.nonce || !isAddressEqual(r.from, account)) {
    fail(`replacement nonce ${r.nonce} from ${r.from}, want ${tx.nonce} from ${account}`);
  }
  // geth's replacement rule: both fees at least 10 % above the replaced transaction's.
  if (r.maxFeePerGas * 10n < tx.maxFeePerGas * 11n || r.maxPriorityFeePerGas * 10n < tx.maxPriorityFeePerGas * 11n) {
    fail(`replacement fees ${r.maxFeePerGas}/${r.maxPriorityFeePerGas}, want ≥ 110 % of ${tx.maxFeePerGas}/${tx.maxPriorityFeePerGas}`);
  }
  return r;
}

const hashes = {};
let baseFee = 0n;

await check("repriced: waitForTransactionReceipt calls onReplaced with reason repriced", async () => {
  baseFee = (await client.getBlock({ blockTag: "latest" })).baseFeePerGas;
  const tx = await send();
  // Every block from now on has a base fee ten times the filled fee cap: the transaction
  // cannot be mined until web3gate bumps it.
  const spiked = tx.maxFeePerGas * 10n;
  const res = await replaced(tx, { baseFee: spiked });
  const r = checkReplacement(tx, res, "repriced");
  if (!isAddressEqual(r.to, tx.to) || r.value !== tx.value || r.input !== tx.input) {
    fail(`replacement to ${r.to} value ${r.value} input ${r.input}, want the original's ${tx.to} ${tx.value} ${tx.input}`);
  }
  if (r.maxFeePerGas < spiked) {
    fail(`replacement fee cap ${r.maxFeePerGas} below the base fee ${spiked} it was mined at`);
  }
  hashes.repriced = [tx.hash, r.hash];
  return `${tx.hash} (nonce ${tx.nonce}, fee cap ${tx.maxFeePerGas}, tip ${tx.maxPriorityFeePerGas}) replaced by ${r.hash} (fee cap ${r.maxFeePerGas}, tip ${r.maxPriorityFeePerGas}) in block ${res.receipt.blockNumber}, ${res.blocks} blocks at base fee ${spiked} after the send`;
});

await check("repriced: the gateway answers as the node does", async () => {
  if (!hashes.repriced) fail("no replacement to look at");
  return sameAnswers(rest, node, hashes.repriced);
});

await check("repriced: the gateway's record", async () => {
  if (!hashes.repriced) fail("no replacement to look at");
  return rest.eventually(() => checkVersions(rest, ...hashes.repriced, "bump", ["mined", "confirmed"]));
});

// byRoute sends a transfer, starts waitForTransactionReceipt, asks the route action
// (speedup, cancel) to replace it once viem has read it, and mines until the wait returns.
async function byRoute(action) {
  const tx = await send();
  const res = await replaced(tx, { act: () => rest.replace(tx.hash, action) });
  if (res.answer.signed.hash.toLowerCase() !== res.replacement.transaction.hash.toLowerCase()) {
    fail(`the ${action} route signed ${JSON.stringify(res.answer.signed)}, viem found ${res.replacement.transaction.hash}`);
  }
  return { tx, res };
}

await check("sped up: waitForTransactionReceipt calls onReplaced with reason repriced", async () => {
  // The base fee back where it was, so that the sends are priced as before the spike.
  await node.mine(baseFee);
  const { tx, res } = await byRoute("speedup");
  const r = checkReplacement(tx, res, "repriced");
  if (!isAddressEqual(r.to, tx.to) || r.value !== tx.value || r.input !== tx.input) {
    fail(`replacement to ${r.to} value ${r.value} input ${r.input}, want the original's ${tx.to} ${tx.value} ${tx.input}`);
  }
  hashes.spedup = [tx.hash, r.hash];
  return `${tx.hash} (nonce ${tx.nonce}) sped up by ${r.hash} (fee cap ${r.maxFeePerGas}, tip ${r.maxPriorityFeePerGas}) in block ${res.receipt.blockNumber}, ${res.blocks} block(s) after the speed-up`;
});

await check("sped up: the gateway answers as the node does, and its record", async () => {
  if (!hashes.spedup) fail("no replacement to look at");
  const answers = await sameAnswers(rest, node, hashes.spedup);
  return `${answers}; ${await rest.eventually(() => checkVersions(rest, ...hashes.spedup, "speedup", ["mined", "confirmed"]))}`;
});

await check("cancelled: waitForTransactionReceipt calls onReplaced with reason cancelled", async () => {
  const { tx, res } = await byRoute("cancel");
  const r = checkReplacement(tx, res, "cancelled");
  if (!isAddressEqual(r.to, account) || r.value !== 0n || r.input !== "0x") {
    fail(`replacement to ${r.to} value ${r.value} input ${r.input}, want a zero-value self-transfer`);
  }
  const got = await client.getBalance({ address: tx.to });
  if (got !== 0n) {
    fail(`the recipient ${tx.to} of the cancelled transfer holds ${got}`);
  }
  hashes.cancelled = [tx.hash, r.hash];
  return `${tx.hash} (nonce ${tx.nonce}) cancelled by ${r.hash} (fee cap ${r.maxFeePerGas}, tip ${r.maxPriorityFeePerGas}) in block ${res.receipt.blockNumber}, ${res.blocks} block(s) after the cancel`;
});

await check("cancelled: the gateway answers as the node does", async () => {
  if (!hashes.cancelled) fail("no replacement to look at");
  return sameAnswers(rest, node, hashes.cancelled);
});

await check("cancelled: the gateway's record", async () => {
  if (!hashes.cancelled) fail("no replacement to look at");
  return rest.eventually(() => checkVersions(rest, ...hashes.cancelled, "cancel", ["cancelled"]));
});

// A wait that starts after the replacement was mined (a dapp reloaded, the original gone from
// every pool) cannot read the original: given its known fields as `replacement`, viem looks the
// nonce slot up with eth_getTransactionBySenderAndNonce, which the gateway forwards.
await check("late wait with replacement: onReplaced through eth_getTransactionBySenderAndNonce", async () => {
  const seen = [];
  for (const [what, [orig, repl]] of Object.entries(hashes)) {
    const known = sentTxs.get(orig);
    let replacement;
    const mark = wire.length;
    const late = createPublicClient({ chain, transport, pollingInterval: 200, cacheTime: 0 });
    const receipt = await late.waitForTransactionReceipt({
      hash: orig,
      pollingInterval: 200,
      timeout: TIMEOUT_MS,
      replacement: { from: known.from, nonce: known.nonce, to: known.to, value: known.value, input: known.input },
      onReplaced: (r) => {
        replacement = r;
      },
    });
    if (!wire.slice(mark).some((c) => c.method === "eth_getTransactionBySenderAndNonce")) {
      fail(`${what}: viem did not ask eth_getTransactionBySenderAndNonce`);
    }
    const reason = what === "cancelled" ? "cancelled" : "repriced";
    if (replacement?.reason !== reason || replacement.transaction.hash !== repl || receipt.transactionHash !== repl) {
      fail(`${what}: onReplaced ${replacement?.reason} with ${replacement?.transaction?.hash}, receipt of ${receipt.transactionHash}; want ${reason}, ${repl}`);
    }
    seen.push(`${what}: ${orig} → ${repl}`);
  }
  if (seen.length !== 3) {
    fail(`only ${seen.length} replacement(s) to look at`);
  }
  return seen.join("; ");
});

for (const [what, [orig, repl]] of Object.entries(hashes)) {
  console.log(`hashes ${what} ${orig} ${repl}`);
}
finish();
