// replace-ethers.mjs: what ethers v6 shows a dapp when web3gate replaces the transaction it
// sent: tx.wait() on the hash the dapp got rejects with ethers' TransactionReplacedError
// (code TRANSACTION_REPLACED) carrying the replacement's receipt, reason "repriced" for a fee
// bump or POST /v1/transactions/{hash}/speedup and "cancelled" for .../cancel.
//
// ethers detects a replacement from the transaction object it fetched after the send (sender,
// nonce, to, value, data) and the block it started at: once the sender's count passes the
// nonce and the original hash is in no block, it scans the blocks since for the same sender
// and nonce. web3gate has to answer eth_getTransactionByHash, eth_getTransactionReceipt,
// eth_getTransactionCount and eth_getBlockByNumber as the node does for that to work.
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
//   repriced   signer.sendTransaction({to, value}) (fees left to web3gate), then blocks whose
//              base fee is ten times the filled fee cap until web3gate bumps; tx.wait()
//              rejects with TRANSACTION_REPLACED, reason "repriced", the bump's receipt
//   sped up    a send, then POST .../speedup before any block; tx.wait() rejects with reason
//              "repriced", the speed-up's receipt (and so does the wait of the transaction as
//              provider.getTransaction read it, made replaceableTransaction(block before the send))
//   cancelled  a send, then POST .../cancel before any block; tx.wait() rejects with reason
//              "cancelled", the zero-value self-transfer's receipt; nothing reached the recipient
//   and for each, the gateway's record (both hashes, one replaced) and its answers for the
//   original hash equal the node's.
//
// Run: node e2e/js/replace-ethers.mjs   (after npm ci --prefix e2e; see e2e/replacement_test.go)

import { FetchRequest, JsonRpcProvider, Network, getAddress, hexlify, isError, randomBytes } from "ethers";

import { fail, script, within } from "./harness.mjs";
import { checkVersions, gatewayREST, nodeClient, sameAnswers } from "./replace-node.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request
const SEND_MS = 20_000; // sendTransaction, until ethers has the transaction object

const { env, chainID: readChainID, gateway, check, finish } = script("replace-ethers", {
  watchdogMs: 120_000,
  describe(err) {
    const info = err?.info?.error ? ` (rpc error: ${JSON.stringify(err.info.error)})` : "";
    return `${err?.shortMessage ?? err?.message ?? err}${info}`;
  },
});

const { url, clientID, token, account } = gateway(getAddress);
const chainID = readChainID();
const node = nodeClient(env("WEB3GATE_NODE_URL"));
const rest = gatewayREST(url, clientID, token);

const req = new FetchRequest(url);
req.timeout = TIMEOUT_MS;
req.setHeader("X-API-Key", clientID);
req.setHeader("Authorization", `Bearer ${token}`);
const network = Network.from(chainID);
// pollingInterval 200: the block events that drive tx.wait()'s replacement scan come from
// eth_blockNumber polls. cacheTimeout -1: every read reaches the gateway.
const provider = new JsonRpcProvider(req, network, {
  staticNetwork: network,
  batchMaxCount: 1,
  pollingInterval: 200,
  cacheTimeout: -1,
});
const signer = await provider.getSigner(account);

function freshAddress() {
  return getAddress(hexlify(randomBytes(20)));
}

// send sends a transfer to a fresh address with every fee left to web3gate and returns
// ethers' TransactionResponse (fetched from the gateway: eth_getTransactionByHash).
async function send() {
  const to = freshAddress();
  const value = 1_000_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000));
  const tx = await within(SEND_MS, "sendTransaction", signer.sendTransaction({ to, value }));
  if (tx.type !== 2 || tx.maxFeePerGas == null) {
    fail(`${tx.hash}: type ${tx.type}, want 2 with the fees web3gate filled`);
  }
  if (tx.to !== to || tx.value !== value || tx.from !== account) {
    fail(`${tx.hash}: from ${tx.from} to ${tx.to} value ${tx.value}, want ${account} ${to} ${value}`);
  }
  return tx;
}

// replaced waits for tx.wait() while mine runs and returns its TransactionReplacedError.
async function replaced(tx, mine) {
  const waiting = tx.wait();
  const blocks = await mine(waiting);
  let receipt;
  try {
    receipt = await waiting;
  } catch (err) {
    if (!isError(err, "TRANSACTION_REPLACED")) {
      throw err;
    }
    return { err, blocks };
  }
  fail(`tx.wait() resolved with the receipt of ${receipt?.hash} in block ${receipt?.blockNumber}, want TRANSACTION_REPLACED`);
}

// checkReplacement checks what ethers' error says of the replacement: its receipt (status 1,
// mined) and its transaction at the same nonce.
function checkReplacement(tx, err, wantReason, wantCancelled) {
  if (err.reason !== wantReason || err.cancelled !== wantCancelled) {
    fail(`reason ${err.reason}, cancelled ${err.cancelled}; want ${wantReason}, ${wantCancelled}`);
  }
  if (err.hash === tx.hash || err.receipt?.hash !== err.hash || err.replacement?.hash !== err.hash) {
    fail(`error hash ${err.hash}, receipt ${err.receipt?.hash}, replacement ${err.replacement?.hash}; want one new hash, not ${tx.hash}`);
  }
  if (err.receipt.status !== 1 || err.receipt.from !== account) {
    fail(`replacement receipt status ${err.receipt.status} from ${err.receipt.from}`);
  }
  const r = err.replacement;
  if (r.nonce !== tx.nonce || r.from !== account) {
    fail(`replacement nonce ${r.nonce} from ${r.from}, want ${tx.nonce} from ${account}`);
  }
  // geth's replacement rule: both fees at least 10 % above the replaced transaction's.
  if (r.maxFeePerGas * 10n < tx.maxFeePerGas * 11n || r.maxPriorityFeePerGas * 10n < tx.maxPriorityFeePerGas * 11n) {
    fail(`replacement fees ${r.maxFeePerGas}/${r.maxPriorityFeePerGas}, want ≥ 110 % of ${tx.maxFeePerGas}/${tx.maxPriorityFeePerGas}`);
  }
  return r;
}

// theNodesAnswers checks that the gateway answers eth_getTransactionByHash and
// eth_getTransactionReceipt of both hashes as the node does, and that ethers reads the
// original as gone.
async function theNodesAnswers(tx, err) {
  const diff = await sameAnswers(rest, node, [tx.hash, err.hash]);
  if ((await provider.getTransaction(tx.hash)) !== null || (await provider.getTransactionReceipt(tx.hash)) !== null) {
    fail(`ethers still reads ${tx.hash} (the replaced transaction) through the gateway`);
  }
  return diff;
}

const hashes = {};
let spikedFee = 0n;
let baseFee = 0n;

await check("repriced: tx.wait() rejects with TRANSACTION_REPLACED, reason repriced", async () => {
  baseFee = (await provider.getBlock("latest")).baseFeePerGas;
  const tx = await send();
  // Every block from now on has a base fee ten times the filled fee cap: the transaction
  // cannot be mined until web3gate bumps it.
  spikedFee = tx.maxFeePerGas * 10n;
  const { err, blocks } = await replaced(tx, (waiting) => node.mineUntil(waiting, { baseFee: spikedFee }));
  const r = checkReplacement(tx, err, "repriced", false);
  if (r.to !== tx.to || r.value !== tx.value || r.data !== tx.data) {
    fail(`replacement to ${r.to} value ${r.value} data ${r.data}, want the original's ${tx.to} ${tx.value} ${tx.data}`);
  }
  if (r.maxFeePerGas < spikedFee) {
    fail(`replacement fee cap ${r.maxFeePerGas} below the base fee ${spikedFee} it was mined at`);
  }
  hashes.repriced = [tx.hash, err.hash];
  return `${tx.hash} (nonce ${tx.nonce}, fee cap ${tx.maxFeePerGas}, tip ${tx.maxPriorityFeePerGas}) replaced by ${err.hash} (fee cap ${r.maxFeePerGas}, tip ${r.maxPriorityFeePerGas}) in block ${err.receipt.blockNumber}, ${blocks} blocks at base fee ${spikedFee} after the send`;
});

await check("repriced: the gateway answers as the node does", async () => {
  if (!hashes.repriced) fail("no replacement to look at");
  const [orig, repl] = hashes.repriced;
  return theNodesAnswers({ hash: orig }, { hash: repl });
});

await check("repriced: the gateway's record", async () => {
  if (!hashes.repriced) fail("no replacement to look at");
  return rest.eventually(() => checkVersions(rest, ...hashes.repriced, "bump", ["mined", "confirmed"]));
});

// byRoute sends a transfer, starts tx.wait(), asks the route action (speedup, cancel) to
// replace it before any block, and mines until the wait ends.
// A second wait runs on the same transaction as provider.getTransaction read it, made
// replaceable from a block number read before the send (what a dapp that kept only the hash
// does, as the README says): it must reject the same way.
async function byRoute(action) {
  const before = await provider.getBlockNumber();
  const tx = await send();
  const fetched = (await provider.getTransaction(tx.hash)).replaceableTransaction(before);
  const fetchedWait = fetched.wait();
  fetchedWait.catch(() => {}); // awaited below
  let answer;
  const { err, blocks } = await replaced(tx, async (waiting) => {
    answer = await rest.replace(tx.hash, action);
    // Blocks until both waits have ended: each learns of the replacement from its own
    // block events, and one that was between polls when the other ended needs a block more.
    return node.mineUntil(Promise.allSettled([waiting, fetchedWait]), {});
  });
  if (answer.signed.hash.toLowerCase() !== err.hash.toLowerCase()) {
    fail(`the ${action} route signed ${JSON.stringify(answer.signed)}, ethers found ${err.hash}`);
  }
  let other;
  try {
    await within(TIMEOUT_MS, "the wait of provider.getTransaction's response", fetchedWait);
  } catch (e) {
    other = e;
  }
  if (!isError(other, "TRANSACTION_REPLACED") || other.hash !== err.hash || other.reason !== err.reason) {
    fail(`the wait of provider.getTransaction's response, made replaceable, ended with ${other?.code} ${other?.reason} ${other?.hash ?? other?.message}; want TRANSACTION_REPLACED ${err.reason} ${err.hash}`);
  }
  return { tx, err, blocks };
}

await check("sped up: tx.wait() rejects with TRANSACTION_REPLACED, reason repriced", async () => {
  // The base fee back where it was, so that the sends are priced as before the spike.
  await node.mine(baseFee);
  const { tx, err, blocks } = await byRoute("speedup");
  const r = checkReplacement(tx, err, "repriced", false);
  if (r.to !== tx.to || r.value !== tx.value || r.data !== tx.data) {
    fail(`replacement to ${r.to} value ${r.value} data ${r.data}, want the original's ${tx.to} ${tx.value} ${tx.data}`);
  }
  hashes.spedup = [tx.hash, err.hash];
  return `${tx.hash} (nonce ${tx.nonce}) sped up by ${err.hash} (fee cap ${r.maxFeePerGas}, tip ${r.maxPriorityFeePerGas}) in block ${err.receipt.blockNumber}, ${blocks} block(s) after the speed-up`;
});

await check("sped up: the gateway answers as the node does, and its record", async () => {
  if (!hashes.spedup) fail("no replacement to look at");
  const [orig, repl] = hashes.spedup;
  const answers = await theNodesAnswers({ hash: orig }, { hash: repl });
  return `${answers}; ${await rest.eventually(() => checkVersions(rest, orig, repl, "speedup", ["mined", "confirmed"]))}`;
});

await check("cancelled: tx.wait() rejects with TRANSACTION_REPLACED, reason cancelled", async () => {
  const { tx, err, blocks } = await byRoute("cancel");
  const r = checkReplacement(tx, err, "cancelled", true);
  if (r.to !== account || r.value !== 0n || r.data !== "0x") {
    fail(`replacement to ${r.to} value ${r.value} data ${r.data}, want a zero-value self-transfer`);
  }
  const got = await provider.getBalance(tx.to);
  if (got !== 0n) {
    fail(`the recipient ${tx.to} of the cancelled transfer holds ${got}`);
  }
  hashes.cancelled = [tx.hash, err.hash];
  return `${tx.hash} (nonce ${tx.nonce}) cancelled by ${err.hash} (fee cap ${r.maxFeePerGas}, tip ${r.maxPriorityFeePerGas}) in block ${err.receipt.blockNumber}, ${blocks} block(s) after the cancel`;
});

await check("cancelled: the gateway answers as the node does", async () => {
  if (!hashes.cancelled) fail("no replacement to look at");
  const [orig, repl] = hashes.cancelled;
  return theNodesAnswers({ hash: orig }, { hash: repl });
});

await check("cancelled: the gateway's record", async () => {
  if (!hashes.cancelled) fail("no replacement to look at");
  return rest.eventually(() => checkVersions(rest, ...hashes.cancelled, "cancel", ["cancelled"]));
});

for (const [what, [orig, repl]] of Object.entries(hashes)) {
  console.log(`hashes ${what} ${orig} ${repl}`);
}
provider.destroy();
finish();
