// ethers-wallet.mjs: use a web3gate account as an ethers v6 JSON-RPC signer, the way a dapp
// does with a wallet's RPC: the gateway holds the key, fills in the nonce, signs and broadcasts.
// No private key is used here.
//
// Environment:
//   WEB3GATE_URL        JSON-RPC endpoint, e.g. http://127.0.0.1:8545/v1/web3/mainnet
//   WEB3GATE_CLIENT_ID  sent as X-API-Key
//   WEB3GATE_TOKEN      sent as Authorization: Bearer <token>
//   WEB3GATE_CHAIN_ID   expected chain id (decimal)
//   WEB3GATE_ACCOUNT    an account the token's principal holds, funded on that chain, used by
//                       nothing else while this runs (its nonces are checked to be consecutive)
//
// Checks: eth_accounts via getSigner, a legacy and a type 2 sendTransaction (every field the
// gateway requires given explicitly, nonce left to the gateway) mined with status 1,
// signTransaction + broadcastTransaction, signMessage / verifyMessage, signTypedData /
// verifyTypedData, and a send without the bearer token refused with HTTP 401 / code 4100.
//
// Prints one line per check ("ok" or "FAIL") and exits 1 if any check failed, 2 if the
// environment is incomplete.
//
// Run: node e2e/js/ethers-wallet.mjs   (after npm ci --prefix e2e)

import {
  FetchRequest,
  JsonRpcProvider,
  JsonRpcSigner,
  Network,
  Transaction,
  getAddress,
  hexlify,
  randomBytes,
  verifyMessage,
  verifyTypedData,
} from "ethers";

import { fail, script, within } from "./harness.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request
const RECEIPT_MS = 20_000; // per transaction, from send to receipt

const { usage, env, chainID: readChainID, gateway, check, finish } = script("ethers-wallet", {
  describe(err) {
    const cause = err?.cause ? ` (cause: ${err.cause.message ?? err.cause})` : "";
    const info = err?.info?.error ? ` (rpc error: ${JSON.stringify(err.info.error)})` : "";
    const body = err?.response?.bodyText ? ` (response: ${err.response.bodyText.trim()})` : "";
    return `${err?.shortMessage ?? err?.message ?? err}${info}${body}${cause}`;
  },
});

const { url, clientID, token, account } = gateway(getAddress);
const chainID = readChainID();

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

// WireProvider records every JSON-RPC call ethers makes and what came back, so a check can
// show exactly what the library sent.
class WireProvider extends JsonRpcProvider {
  wire = [];

  async _send(payload) {
    const calls = Array.isArray(payload) ? payload : [payload];
    let received;
    try {
      received = await super._send(payload);
    } finally {
      for (const sent of calls) {
        this.wire.push({ sent, received: received?.find((r) => r.id === sent.id) });
      }
    }
    return received;
  }

  // sent returns the params of the last call of method.
  sent(method) {
    const calls = this.wire.filter((x) => x.sent.method === method);
    return calls.length > 0 ? calls[calls.length - 1].sent.params : undefined;
  }
}

const network = Network.from(chainID);
const providers = [];
// cacheTimeout -1: ethers otherwise answers an identical call made within 250 ms from its own
// cache, so the recipient's balance read right after the receipt would be the one read before
// the send.
function provider(opts) {
  const p = new WireProvider(request(opts), network, {
    staticNetwork: network,
    batchMaxCount: 1,
    pollingInterval: 250,
    cacheTimeout: -1,
  });
  providers.push(p);
  return p;
}

// freshAddress is a random address nobody has used: its balance starts at 0.
function freshAddress() {
  return getAddress(hexlify(randomBytes(20)));
}

// REQUIRED are the fields the gateway requires of every transaction object (besides the fees).
const REQUIRED = ["from", "to", "gas", "value", "data"];

// checkSentObject checks the object ethers sent as params[0] of method: every required field,
// the fee fields of the kind, no nonce.
function checkSentObject(p, method, fees) {
  const params = p.sent(method);
  const obj = params?.[0];
  if (obj === undefined || typeof obj !== "object") {
    fail(`ethers sent no ${method} object: ${JSON.stringify(params)}`);
  }
  if ("nonce" in obj) {
    fail(`ethers sent a nonce in ${method}: ${JSON.stringify(obj)}`);
  }
  for (const f of [...REQUIRED, ...fees]) {
    if (!(f in obj)) {
      fail(`ethers left ${f} out of ${method}: ${JSON.stringify(obj)}`);
    }
  }
  return obj;
}

const rpc = provider();
let signer;

await check("getSigner (eth_accounts)", async () => {
  signer = await rpc.getSigner(account);
  if (signer.address !== account) {
    fail(`signer address ${signer.address}, want ${account}`);
  }
  const accounts = await rpc.send("eth_accounts", []);
  if (!Array.isArray(accounts) || !accounts.some((a) => a.toLowerCase() === account.toLowerCase())) {
    fail(`eth_accounts ${JSON.stringify(accounts)} does not include ${account}`);
  }
  return `${account} among ${accounts.length} account(s)`;
});
if (signer === undefined) {
  // getSigner failed (no such account for this token): a signer that does not check first,
  // so the remaining checks report their own failures.
  signer = new JsonRpcSigner(rpc, account);
}

// Fees: explicit, from the chain's current gas price and base fee, with room to spare.
let gasPrice = 0n;
let baseFee = 0n;
await check("fee data", async () => {
  gasPrice = BigInt(await rpc.send("eth_gasPrice", []));
  const block = await rpc.getBlock("latest");
  baseFee = block?.baseFeePerGas ?? 0n;
  if (gasPrice <= 0n) {
    fail(`eth_gasPrice ${gasPrice}, want > 0`);
  }
  return `eth_gasPrice ${gasPrice}, base fee ${baseFee}`;
});
const tip = 1_000_000_000n; // 1 gwei
const legacyGasPrice = gasPrice * 2n > baseFee * 2n ? gasPrice * 2n : baseFee * 2n + tip;
const maxFeePerGas = baseFee * 2n + tip;

// send sends a 21000-gas value transfer to a fresh address through signer.sendTransaction,
// waits for the receipt and checks it.
async function send(name, fees, wantType, extra = {}) {
  const to = freshAddress();
  const value = 1_000_000_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000)); // ~0.001 ether
  const before = await rpc.getBalance(to);
  const tx = await within(
    RECEIPT_MS,
    `${name} sendTransaction`,
    signer.sendTransaction({ to, value, gasLimit: 21_000n, data: "0x", ...fees, ...extra }),
  );
  const obj = checkSentObject(rpc, "eth_sendTransaction", Object.keys(fees).map((k) => (k === "gasLimit" ? "gas" : k)));
  const receipt = await within(RECEIPT_MS, `${name} wait`, tx.wait());
  if (receipt === null) {
    fail(`${tx.hash}: wait() gave no receipt`);
  }
  if (receipt.status !== 1) {
    fail(`${tx.hash}: receipt status ${receipt.status}, want 1`);
  }
  if (receipt.from !== account) {
    fail(`${tx.hash}: receipt from ${receipt.from}, want ${account}`);
  }
  if (receipt.to !== to) {
    fail(`${tx.hash}: receipt to ${receipt.to}, want ${to}`);
  }
  if (tx.type !== wantType) {
    fail(`${tx.hash}: mined as type ${tx.type}, want ${wantType}`);
  }
  if (tx.value !== value || tx.gasLimit !== 21_000n) {
    fail(`${tx.hash}: mined with value ${tx.value} gas ${tx.gasLimit}, want ${value} and 21000`);
  }
  if (tx.chainId !== chainID) {
    fail(`${tx.hash}: chain id ${tx.chainId}, want ${chainID}`);
  }
  const after = await rpc.getBalance(to);
  if (after - before !== value) {
    fail(`recipient ${to} balance went ${before} -> ${after}, want +${value}`);
  }
  return { tx, receipt, obj, to, value };
}

const nonces = [];

await check("sendTransaction legacy (gasPrice)", async () => {
  const { tx, receipt, obj, value } = await send("legacy", { gasPrice: legacyGasPrice }, 0);
  if (tx.gasPrice !== legacyGasPrice) {
    fail(`${tx.hash}: gas price ${tx.gasPrice}, want ${legacyGasPrice}`);
  }
  nonces.push(tx.nonce);
  return `${tx.hash} nonce ${tx.nonce} mined in block ${receipt.blockNumber}, +${value} wei; sent ${JSON.stringify(obj)}`;
});

await check("sendTransaction type 2 (maxFeePerGas, chainId)", async () => {
  const { tx, receipt, obj, value } = await send(
    "type 2",
    { maxFeePerGas, maxPriorityFeePerGas: tip },
    2,
    { type: 2, chainId: chainID },
  );
  if (tx.maxFeePerGas !== maxFeePerGas || tx.maxPriorityFeePerGas !== tip) {
    fail(`${tx.hash}: fees ${tx.maxFeePerGas}/${tx.maxPriorityFeePerGas}, want ${maxFeePerGas}/${tip}`);
  }
  nonces.push(tx.nonce);
  return `${tx.hash} nonce ${tx.nonce} mined in block ${receipt.blockNumber}, +${value} wei; sent ${JSON.stringify(obj)}`;
});

await check("nonces supplied by the gateway", async () => {
  if (nonces.length !== 2 || nonces[1] !== nonces[0] + 1) {
    fail(`nonces ${JSON.stringify(nonces)}, want two consecutive`);
  }
  return `${nonces.join(", ")}`;
});

// eth_signTransaction hands out a nonce: broadcast the result at once so that it is used.
await check("signTransaction + broadcastTransaction", async () => {
  const to = freshAddress();
  const value = 123_456_789n;
  const raw = await signer.signTransaction({
    to,
    value,
    gasLimit: 21_000n,
    maxFeePerGas,
    maxPriorityFeePerGas: tip,
    data: "0x",
  });
  checkSentObject(rpc, "eth_signTransaction", ["maxFeePerGas", "maxPriorityFeePerGas"]);
  if (typeof raw !== "string" || !/^0x[0-9a-f]+$/i.test(raw)) {
    fail(`eth_signTransaction answered ${JSON.stringify(raw)}, want a 0x hex string`);
  }
  const parsed = Transaction.from(raw);
  if (parsed.from !== account) {
    fail(`signed transaction recovers to ${parsed.from}, want ${account}`);
  }
  if (parsed.to !== to || parsed.value !== value || parsed.type !== 2 || parsed.chainId !== chainID) {
    fail(`signed transaction is ${JSON.stringify(parsed.toJSON())}`);
  }
  const tx = await rpc.broadcastTransaction(raw);
  if (tx.hash !== parsed.hash) {
    fail(`broadcast hash ${tx.hash}, want ${parsed.hash}`);
  }
  const receipt = await within(RECEIPT_MS, "signed tx wait", tx.wait());
  if (receipt?.status !== 1 || receipt.from !== account) {
    fail(`${tx.hash}: receipt ${JSON.stringify(receipt)}`);
  }
  if (nonces.length === 2 && parsed.nonce !== nonces[1] + 1) {
    fail(`signed with nonce ${parsed.nonce}, want ${nonces[1] + 1}`);
  }
  const bal = await rpc.getBalance(to);
  if (bal !== value) {
    fail(`recipient ${to} has ${bal}, want ${value}`);
  }
  return `type 2, nonce ${parsed.nonce}, from ${parsed.from}, ${tx.hash} mined in block ${receipt.blockNumber}`;
});

await check("signMessage + verifyMessage", async () => {
  const message = `web3gate ethers-wallet ${new Date().toISOString()}`;
  const sig = await signer.signMessage(message);
  const got = verifyMessage(message, sig);
  if (got !== account) {
    fail(`signature ${sig} recovers to ${got}, want ${account}`);
  }
  const bytesSig = await signer.signMessage(new Uint8Array([0, 1, 2, 0xff]));
  const gotBytes = verifyMessage(new Uint8Array([0, 1, 2, 0xff]), bytesSig);
  if (gotBytes !== account) {
    fail(`signature of bytes ${bytesSig} recovers to ${gotBytes}, want ${account}`);
  }
  return `text and bytes recover to ${got}; sent personal_sign ${JSON.stringify(rpc.sent("personal_sign"))}`;
});

await check("signTypedData + verifyTypedData", async () => {
  const domain = {
    name: "Ether Mail",
    version: "1",
    chainId: chainID,
    verifyingContract: "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC",
  };
  const types = {
    Person: [
      { name: "name", type: "string" },
      { name: "wallet", type: "address" },
    ],
    Mail: [
      { name: "from", type: "Person" },
      { name: "to", type: "Person" },
      { name: "contents", type: "string" },
      { name: "amount", type: "uint256" },
    ],
  };
  const value = {
    from: { name: "Cow", wallet: account },
    to: { name: "Bob", wallet: "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB" },
    contents: "Hello, Bob!",
    amount: 10n ** 30n,
  };
  const sig = await signer.signTypedData(domain, types, value);
  const got = verifyTypedData(domain, types, value, sig);
  if (got !== account) {
    fail(`signature ${sig} recovers to ${got}, want ${account}`);
  }
  return `recovers to ${got}`;
});

await check("sendTransaction without the bearer token", async () => {
  const anonymous = provider({ withToken: false });
  const anonSigner = new JsonRpcSigner(anonymous, account);
  let hash;
  try {
    // sendUncheckedTransaction: eth_sendTransaction is the first and only call.
    hash = await anonSigner.sendUncheckedTransaction({
      to: freshAddress(),
      value: 1n,
      gasLimit: 21_000n,
      gasPrice: legacyGasPrice,
      data: "0x",
    });
  } catch (err) {
    const status = err?.response?.statusCode;
    let body;
    try {
      body = err?.response?.bodyJson;
    } catch {
      body = undefined;
    }
    const code = body?.error?.code;
    if (status !== 401 || code !== 4100) {
      fail(`rejected with ${err?.code} HTTP ${status} code ${code}, want HTTP 401 and code 4100: ${err?.response?.bodyText ?? err?.message}`);
    }
    if (anonymous.sent("eth_sendTransaction") === undefined) {
      fail(`ethers did not send eth_sendTransaction: ${JSON.stringify(anonymous.wire)}`);
    }
    return `rejected: ${err.code} HTTP ${status}, code ${code}, ${JSON.stringify(body.error.message)}`;
  }
  fail(`eth_sendTransaction without a token answered ${hash}, want a rejection`);
});

for (const p of providers) {
  p.destroy();
}
finish();
