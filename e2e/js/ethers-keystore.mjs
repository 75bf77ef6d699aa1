// ethers-keystore.mjs: write JSON keystore files the way ethers v6 applications export a
// wallet, for `web3gate accounts import` to read.
//
// Environment:
//   KEYSTORE_DIR   directory the files are written to (must exist)
//   KEYSTORE_PASS  the files' passphrase
//   SCRYPT_N       optional: scrypt N (a power of 2) through encryptKeystoreJson; without it,
//                  the wallet's own encrypt()/encryptSync() with ethers' defaults (N = 2^17)
//
// Writes two files and prints one JSON line {"<file name>": "<address>", ...}:
//   encrypt.json       Wallet.createRandom().encrypt(pass): an HD wallet, so the file carries
//                      the mnemonic in its "x-ethers" member
//   encrypt-sync.json  new Wallet(key).encryptSync(pass): a plain key, no mnemonic
//
// Run: KEYSTORE_DIR=/tmp/k KEYSTORE_PASS=pw node e2e/js/ethers-keystore.mjs  (after npm ci --prefix e2e)

import { Wallet, encryptKeystoreJson, encryptKeystoreJsonSync } from "ethers";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.KEYSTORE_DIR;
const pass = process.env.KEYSTORE_PASS;
if (!dir || pass === undefined) {
  console.error("set KEYSTORE_DIR and KEYSTORE_PASS");
  process.exit(2);
}
const n = process.env.SCRYPT_N ? Number(process.env.SCRYPT_N) : undefined;

const hd = Wallet.createRandom();
const plain = new Wallet(Wallet.createRandom().privateKey);
const account = (w) => ({ address: w.address, privateKey: w.privateKey, mnemonic: w.mnemonic ?? undefined });

const files = {
  "encrypt.json": [hd, n ? await encryptKeystoreJson(account(hd), pass, { scrypt: { N: n } }) : await hd.encrypt(pass)],
  "encrypt-sync.json": [plain, n ? encryptKeystoreJsonSync(account(plain), pass, { scrypt: { N: n } }) : plain.encryptSync(pass)],
};
const out = {};
for (const [name, [wallet, json]] of Object.entries(files)) {
  writeFileSync(join(dir, name), json, { mode: 0o600 });
  out[name] = wallet.address;
}
console.log(JSON.stringify(out));
