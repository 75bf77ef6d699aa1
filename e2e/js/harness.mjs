// harness.mjs: what every e2e script shares: its environment, the checks and their report,
// a watchdog over the whole script, and deadlines on single steps.
//
// A script prints one line per check ("ok" or "FAIL"), then "ok   all checks passed" and
// exits 0, or exits 1 if any check failed (or the watchdog fired), 2 if its environment is
// incomplete.

// script returns the helpers of the script named name (for messages). describe turns a
// check's error into its FAIL line (each library carries its details in its own fields).
export function script(name, { watchdogMs = 60_000, describe = (err) => err?.message ?? String(err) } = {}) {
  function usage(msg) {
    console.error(`${name}: ${msg}`);
    process.exit(2);
  }

  function env(key) {
    const v = process.env[key];
    if (v === undefined || v === "") {
      usage(`environment variable ${key} is not set`);
    }
    return v;
  }

  // chainID reads WEB3GATE_CHAIN_ID as a BigInt: a decimal integer.
  function chainID() {
    const text = env("WEB3GATE_CHAIN_ID");
    if (!/^[0-9]+$/.test(text)) {
      usage(`WEB3GATE_CHAIN_ID must be a decimal integer, got ${JSON.stringify(text)}`);
    }
    return BigInt(text);
  }

  // chainIDNumber is chainID as a Number, for libraries that take one (viem).
  function chainIDNumber() {
    const id = chainID();
    if (id > BigInt(Number.MAX_SAFE_INTEGER)) {
      usage(`WEB3GATE_CHAIN_ID ${id} is too large`);
    }
    return Number(id);
  }

  // gateway reads the gateway's JSON-RPC URL and credentials (WEB3GATE_URL, _CLIENT_ID,
  // _TOKEN) and the account the script uses (WEB3GATE_ACCOUNT), normalized by address: the
  // library's checksum function, which throws for anything but an address.
  function gateway(address) {
    const url = env("WEB3GATE_URL");
    const clientID = env("WEB3GATE_CLIENT_ID");
    const token = env("WEB3GATE_TOKEN");
    const text = env("WEB3GATE_ACCOUNT");
    let account;
    try {
      account = address(text);
    } catch {
      usage(`WEB3GATE_ACCOUNT must be an address, got ${JSON.stringify(text)}`);
    }
    return { url, clientID, token, account };
  }

  const watchdog = setTimeout(() => {
    console.error(`FAIL watchdog: checks did not finish within ${watchdogMs} ms`);
    process.exit(1);
  }, watchdogMs);

  const failures = [];
  async function check(label, fn) {
    try {
      const detail = await fn();
      console.log(`ok   ${label}: ${detail}`);
    } catch (err) {
      failures.push(label);
      console.log(`FAIL ${label}: ${describe(err)}`);
    }
  }

  // finish reports the outcome and exits.
  function finish() {
    clearTimeout(watchdog);
    if (failures.length > 0) {
      console.log(`FAIL ${failures.length} check(s) failed: ${failures.join(", ")}`);
      process.exit(1);
    }
    console.log("ok   all checks passed");
    process.exit(0);
  }

  return { usage, env, chainID, chainIDNumber, gateway, check, finish };
}

// viemDescribe is the describe of the scripts that use viem: its short message and details.
export function viemDescribe(err) {
  const details = err?.details ? ` (details: ${err.details})` : "";
  return `${err?.shortMessage ?? err?.message ?? err}${details}`;
}

export function fail(msg) {
  throw new Error(msg);
}

// within rejects when promise has not settled within ms.
export function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
