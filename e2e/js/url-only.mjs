// url-only.mjs: use web3gate the way a wallet that takes only a URL does (MetaMask's or
// Rabby's custom network, viem's http(url), ethers' new JsonRpcProvider(url)): the client id
// is in the URL, no header is sent, and transactions are signed locally and sent with
// eth_sendRawTransaction. The gateway must run with auth.allowReadsWithClientId: true.
//
// Environment:
//   WEB3GATE_URL_PATH       endpoint with the client id as its last path segment,
//                           e.g. http://127.0.0.1:8545/v1/web3/mainnet/<clientId>
//   WEB3GATE_URL_QUERY      endpoint with the client id in the apiKey query parameter,
//                           e.g. http://127.0.0.1:8545/v1/web3/chains/1337?apiKey=<clientId>
//   WEB3GATE_URL_NO_KEY     endpoint without a client id, e.g. http://127.0.0.1:8545/v1/web3/mainnet
//   WEB3GATE_URL_WRONG_KEY  endpoint with a client id the gateway does not know
//   WEB3GATE_CHAIN_ID       expected chain id (decimal), the chain of all four URLs
//   WEB3GATE_VIEM_KEY       private key (0x hex) of a funded account, signed with locally by viem
//   WEB3GATE_ETHERS_KEY     the same for ethers; a different account (the two run at once)
//   WEB3GATE_HELD_ACCOUNT   an account the gateway holds and signs for (with a bearer token)
//
// Checks, with viem createPublicClient({transport: http(url)}) on the path URL and ethers
// new JsonRpcProvider(url) on the query URL, no headers: eth_chainId, the block number and
// a balance; a transfer signed locally, sent with eth_sendRawTransaction and mined; the URL
// without a client id and with a wrong one answered HTTP 401 / code 4100; eth_sendTransaction
// for a held account with the URL alone answered HTTP 401 / code 4100 (signing needs the
// bearer token).
//
// Prints one line per check ("ok" or "FAIL") and exits 1 if any check failed, 2 if the
// environment is incomplete.
//
// Run: node e2e/js/url-only.mjs   (after npm ci --prefix e2e)

import { JsonRpcProvider, Network, Wallet, getAddress as ethersGetAddress, hexlify, randomBytes } from "ethers";
import { createPublicClient, createWalletClient, defineChain, getAddress, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";

import { fail, script, viemDescribe, within } from "./harness.mjs";

const TIMEOUT_MS = 10_000; // per HTTP request
const RECEIPT_MS = 20_000; // per transaction, from send to receipt

const { usage, env, chainIDNumber, check, finish } = script("url-only", {
  describe: viemDescribe,
});

const urlPath = env("WEB3GATE_URL_PATH");
const urlQuery = env("WEB3GATE_URL_QUERY");
const urlNoKey = env("WEB3GATE_URL_NO_KEY");
const urlWrongKey = env("WEB3GATE_URL_WRONG_KEY");
const chainID = chainIDNumber();
const chainIDBig = BigInt(chainID);
const viemAccount = privateKeyToAccount(env("WEB3GATE_VIEM_KEY"));
const ethersWallet = new Wallet(env("WEB3GATE_ETHERS_KEY"));
const held = getAddress(env("WEB3GATE_HELD_ACCOUNT"));

// freshAddress is a random address nobody has used: its balance starts at 0.
function freshAddress() {
  return ethersGetAddress(hexlify(randomBytes(20)));
}

// --- viem: http(url), nothing else -------------------------------------------------------

// seen records every request viem makes: the JSON-RPC methods and any credential header.
const seen = { methods: [], headers: [] };
function recordingTransport(url) {
  return http(url, {
    timeout: TIMEOUT_MS,
    onFetchRequest(request, init) {
      for (const h of ["x-api-key", "authorization"]) {
        if (request.headers.has(h)) {
          seen.headers.push(h);
        }
      }
      const body = JSON.parse(init.body);
      for (const call of Array.isArray(body) ? body : [body]) {
        seen.methods.push(call.method);
      }
    },
  });
}

const chain = defineChain({
  id: chainID,
  name: "web3gate",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [urlPath] } },
});
const publicClient = createPublicClient({ transport: recordingTransport(urlPath) });

await check("viem eth_chainId (client id in the path)", async () => {
  const id = await publicClient.getChainId();
  if (id !== chainID) {
    fail(`chain id ${id}, want ${chainID}`);
  }
  return `${id}`;
});

await check("viem getBlockNumber", async () => {
  const n = await publicClient.getBlockNumber({ cacheTime: 0 });
  if (typeof n !== "bigint" || n < 0n) {
    fail(`block number ${n}`);
  }
  return `${n}`;
});

await check("viem getBalance", async () => {
  const bal = await publicClient.getBalance({ address: viemAccount.address });
  if (bal <= 0n) {
    fail(`${viemAccount.address} has ${bal}, want a funded account`);
  }
  return `${viemAccount.address}: ${bal}`;
});

await check("viem local account: sendTransaction as eth_sendRawTransaction, mined", async () => {
  const wallet = createWalletClient({ account: viemAccount, chain, transport: recordingTransport(urlPath) });
  const to = freshAddress();
  const before = seen.methods.length;
  const hash = await within(RECEIPT_MS, "sendTransaction", wallet.sendTransaction({ to, value: 12345n }));
  const methods = seen.methods.slice(before);
  if (!methods.includes("eth_sendRawTransaction") || methods.includes("eth_sendTransaction")) {
    fail(`viem called ${methods.join(", ")}: want eth_sendRawTransaction, not eth_sendTransaction`);
  }
  const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: RECEIPT_MS, pollingInterval: 250 });
  if (receipt.status !== "success" || getAddress(receipt.from) !== viemAccount.address) {
    fail(`${hash}: receipt status ${receipt.status} from ${receipt.from}`);
  }
  const bal = await publicClient.getBalance({ address: to });
  if (bal !== 12345n) {
    fail(`recipient ${to} has ${bal}, want 12345`);
  }
  return `${hash} mined in block ${receipt.blockNumber}; calls: ${methods.join(", ")}`;
});

await check("viem sent no credential header", async () => {
  if (seen.headers.length > 0) {
    fail(`headers sent: ${seen.headers.join(", ")}`);
  }
  return `${seen.methods.length} calls, URL only`;
});

// viemRefusal calls fn and returns the HTTP status and JSON-RPC code of its rejection.
async function viemRefusal(fn) {
  try {
    const got = await fn();
    fail(`answered ${got}, want a rejection`);
  } catch (err) {
    if (typeof err?.walk !== "function") {
      throw err;
    }
    // viem reports an HTTP error whose body is a JSON-RPC error as RpcRequestError (status and
    // code), other HTTP errors as HttpRequestError (status, the body's error in details).
    const rpcErr = err.walk((e) => e?.name === "RpcRequestError");
    const httpErr = err.walk((e) => e?.name === "HttpRequestError");
    let code = rpcErr?.code;
    if (code === undefined && httpErr?.details) {
      try {
        code = JSON.parse(httpErr.details).code;
      } catch {
        code = undefined;
      }
    }
    return { status: rpcErr?.status ?? httpErr?.status, code, message: rpcErr?.details ?? httpErr?.details ?? err?.message };
  }
}

for (const [label, url] of [
  ["no client id", urlNoKey],
  ["a wrong client id", urlWrongKey],
]) {
  await check(`viem with ${label}: 401 / 4100`, async () => {
    const c = createPublicClient({ transport: http(url, { timeout: TIMEOUT_MS, retryCount: 0 }) });
    const r = await viemRefusal(() => c.getBlockNumber({ cacheTime: 0 }));
    if (r.status !== 401 || r.code !== 4100) {
      fail(`HTTP ${r.status} code ${r.code}, want HTTP 401 and code 4100: ${r.message}`);
    }
    return `HTTP ${r.status}, code ${r.code}, ${JSON.stringify(r.message)}`;
  });
}

await check("viem eth_sendTransaction with the URL alone: 401 / 4100", async () => {
  const c = createWalletClient({ account: held, transport: http(urlPath, { timeout: TIMEOUT_MS, retryCount: 0 }) });
  // chain: null skips viem's eth_chainId lookup; every field given, so eth_sendTransaction is
  // the only call.
  const r = await viemRefusal(() =>
    c.sendTransaction({ chain: null, to: freshAddress(), value: 1n, gas: 21_000n, gasPrice: 10n ** 10n, data: "0x" }),
  );
  if (r.status !== 401 || r.code !== 4100) {
    fail(`HTTP ${r.status} code ${r.code}, want HTTP 401 and code 4100: ${r.message}`);
  }
  return `HTTP ${r.status}, code ${r.code}, ${JSON.stringify(r.message)}`;
});

// --- ethers: new JsonRpcProvider(url), nothing else --------------------------------------

const provider = new JsonRpcProvider(urlQuery);

await check("ethers eth_chainId (client id in the apiKey query parameter)", async () => {
  const net = await within(TIMEOUT_MS, "getNetwork", provider.getNetwork());
  if (net.chainId !== chainIDBig) {
    fail(`chain id ${net.chainId}, want ${chainIDBig}`);
  }
  return `${net.chainId}`;
});

await check("ethers getBlockNumber", async () => {
  const n = await within(TIMEOUT_MS, "getBlockNumber", provider.getBlockNumber());
  if (!Number.isInteger(n) || n < 0) {
    fail(`block number ${n}`);
  }
  return `${n}`;
});

await check("ethers getBalance", async () => {
  const bal = await within(TIMEOUT_MS, "getBalance", provider.getBalance(ethersWallet.address));
  if (bal <= 0n) {
    fail(`${ethersWallet.address} has ${bal}, want a funded account`);
  }
  return `${ethersWallet.address}: ${bal}`;
});

await check("ethers Wallet: signed locally, broadcast with eth_sendRawTransaction, mined", async () => {
  const signer = ethersWallet.connect(provider);
  const to = freshAddress();
  const tx = await within(RECEIPT_MS, "sendTransaction", signer.sendTransaction({ to, value: 54321n }));
  const receipt = await within(RECEIPT_MS, "wait", tx.wait());
  if (receipt.status !== 1 || receipt.from !== ethersWallet.address) {
    fail(`${tx.hash}: receipt status ${receipt.status} from ${receipt.from}`);
  }
  const bal = await within(TIMEOUT_MS, "getBalance", provider.getBalance(to));
  if (bal !== 54321n) {
    fail(`recipient ${to} has ${bal}, want 54321`);
  }
  return `type ${tx.type}, nonce ${tx.nonce}, ${tx.hash} mined in block ${receipt.blockNumber}`;
});

// ethersRefusal calls fn on a provider of url and returns the HTTP status and JSON-RPC code of
// its rejection. The network is given so that ethers does not retry its detection forever.
async function ethersRefusal(url, fn) {
  const network = Network.from(chainIDBig);
  const p = new JsonRpcProvider(url, network, { staticNetwork: network });
  try {
    const got = await within(TIMEOUT_MS, "request", fn(p));
    fail(`answered ${got}, want a rejection`);
  } catch (err) {
    if (err?.response === undefined) {
      throw err;
    }
    let body;
    try {
      body = err.response.bodyJson;
    } catch {
      body = undefined;
    }
    return { status: err.response.statusCode, code: body?.error?.code, message: body?.error?.message ?? err.response.bodyText };
  } finally {
    p.destroy();
  }
}

for (const [label, url] of [
  ["no client id", urlNoKey],
  ["a wrong client id", urlWrongKey],
]) {
  await check(`ethers with ${label}: 401 / 4100`, async () => {
    const r = await ethersRefusal(url, (p) => p.getBlockNumber());
    if (r.status !== 401 || r.code !== 4100) {
      fail(`HTTP ${r.status} code ${r.code}, want HTTP 401 and code 4100: ${r.message}`);
    }
    return `HTTP ${r.status}, code ${r.code}, ${JSON.stringify(r.message)}`;
  });
}

await check("ethers eth_sendTransaction with the URL alone: 401 / 4100", async () => {
  const r = await ethersRefusal(urlQuery, (p) =>
    p.send("eth_sendTransaction", [{ from: held, to: freshAddress(), value: "0x1", gas: "0x5208", gasPrice: "0x2540be400", data: "0x" }]),
  );
  if (r.status !== 401 || r.code !== 4100) {
    fail(`HTTP ${r.status} code ${r.code}, want HTTP 401 and code 4100: ${r.message}`);
  }
  return `HTTP ${r.status}, code ${r.code}, ${JSON.stringify(r.message)}`;
});

provider.destroy();
finish();
