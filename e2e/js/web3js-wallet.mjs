// web3js-wallet.mjs: use a web3gate account from web3.js v4 the way a dapp does with a node's
// accounts: web3.eth.sendTransaction / Contract.send with `from` and no wallet in the client,
// so the gateway holds the key, takes the nonce, fills what web3.js left out, signs and
// broadcasts. No private key is used here.
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
//
// Checks: getChainId, getBlockNumber, getBalance; sendTransaction({from, to, value}), with
// type 0, and with the members a dapp written for web3.js's own signing adds (the pending
// nonce it read, gasLimit, type, input, chainId, networkId, hardfork, common), each mined
// with status 1 and the value received; a TestERC20 deployed with Contract.deploy().send
// (receipt contractAddress = the contract's address, code present), then methods.mint and
// methods.transfer(to, 1).send (token balances moved); eth.sign and personal.sign recovered
// to the account with accounts.recover; signTransaction (eth_signTransaction answers the raw
// signed transaction as a 0x-hex string) then sendSignedTransaction, mined; and a send
// without the bearer token refused with HTTP 401 / code 4100. For each transaction, what
// web3gate filled in (its status object's `filled`) is checked. Every ok line shows what
// web3.js sent for the call (method names, and the transaction object it built).
//
// Prints one line per check ("ok" or "FAIL") and exits 1 if any check failed, 2 if the
// environment is incomplete.
//
// Run: node e2e/js/web3js-wallet.mjs   (after npm ci --prefix e2e)

import { readFileSync } from "node:fs";

import { HttpProvider, Web3 } from "web3";

import { fail, script, within } from "./harness.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request
const RECEIPT_MS = 20_000; // per transaction, from the call to the receipt

// describe shows web3.js's error, its cause (the JSON-RPC error object) and the inner error
// of a transaction that failed, with the HTTP status when the answer was not 2xx.
function describe(err) {
  const parts = [err?.message ?? String(err)];
  for (const e of new Set([err?.cause, err?.innerError, err?.error])) {
    if (e !== undefined && e !== null) {
      parts.push(`(${e.message ?? ""} ${JSON.stringify(e, (_, v) => (typeof v === "bigint" ? v.toString() : v))})`);
    }
  }
  if (err?.statusCode !== undefined) {
    parts.push(`HTTP ${err.statusCode}`);
  }
  return parts.join(" ");
}

const { usage, env, chainID: readChainID, check, finish } = script("web3js-wallet", {
  watchdogMs: 90_000,
  describe,
});

const url = env("WEB3GATE_URL");
const clientID = env("WEB3GATE_CLIENT_ID");
const token = env("WEB3GATE_TOKEN");
const chainID = readChainID();
const accountText = env("WEB3GATE_ACCOUNT");
if (!Web3.utils.isAddress(accountText)) {
  usage(`WEB3GATE_ACCOUNT must be an address, got ${JSON.stringify(accountText)}`);
}
const account = Web3.utils.toChecksumAddress(accountText);
const artifactPath = env("WEB3GATE_ERC20_ARTIFACT");
let artifact;
try {
  artifact = JSON.parse(readFileSync(artifactPath, "utf8"));
} catch (err) {
  usage(`WEB3GATE_ERC20_ARTIFACT ${artifactPath}: ${err.message}`);
}
if (!Array.isArray(artifact.abi) || typeof artifact.bytecode !== "string") {
  usage(`WEB3GATE_ERC20_ARTIFACT ${artifactPath} has no abi and bytecode`);
}

// WireProvider is web3.js's HttpProvider, each request bounded by TIMEOUT_MS, recording every
// JSON-RPC call web3.js makes with the HTTP status and the answer, so that a check can show
// exactly what the library sent.
class WireProvider extends HttpProvider {
  wire = [];

  async request(payload, requestOptions) {
    const entry = { sent: payload, status: 200 };
    this.wire.push(entry);
    try {
      entry.received = await super.request(payload, { ...requestOptions, signal: AbortSignal.timeout(TIMEOUT_MS) });
      return entry.received;
    } catch (err) {
      entry.status = err?.statusCode;
      entry.received = { error: err?.cause ?? err?.message };
      throw err;
    }
  }

  // calls returns the calls of method from mark on (an index into wire).
  calls(method, mark = 0) {
    return this.wire.slice(mark).filter((x) => x.sent.method === method);
  }

  // last returns the last call of method from mark on, or fails.
  last(method, mark = 0) {
    const calls = this.calls(method, mark);
    if (calls.length === 0) {
      fail(`web3.js sent no ${method}; it sent ${this.methods(mark)}`);
    }
    return calls[calls.length - 1];
  }

  // methods lists the methods sent from mark on, for the report.
  methods(mark = 0) {
    return this.wire
      .slice(mark)
      .map((x) => x.sent.method)
      .join(",");
  }
}

function web3For({ withToken = true } = {}) {
  const headers = { "X-API-Key": clientID };
  if (withToken) {
    headers.Authorization = `Bearer ${token}`;
  }
  const provider = new WireProvider(url, { providerOptions: { headers } });
  const web3 = new Web3(provider);
  web3.transactionPollingInterval = 250;
  web3.transactionReceiptPollingInterval = 250;
  web3.transactionConfirmationPollingInterval = 250;
  web3.transactionPollingTimeout = RECEIPT_MS; // milliseconds, as every web3.js timeout
  web3.transactionSendTimeout = RECEIPT_MS;
  return { web3, wire: provider };
}

const { web3, wire } = web3For();

// freshAddress is a random address nobody has used: its balance starts at 0.
function freshAddress() {
  return Web3.utils.toChecksumAddress(Web3.utils.randomHex(20));
}

function json(v) {
  return JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x));
}

function sameAddress(a, b) {
  return typeof a === "string" && typeof b === "string" && a.toLowerCase() === b.toLowerCase();
}

// checkReceipt checks that receipt is a mined, successful transaction from the account.
function checkReceipt(what, receipt) {
  if (receipt?.status !== 1n) {
    fail(`${what}: receipt status ${receipt?.status}, want 1: ${json(receipt)}`);
  }
  if (!sameAddress(receipt.from, account)) {
    fail(`${what}: receipt from ${receipt.from}, want ${account}`);
  }
}

// sentTx returns the transaction object of the last eth_sendTransaction from mark on, and
// checks that a nonce web3.js sent is the pending count web3gate answered before it.
function sentTx(mark) {
  const call = wire.last("eth_sendTransaction", mark);
  const tx = call.sent.params?.[0];
  if (tx === undefined || typeof tx !== "object") {
    fail(`web3.js sent eth_sendTransaction ${json(call.sent.params)}`);
  }
  if ("nonce" in tx) {
    const counts = wire.wire.slice(0, wire.wire.indexOf(call)).filter((x) => x.sent.method === "eth_getTransactionCount");
    const pending = counts.length > 0 ? counts[counts.length - 1].received?.result : undefined;
    if (tx.nonce !== pending) {
      fail(`web3.js sent nonce ${tx.nonce}, web3gate's pending count was ${pending}`);
    }
  }
  return { tx, hash: call.received?.result };
}

await check("getChainId (eth_chainId)", async () => {
  const id = await web3.eth.getChainId();
  if (id !== chainID) {
    fail(`chain id ${id}, want ${chainID}`);
  }
  return `${id}`;
});

await check("getBlockNumber (eth_blockNumber)", async () => {
  const n = await web3.eth.getBlockNumber();
  if (typeof n !== "bigint") {
    fail(`block number ${json(n)}, want a bigint`);
  }
  const block = await web3.eth.getBlock(n);
  if (block?.number !== n) {
    fail(`block ${n} has number ${block?.number}`);
  }
  return `${n}`;
});

await check("getBalance (eth_getBalance)", async () => {
  const bal = await web3.eth.getBalance(account);
  if (bal < 10n ** 18n) {
    fail(`${account} has ${bal} wei, want at least 1 ether`);
  }
  return `${account} has ${bal} wei`;
});

// checkFilled checks what web3gate's transaction status object (GET /v1/transactions/{hash})
// says it filled in: want, in any order.
async function checkFilled(hash, want) {
  const res = await fetch(`${new URL(url).origin}/v1/transactions/${hash}`, {
    headers: { "X-API-Key": clientID, Authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const body = await res.json();
  const got = body?.transaction?.filled;
  if (res.status !== 200 || !Array.isArray(got) || json([...got].sort()) !== json([...want].sort())) {
    fail(`${hash}: web3gate's status object (HTTP ${res.status}) says filled ${json(got)}, want ${json(want)}: ${json(body)}`);
  }
  return `web3gate filled ${json(got)}`;
}

// sendValue sends ~0.001 ether to a fresh address with web3.eth.sendTransaction({from, to,
// value, ...extra}), waits for the receipt and checks it and the recipient's balance.
// wantFilled is what web3gate must have filled in.
async function sendValue(name, wantFilled, extra = {}) {
  const to = freshAddress();
  const value = 1_000_000_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000));
  const mark = wire.wire.length;
  const receipt = await within(RECEIPT_MS, name, web3.eth.sendTransaction({ from: account, to, value, ...extra }));
  checkReceipt(name, receipt);
  const { tx, hash } = sentTx(mark);
  if (receipt.transactionHash !== hash) {
    fail(`receipt of ${receipt.transactionHash}, web3gate answered ${hash}`);
  }
  if (!sameAddress(receipt.to, to)) {
    fail(`receipt to ${receipt.to}, want ${to}`);
  }
  const bal = await web3.eth.getBalance(to);
  if (bal !== value) {
    fail(`recipient ${to} has ${bal} wei, want ${value}`);
  }
  const mined = await web3.eth.getTransaction(hash);
  const filled = await checkFilled(hash, wantFilled);
  return {
    mined,
    receipt,
    report: `${hash} nonce ${mined.nonce} type ${mined.type} mined in block ${receipt.blockNumber}, +${value} wei; web3.js sent ${wire.methods(mark)}; eth_sendTransaction ${json(tx)}; ${filled}`,
  };
}

await check("sendTransaction({from, to, value})", async () => {
  const { report } = await sendValue("sendTransaction", ["gas", "data"]);
  return report;
});

await check("sendTransaction({from, to, value, type: 0})", async () => {
  const { mined, report } = await sendValue("legacy sendTransaction", ["gas", "data"], { type: 0 });
  if (mined.type !== 0n) {
    fail(`mined as type ${mined.type}, want 0: ${report}`);
  }
  return report;
});

// What a dapp written for web3.js's own signing puts in the object: the nonce it read
// (pending), gasLimit, type, input, and chain members that carry nothing for the node.
await check("sendTransaction with nonce, gasLimit, type, input, chainId, networkId, hardfork, common", async () => {
  const nonce = await web3.eth.getTransactionCount(account, "pending");
  const { mined, report } = await sendValue("sendTransaction with web3.js members", [], {
    nonce,
    gasLimit: 21_000n,
    type: 2,
    input: "0x",
    chainId: chainID,
    networkId: chainID,
    hardfork: "london",
    common: { customChain: { name: "web3gate", chainId: chainID, networkId: chainID }, hardfork: "london" },
  });
  if (mined.nonce !== nonce || mined.gas !== 21_000n || mined.type !== 2n) {
    fail(`mined with nonce ${mined.nonce} gas ${mined.gas} type ${mined.type}, want ${nonce}, 21000, 2: ${report}`);
  }
  return report;
});

let token20;
await check("Contract.deploy().send (TestERC20)", async () => {
  const mark = wire.wire.length;
  const contract = new web3.eth.Contract(artifact.abi);
  const deployed = await within(
    RECEIPT_MS,
    "deploy",
    contract.deploy({ data: artifact.bytecode, arguments: ["web3js token", "W3J", 18] }).send({ from: account }),
  );
  const { tx, hash } = sentTx(mark);
  if ("to" in tx && tx.to !== null) {
    fail(`web3.js sent a creation with to ${tx.to}`);
  }
  const receipt = await web3.eth.getTransactionReceipt(hash);
  checkReceipt("deploy", receipt);
  const address = deployed.options.address;
  if (!sameAddress(receipt.contractAddress, address)) {
    fail(`receipt contractAddress ${receipt.contractAddress}, the contract is at ${address}`);
  }
  const code = await web3.eth.getCode(address);
  if (code.length <= 2) {
    fail(`no code at ${address}`);
  }
  const decimals = await deployed.methods.decimals().call();
  if (decimals !== 18n) {
    fail(`decimals() ${decimals}, want 18 (the constructor argument)`);
  }
  token20 = deployed;
  const filled = await checkFilled(hash, ["gas", "value"]);
  const { data, input, ...rest } = tx;
  const init = data ?? input;
  return `${address} by ${hash} in block ${receipt.blockNumber}; web3.js sent ${wire.methods(mark)}; eth_sendTransaction ${json(rest)} with ${init === data ? "data" : "input"} of ${(init.length - 2) / 2} bytes; ${filled}`;
});

await check("methods.mint + methods.transfer(to, 1).send", async () => {
  if (token20 === undefined) {
    fail("no contract deployed");
  }
  const to = freshAddress();
  const minted = 1000n;
  const before = await token20.methods.balanceOf(account).call();
  const mintReceipt = await within(RECEIPT_MS, "mint", token20.methods.mint(account, minted).send({ from: account }));
  checkReceipt("mint", mintReceipt);
  const mark = wire.wire.length;
  const receipt = await within(RECEIPT_MS, "transfer", token20.methods.transfer(to, 1).send({ from: account }));
  checkReceipt("transfer", receipt);
  const { tx } = sentTx(mark);
  if (!sameAddress(receipt.to, token20.options.address)) {
    fail(`transfer receipt to ${receipt.to}, want the token ${token20.options.address}`);
  }
  const got = await token20.methods.balanceOf(to).call();
  const left = await token20.methods.balanceOf(account).call();
  if (got !== 1n || left !== before + minted - 1n) {
    fail(`balances after transfer: recipient ${got} (want 1), account ${left} (want ${before + minted - 1n})`);
  }
  const filled = await checkFilled(receipt.transactionHash, ["gas", "value"]);
  return `transfer ${receipt.transactionHash} in block ${receipt.blockNumber}, recipient 1, account ${left}; web3.js sent ${wire.methods(mark)}; eth_sendTransaction ${json(tx)}; ${filled}`;
});

await check("eth.sign + accounts.recover (eth_sign)", async () => {
  const message = `web3gate web3js-wallet eth_sign ${new Date().toISOString()}`;
  const mark = wire.wire.length;
  const sig = await web3.eth.sign(Web3.utils.utf8ToHex(message), account);
  if (typeof sig !== "string") {
    fail(`eth.sign answered ${json(sig)}, want a signature`);
  }
  const got = web3.eth.accounts.recover(message, sig);
  if (!sameAddress(got, account)) {
    fail(`signature ${sig} recovers to ${got}, want ${account}`);
  }
  return `recovers to ${got}; sent eth_sign ${json(wire.last("eth_sign", mark).sent.params)}`;
});

await check("personal.sign + accounts.recover (personal_sign)", async () => {
  const message = `web3gate web3js-wallet personal_sign ${new Date().toISOString()}`;
  const mark = wire.wire.length;
  const sig = await web3.eth.personal.sign(message, account, "");
  const got = web3.eth.accounts.recover(message, sig);
  if (!sameAddress(got, account)) {
    fail(`signature ${sig} recovers to ${got}, want ${account}`);
  }
  const bytes = "0x0001ff";
  const bytesSig = await web3.eth.personal.sign(bytes, account, "");
  const gotBytes = web3.eth.accounts.recover(bytes, bytesSig);
  if (!sameAddress(gotBytes, account)) {
    fail(`signature of bytes ${bytesSig} recovers to ${gotBytes}, want ${account}`);
  }
  const sent = wire.calls("personal_sign", mark).map((x) => x.sent.params);
  return `text and bytes recover to ${got}; sent personal_sign ${json(sent)}`;
});

// eth_signTransaction hands out a nonce: broadcast the result at once so that it is used.
await check("signTransaction + sendSignedTransaction", async () => {
  const to = freshAddress();
  const value = 123_456_789n;
  const mark = wire.wire.length;
  const signed = await web3.eth.signTransaction({ from: account, to, value, gas: 21_000 });
  const call = wire.last("eth_signTransaction", mark);
  const answer = call.received?.result;
  if (typeof answer !== "string" || !/^0x[0-9a-f]+$/i.test(answer)) {
    fail(`eth_signTransaction answered ${json(answer)}, want a 0x hex string`);
  }
  if (signed?.raw !== answer) {
    fail(`web3.js made ${json(signed)} of the answer ${answer}`);
  }
  const from = web3.eth.accounts.recoverTransaction(signed.raw);
  if (!sameAddress(from, account)) {
    fail(`signed transaction recovers to ${from}, want ${account}`);
  }
  const { tx } = signed;
  if (!sameAddress(tx.to, to) || tx.value !== value || tx.gas !== 21_000n || tx.chainId !== chainID) {
    fail(`web3.js decoded the signed transaction as ${json(tx)}`);
  }
  const receipt = await within(RECEIPT_MS, "sendSignedTransaction", web3.eth.sendSignedTransaction(signed.raw));
  checkReceipt("sendSignedTransaction", receipt);
  const want = Web3.utils.keccak256(signed.raw);
  if (receipt.transactionHash !== want) {
    fail(`receipt of ${receipt.transactionHash}, want keccak256(raw) ${want}`);
  }
  const bal = await web3.eth.getBalance(to);
  if (bal !== value) {
    fail(`recipient ${to} has ${bal} wei, want ${value}`);
  }
  const filled = await checkFilled(want, ["maxFeePerGas", "maxPriorityFeePerGas", "data"]);
  return `type ${tx.type}, nonce ${tx.nonce}, ${want} mined in block ${receipt.blockNumber}; web3.js sent ${wire.methods(mark)}; eth_signTransaction ${json(call.sent.params)} answered a 0x-hex string, which web3.js decoded into {raw, tx}; ${filled}`;
});

// web3.eth.sendTransaction reads eth_blockNumber before it sends (its block timeout), and the
// shipped config serves no call without a token: the send is refused there. The
// eth_sendTransaction it would send is then sent through web3.js's request manager.
await check("sendTransaction without the bearer token", async () => {
  const anon = web3For({ withToken: false });
  const to = freshAddress();
  const refused = await within(
    RECEIPT_MS,
    "sendTransaction",
    anon.web3.eth
      .sendTransaction({ from: account, to, value: 1n, gas: 21_000n, gasPrice: 10n ** 10n }, undefined, {
        checkRevertBeforeSending: false,
      })
      .then(
        (receipt) => fail(`sendTransaction without a token was mined: ${json(receipt)}`),
        (err) => err,
      ),
  );
  const first = anon.wire.wire[0];
  if (first === undefined || first.status !== 401 || first.received?.error?.code !== 4100) {
    fail(`web3.js sent ${json(first?.sent)}, answered HTTP ${first?.status} ${json(first?.received)}, want HTTP 401 and code 4100 (web3.js: ${describe(refused)})`);
  }
  if (anon.wire.wire.some((x) => x.status !== 401)) {
    fail(`without a token, a call was answered: ${json(anon.wire.wire)}`);
  }
  const sent = anon.wire.methods();
  const mark = anon.wire.wire.length;
  const refusedRaw = await anon.web3.eth.requestManager
    .send({
      method: "eth_sendTransaction",
      params: [{ from: account, to, value: "0x1", gas: "0x5208", gasPrice: "0x2540be400" }],
    })
    .then(
      (hash) => fail(`eth_sendTransaction without a token answered ${hash}, want a rejection`),
      (err) => err,
    );
  const call = anon.wire.last("eth_sendTransaction", mark);
  const code = call.received?.error?.code;
  if (call.status !== 401 || code !== 4100) {
    fail(`eth_sendTransaction answered HTTP ${call.status} ${json(call.received)}, want HTTP 401 and code 4100 (web3.js: ${describe(refusedRaw)})`);
  }
  return `sendTransaction refused at its first call (${sent}): HTTP 401, code 4100, web3.js threw ${refused.constructor.name}; eth_sendTransaction: HTTP ${call.status}, code ${code}, ${json(call.received.error.message)}`;
});

finish();
