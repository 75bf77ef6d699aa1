// viem-wallet.mjs: use a web3gate account as a viem JSON-RPC account, the way a dapp does with
// a wallet's RPC: the gateway holds the key, fills in the nonce, signs and broadcasts. No
// private key is used here.
//
// Environment:
//   WEB3GATE_URL        JSON-RPC endpoint, e.g. http://127.0.0.1:8545/v1/web3/mainnet
//   WEB3GATE_CLIENT_ID  sent as X-API-Key
//   WEB3GATE_TOKEN      sent as Authorization: Bearer <token>
//   WEB3GATE_CHAIN_ID   expected chain id (decimal)
//   WEB3GATE_ACCOUNT    an account the token's principal holds, funded on that chain, used by
//                       nothing else while this runs (its nonces are checked to be consecutive)
//
// Checks: getAddresses (eth_accounts), a legacy and a type 2 sendTransaction (every field the
// gateway requires given explicitly, nonce left to the gateway) mined with status 1,
// signMessage / verifyMessage, signTypedData / verifyTypedData, signTransaction
// (eth_signTransaction) recovered to the account and sent with sendRawTransaction, and a
// send without the bearer token refused with HTTP 401 / code 4100.
//
// Prints one line per check ("ok" or "FAIL") and exits 1 if any check failed, 2 if the
// environment is incomplete.
//
// Run: node e2e/js/viem-wallet.mjs   (after npm ci --prefix e2e)

import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  http,
  isAddress,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  toHex,
  verifyMessage,
  verifyTypedData,
} from "viem";

import { fail, script, viemDescribe, within } from "./harness.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request
const RECEIPT_MS = 20_000; // per transaction, from send to receipt

const { usage, env, chainIDNumber, gateway, check, finish } = script("viem-wallet", {
  describe: viemDescribe,
});

const { url, clientID, token, account } = gateway(getAddress);
const chainID = chainIDNumber();

const chain = defineChain({
  id: chainID,
  name: `web3gate ${chainID}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [url] } },
});

// wire records the JSON-RPC calls the transports send (one call per HTTP request: no batch).
const wire = [];

// sent returns the params of the last call of method.
function sent(method) {
  const calls = wire.filter((c) => c.method === method);
  return calls.length > 0 ? calls[calls.length - 1].params : undefined;
}

function transport({ withToken = true } = {}) {
  const headers = { "X-API-Key": clientID };
  if (withToken) {
    headers.Authorization = `Bearer ${token}`;
  }
  return http(url, {
    fetchOptions: { headers },
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
}

// account as an address: viem makes it a JSON-RPC account (type "json-rpc"), whose signing
// goes to the node (here the gateway): eth_sendTransaction, eth_signTransaction, personal_sign,
// eth_signTypedData_v4.
const wallet = createWalletClient({ account, chain, transport: transport() });
const client = createPublicClient({ chain, transport: transport(), pollingInterval: 250, cacheTime: 0 });

// freshAddress is a random address nobody has used: its balance starts at 0.
function freshAddress() {
  return getAddress(toHex(crypto.getRandomValues(new Uint8Array(20))));
}

// REQUIRED are the fields the gateway requires of every transaction object (besides the fees).
const REQUIRED = ["from", "to", "gas", "value", "data"];

// checkSentObject checks the object viem sent as params[0] of method: every required field,
// the fee fields of the kind, no nonce.
function checkSentObject(method, fees) {
  const params = sent(method);
  const obj = params?.[0];
  if (obj === undefined || typeof obj !== "object") {
    fail(`viem sent no ${method} object: ${JSON.stringify(params)}`);
  }
  if ("nonce" in obj) {
    fail(`viem sent a nonce in ${method}: ${JSON.stringify(obj)}`);
  }
  for (const f of [...REQUIRED, ...fees]) {
    if (!(f in obj)) {
      fail(`viem left ${f} out of ${method}: ${JSON.stringify(obj)}`);
    }
  }
  if (sent("wallet_sendTransaction") !== undefined) {
    fail(`viem fell back to wallet_sendTransaction: ${JSON.stringify(sent("wallet_sendTransaction"))}`);
  }
  return obj;
}

await check("getAddresses (eth_accounts)", async () => {
  const addresses = await wallet.getAddresses();
  if (!addresses.some((a) => getAddress(a) === account)) {
    fail(`eth_accounts ${JSON.stringify(addresses)} does not include ${account}`);
  }
  if (wallet.account.type !== "json-rpc") {
    fail(`wallet account is of type ${wallet.account.type}, want json-rpc`);
  }
  return `${account} among ${addresses.length} account(s)`;
});

// Fees: explicit, from the chain's current gas price and base fee, with room to spare.
let gasPrice = 0n;
let baseFee = 0n;
await check("fee data", async () => {
  gasPrice = await client.getGasPrice();
  const block = await client.getBlock({ blockTag: "latest" });
  baseFee = block.baseFeePerGas ?? 0n;
  if (gasPrice <= 0n) {
    fail(`eth_gasPrice ${gasPrice}, want > 0`);
  }
  return `eth_gasPrice ${gasPrice}, base fee ${baseFee}`;
});
const tip = 1_000_000_000n; // 1 gwei
const legacyGasPrice = gasPrice * 2n > baseFee * 2n ? gasPrice * 2n : baseFee * 2n + tip;
const maxFeePerGas = baseFee * 2n + tip;

// send sends a 21000-gas value transfer to a fresh address with wallet.sendTransaction,
// waits for the receipt on the public client and checks it.
async function send(name, fees, wantType) {
  const to = freshAddress();
  const value = 1_000_000_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000)); // ~0.001 ether
  const before = await client.getBalance({ address: to });
  const hash = await within(
    RECEIPT_MS,
    `${name} sendTransaction`,
    wallet.sendTransaction({ to, value, gas: 21_000n, data: "0x", ...fees }),
  );
  const obj = checkSentObject("eth_sendTransaction", Object.keys(fees).filter((k) => k !== "type"));
  const receipt = await client.waitForTransactionReceipt({ hash, timeout: RECEIPT_MS, pollingInterval: 250 });
  if (receipt.status !== "success") {
    fail(`${hash}: receipt status ${receipt.status}, want success`);
  }
  if (getAddress(receipt.from) !== account) {
    fail(`${hash}: receipt from ${receipt.from}, want ${account}`);
  }
  if (getAddress(receipt.to) !== to) {
    fail(`${hash}: receipt to ${receipt.to}, want ${to}`);
  }
  if (receipt.type !== wantType) {
    fail(`${hash}: mined as type ${receipt.type}, want ${wantType}`);
  }
  const tx = await client.getTransaction({ hash });
  if (tx.value !== value || tx.gas !== 21_000n || tx.chainId !== chainID) {
    fail(`${hash}: mined with value ${tx.value} gas ${tx.gas} chain ${tx.chainId}, want ${value}, 21000, ${chainID}`);
  }
  const after = await client.getBalance({ address: to });
  if (after - before !== value) {
    fail(`recipient ${to} balance went ${before} -> ${after}, want +${value}`);
  }
  return { hash, tx, receipt, obj, value };
}

const nonces = [];

await check("sendTransaction legacy (gasPrice)", async () => {
  const { hash, tx, receipt, obj, value } = await send("legacy", { gasPrice: legacyGasPrice }, "legacy");
  if (tx.gasPrice !== legacyGasPrice) {
    fail(`${hash}: gas price ${tx.gasPrice}, want ${legacyGasPrice}`);
  }
  nonces.push(tx.nonce);
  return `${hash} nonce ${tx.nonce} mined in block ${receipt.blockNumber}, +${value} wei; sent ${JSON.stringify(obj)}`;
});

await check("sendTransaction type 2 (maxFeePerGas)", async () => {
  const { hash, tx, receipt, obj, value } = await send(
    "type 2",
    { type: "eip1559", maxFeePerGas, maxPriorityFeePerGas: tip },
    "eip1559",
  );
  if (tx.maxFeePerGas !== maxFeePerGas || tx.maxPriorityFeePerGas !== tip) {
    fail(`${hash}: fees ${tx.maxFeePerGas}/${tx.maxPriorityFeePerGas}, want ${maxFeePerGas}/${tip}`);
  }
  nonces.push(tx.nonce);
  return `${hash} nonce ${tx.nonce} mined in block ${receipt.blockNumber}, +${value} wei; sent ${JSON.stringify(obj)}`;
});

await check("nonces supplied by the gateway", async () => {
  if (nonces.length !== 2 || nonces[1] !== nonces[0] + 1) {
    fail(`nonces ${JSON.stringify(nonces)}, want two consecutive`);
  }
  return `${nonces.join(", ")}`;
});

await check("signMessage + verifyMessage", async () => {
  const message = `web3gate viem-wallet ${new Date().toISOString()}`;
  const sig = await wallet.signMessage({ message });
  if (!(await verifyMessage({ address: account, message, signature: sig }))) {
    fail(`signature ${sig} of ${JSON.stringify(message)} does not verify for ${account}`);
  }
  const raw = new Uint8Array([0, 1, 2, 0xff]);
  const rawSig = await wallet.signMessage({ message: { raw } });
  if (!(await verifyMessage({ address: account, message: { raw }, signature: rawSig }))) {
    fail(`signature ${rawSig} of raw bytes does not verify for ${account}`);
  }
  return `text and raw bytes verify for ${account}; sent personal_sign ${JSON.stringify(sent("personal_sign"))}`;
});

await check("signTypedData + verifyTypedData", async () => {
  const typed = {
    domain: {
      name: "Ether Mail",
      version: "1",
      chainId: chainID,
      verifyingContract: "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC",
    },
    types: {
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
    },
    primaryType: "Mail",
    message: {
      from: { name: "Cow", wallet: account },
      to: { name: "Bob", wallet: "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB" },
      contents: "Hello, Bob!",
      amount: 10n ** 30n,
    },
  };
  const sig = await wallet.signTypedData(typed);
  if (!(await verifyTypedData({ address: account, signature: sig, ...typed }))) {
    fail(`signature ${sig} does not verify for ${account}`);
  }
  const params = sent("eth_signTypedData_v4");
  return `verifies for ${account}; sent eth_signTypedData_v4 [${JSON.stringify(params?.[0])}, ${typeof params?.[1]}]`;
});

// eth_signTransaction hands out a nonce: send the result at once so that it is used.
await check("signTransaction + sendRawTransaction", async () => {
  const to = freshAddress();
  const value = 123_456_789n;
  const signed = await wallet.signTransaction({
    to,
    value,
    gas: 21_000n,
    gasPrice: legacyGasPrice,
    data: "0x",
  });
  const obj = checkSentObject("eth_signTransaction", ["gasPrice"]);
  if (typeof signed !== "string" || !/^0x[0-9a-f]+$/i.test(signed)) {
    fail(`eth_signTransaction answered ${JSON.stringify(signed)}, want a 0x hex string`);
  }
  const parsed = parseTransaction(signed);
  if (parsed.type !== "legacy" || getAddress(parsed.to) !== to || parsed.value !== value || parsed.gas !== 21_000n) {
    fail(`signed transaction parses as ${JSON.stringify(parsed, (_, v) => (typeof v === "bigint" ? `${v}` : v))}`);
  }
  if (parsed.chainId !== chainID) {
    fail(`signed transaction has chain id ${parsed.chainId}, want ${chainID} (EIP-155)`);
  }
  if (nonces.length === 2 && parsed.nonce !== nonces[1] + 1) {
    fail(`signed with nonce ${parsed.nonce}, want ${nonces[1] + 1}`);
  }
  const from = await recoverTransactionAddress({ serializedTransaction: signed });
  if (getAddress(from) !== account) {
    fail(`signed transaction recovers to ${from}, want ${account}`);
  }
  const hash = await wallet.sendRawTransaction({ serializedTransaction: signed });
  if (hash !== keccak256(signed)) {
    fail(`sendRawTransaction answered ${hash}, want keccak256 of the bytes ${keccak256(signed)}`);
  }
  const receipt = await client.waitForTransactionReceipt({ hash, timeout: RECEIPT_MS, pollingInterval: 250 });
  if (receipt.status !== "success" || getAddress(receipt.from) !== account) {
    fail(`${hash}: receipt status ${receipt.status} from ${receipt.from}`);
  }
  const bal = await client.getBalance({ address: to });
  if (bal !== value) {
    fail(`recipient ${to} has ${bal}, want ${value}`);
  }
  return `legacy, nonce ${parsed.nonce}, chain ${parsed.chainId}, recovers to ${from}, ${hash} mined in block ${receipt.blockNumber}; sent ${JSON.stringify(obj)}`;
});

await check("sendTransaction without the bearer token", async () => {
  const anonymous = createWalletClient({ account, chain, transport: transport({ withToken: false }) });
  let hash;
  try {
    // chain: null skips viem's eth_chainId lookup, so eth_sendTransaction is the only call.
    hash = await anonymous.sendTransaction({
      chain: null,
      to: freshAddress(),
      value: 1n,
      gas: 21_000n,
      gasPrice: legacyGasPrice,
      data: "0x",
    });
  } catch (err) {
    // viem reports an HTTP error whose body is a JSON-RPC error as RpcRequestError (status and
    // code), other HTTP errors as HttpRequestError (status, the body's error in details).
    const rpcErr = err.walk((e) => e?.name === "RpcRequestError");
    const httpErr = err.walk((e) => e?.name === "HttpRequestError");
    const status = rpcErr?.status ?? httpErr?.status;
    let code = rpcErr?.code;
    if (code === undefined && httpErr?.details) {
      try {
        code = JSON.parse(httpErr.details).code;
      } catch {
        code = undefined;
      }
    }
    if (status !== 401 || code !== 4100) {
      fail(`rejected with ${err?.name} HTTP ${status} code ${code}, want HTTP 401 and code 4100: ${err?.shortMessage ?? err?.message}`);
    }
    return `rejected: ${err.name} (${(rpcErr ?? httpErr).name}) HTTP ${status}, code ${code}, ${JSON.stringify(rpcErr?.details ?? httpErr?.details)}`;
  }
  fail(`eth_sendTransaction without a token answered ${hash}, want a rejection`);
});

finish();
