// dropin-ethers.mjs: send through a web3gate account the way a dapp does with ethers v6 and a
// JsonRpcSigner: only what ethers itself puts in eth_sendTransaction (gas it estimated, no
// fees, no data, no `to` for a deployment), leaving the rest to the node (here web3gate). No
// private key is used here.
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
// Checks (fill): sendTransaction({to, value}); sendTransaction({to, value, maxFeePerGas,
// maxPriorityFeePerGas}) (no data; the given fees are kept); ContractFactory.deploy() of
// TestERC20 (receipt contractAddress = the deployed address, code present); contract.mint and
// contract.transfer through the signer (the recipient's token balance checked).
// Checks (strict): the same calls answered -32602 with the missing field named.
// Each check first checks that ethers left out what it is meant to leave out, so that the
// check tests what it says.
//
// Prints one line per check ("ok" or "FAIL") and exits 1 if any check failed, 2 if the
// environment is incomplete.
//
// Run: node e2e/js/dropin-ethers.mjs   (after npm ci --prefix e2e)

import { readFileSync } from "node:fs";

import {
  Contract,
  ContractFactory,
  FetchRequest,
  JsonRpcProvider,
  JsonRpcSigner,
  Network,
  getAddress,
  hexlify,
  randomBytes,
} from "ethers";

import { fail, script, within } from "./harness.mjs";

const TIMEOUT_MS = 15_000; // per send, from the call to the transaction response
const RECEIPT_MS = 30_000; // per transaction, from the response to the receipt

const { usage, env, chainID: readChainID, gateway, check, finish } = script("dropin-ethers", {
  watchdogMs: 100_000,
  describe(err) {
    const rpcErr = err?.info?.error ?? err?.error;
    const info = rpcErr ? ` (rpc error: ${JSON.stringify(rpcErr)})` : "";
    const body = err?.response?.bodyText ? ` (response: ${err.response.bodyText.trim()})` : "";
    return `${err?.shortMessage ?? err?.message ?? err}${info}${body}`;
  },
});

const { url, clientID, token, account } = gateway(getAddress);
const chainID = readChainID();
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

// WireProvider records every JSON-RPC call ethers makes and the answer, so that a check can
// see exactly what ethers sent and what web3gate answered.
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

  // last is the last exchange of method.
  last(method) {
    const xs = this.wire.filter((x) => x.sent.method === method);
    return xs[xs.length - 1];
  }
}

const req = new FetchRequest(url);
req.timeout = TIMEOUT_MS;
req.setHeader("X-API-Key", clientID);
req.setHeader("Authorization", `Bearer ${token}`);
const network = Network.from(chainID);
// cacheTimeout -1: no answer from ethers' own cache (a balance read right after a receipt).
const provider = new WireProvider(req, network, {
  staticNetwork: network,
  batchMaxCount: 1,
  pollingInterval: 250,
  cacheTimeout: -1,
});
const signer = new JsonRpcSigner(provider, account);

function freshAddress() {
  return getAddress(hexlify(randomBytes(20)));
}

// sentObject is the object ethers sent in its last eth_sendTransaction; it fails unless
// every field of absent was left out.
function sentObject(absent) {
  const obj = provider.last("eth_sendTransaction")?.sent.params?.[0];
  if (obj === undefined || typeof obj !== "object") {
    fail("ethers sent no eth_sendTransaction object");
  }
  const there = absent.filter((f) => f in obj);
  if (there.length > 0) {
    fail(`ethers now sends ${there.join(", ")} itself (${JSON.stringify(obj)}): this check no longer tests filling`);
  }
  return obj;
}

// mined waits for resp's receipt and requires status 1.
async function mined(resp, what) {
  const rc = await within(RECEIPT_MS, `${what} receipt`, resp.wait(1, RECEIPT_MS));
  if (rc === null || rc.status !== 1) {
    fail(`${what} ${resp.hash} mined with status ${rc?.status}`);
  }
  return rc;
}

// refused runs send, which must be refused by web3gate's eth_sendTransaction with code and
// message; it returns what ethers had sent.
async function refused(send, absent, code, message) {
  const before = provider.wire.length;
  let result;
  try {
    result = await within(TIMEOUT_MS, "send", send());
  } catch {
    // the answer is checked on the wire below
  }
  if (result !== undefined) {
    fail(`accepted: ${result?.hash ?? JSON.stringify(result)}`);
  }
  const x = provider.last("eth_sendTransaction");
  if (x === undefined || provider.wire.indexOf(x) < before) {
    fail("ethers sent no eth_sendTransaction");
  }
  const obj = sentObject(absent);
  const got = x.received?.error;
  if (got?.code !== code || got?.message !== message) {
    fail(`answered ${JSON.stringify(x.received)}, want error ${code} ${JSON.stringify(message)}`);
  }
  return `${code} ${message}; ethers sent ${Object.keys(obj).join(", ")}`;
}

const FEES = ["gasPrice", "maxFeePerGas", "maxPriorityFeePerGas"];
const abi = artifact.abi;
const factory = new ContractFactory(abi, artifact.bytecode, signer);

async function fillChecks() {
  await check("sendTransaction {to, value}", async () => {
    const to = freshAddress();
    const resp = await within(TIMEOUT_MS, "sendTransaction", signer.sendTransaction({ to, value: 1000n }));
    const obj = sentObject([...FEES, "data", "input", "nonce"]);
    const rc = await mined(resp, "transfer");
    const bal = await provider.getBalance(to);
    if (bal !== 1000n) {
      fail(`recipient balance ${bal}, want 1000`);
    }
    return `ethers sent ${Object.keys(obj).join(", ")}; type ${resp.type}, gas ${resp.gasLimit}, nonce ${resp.nonce}, block ${rc.blockNumber}`;
  });

  await check("sendTransaction {to, value, maxFeePerGas, maxPriorityFeePerGas}", async () => {
    const to = freshAddress();
    const fees = await provider.getFeeData();
    if (fees.maxFeePerGas === null || fees.maxPriorityFeePerGas === null) {
      fail(`getFeeData gave no EIP-1559 fees: ${JSON.stringify(fees)}`);
    }
    const resp = await within(TIMEOUT_MS, "sendTransaction", signer.sendTransaction({
      to, value: 1000n, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    }));
    const obj = sentObject(["gasPrice", "data", "input", "nonce"]);
    const rc = await mined(resp, "transfer");
    if (resp.maxFeePerGas !== fees.maxFeePerGas || resp.maxPriorityFeePerGas !== fees.maxPriorityFeePerGas) {
      fail(`fees ${resp.maxFeePerGas}/${resp.maxPriorityFeePerGas}, want the given ${fees.maxFeePerGas}/${fees.maxPriorityFeePerGas}`);
    }
    return `ethers sent ${Object.keys(obj).join(", ")}; type ${resp.type}, fees kept, block ${rc.blockNumber}`;
  });

  let token;
  await check("ContractFactory.deploy()", async () => {
    const c = await within(TIMEOUT_MS, "deploy", factory.deploy("Dropin Ethers", "DRE", 18));
    const obj = sentObject([...FEES, "to", "nonce"]);
    const resp = c.deploymentTransaction();
    const rc = await mined(resp, "deployment");
    const address = await c.getAddress();
    if (rc.contractAddress !== address) {
      fail(`receipt contractAddress ${rc.contractAddress}, want the deployed address ${address}`);
    }
    const code = await provider.getCode(address);
    if (code === "0x") {
      fail(`no code at ${address}`);
    }
    if ((await c.symbol()) !== "DRE") {
      fail("symbol() is not DRE");
    }
    token = c;
    return `ethers sent ${Object.keys(obj).join(", ")}; contract ${address}, ${(code.length - 2) / 2} bytes of code`;
  });

  await check("contract.mint and contract.transfer via the signer", async () => {
    if (token === undefined) {
      fail("no contract: the deployment failed");
    }
    const to = freshAddress();
    const mint = await within(TIMEOUT_MS, "mint", token.mint(account, 1000n));
    sentObject([...FEES, "nonce"]);
    await mined(mint, "mint");
    const transfer = await within(TIMEOUT_MS, "transfer", token.transfer(to, 7n));
    const obj = sentObject([...FEES, "nonce"]);
    const rc = await mined(transfer, "transfer");
    const bal = await token.balanceOf(to);
    if (bal !== 7n) {
      fail(`recipient's token balance ${bal}, want 7`);
    }
    return `ethers sent ${Object.keys(obj).join(", ")}; block ${rc.blockNumber}`;
  });
}

async function strictChecks() {
  const missingFees = "missing field: gasPrice (or maxFeePerGas and maxPriorityFeePerGas)";
  await check("strict: sendTransaction {to, value}", () =>
    refused(() => signer.sendTransaction({ to: freshAddress(), value: 1000n }), [...FEES, "data", "nonce"], -32602, missingFees));

  await check("strict: sendTransaction {to, value, maxFeePerGas, maxPriorityFeePerGas}", async () => {
    const fees = await provider.getFeeData();
    return refused(() => signer.sendTransaction({
      to: freshAddress(), value: 1000n, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    }), ["gasPrice", "data", "input", "nonce"], -32602, "missing field: data");
  });

  await check("strict: ContractFactory.deploy()", () =>
    refused(() => factory.deploy("Dropin Ethers", "DRE", 18), [...FEES, "to", "nonce"], -32602, "missing field: to"));

  await check("strict: contract.transfer via the signer", () => {
    // An address without code: the estimate succeeds and the send is what is refused.
    const c = new Contract(freshAddress(), abi, signer);
    return refused(() => c.transfer(freshAddress(), 0n), [...FEES, "nonce"], -32602, missingFees);
  });
}

try {
  if (mode === "fill") {
    await fillChecks();
  } else {
    await strictChecks();
  }
} finally {
  provider.destroy();
}
finish();
