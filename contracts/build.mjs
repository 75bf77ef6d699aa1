// Compiles every src/*.sol with the pinned solc (standard-JSON API, imports resolved from
// node_modules) and writes artifacts/<Contract>.json = {contractName, abi, bytecode}.
// The output is reproducible byte for byte: same sources and pins, same artifacts.
//
// Usage: npm ci --prefix contracts && node contracts/build.mjs   (or: make contracts)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const solc = require("solc");

const srcDir = path.join(root, "src");
const outDir = path.join(root, "artifacts");
const modulesDir = path.join(root, "node_modules");

// Source unit names are relative ("src/X.sol", "@openzeppelin/..."): they end up in the
// metadata hash appended to the bytecode, so absolute paths would make builds machine-specific.
const sources = {};
for (const file of fs.readdirSync(srcDir).filter((f) => f.endsWith(".sol")).sort()) {
  sources[`src/${file}`] = { content: fs.readFileSync(path.join(srcDir, file), "utf8") };
}
if (Object.keys(sources).length === 0) {
  fail(`no .sol files in ${srcDir}`);
}

const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.bytecode.linkReferences"] } },
  },
};

function findImports(name) {
  const file = path.resolve(modulesDir, name);
  if (!file.startsWith(modulesDir + path.sep)) {
    return { error: `import outside node_modules: ${name}` };
  }
  try {
    return { contents: fs.readFileSync(file, "utf8") };
  } catch (err) {
    return { error: `${name}: ${err.message} (run: npm ci --prefix contracts)` };
  }
}

const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));

let errors = 0;
for (const d of output.errors ?? []) {
  console.error(d.formattedMessage ?? d.message);
  if (d.severity === "error") errors++;
}
if (errors > 0) {
  fail(`${errors} compiler error(s)`);
}

fs.mkdirSync(outDir, { recursive: true });
const written = new Set();
for (const unit of Object.keys(sources)) {
  for (const [name, contract] of Object.entries(output.contracts?.[unit] ?? {})) {
    const code = contract.evm.bytecode.object;
    if (!code) continue; // abstract contract or interface: nothing to deploy
    if (Object.keys(contract.evm.bytecode.linkReferences ?? {}).length > 0) {
      fail(`${name}: needs library linking, which this build does not do`);
    }
    if (written.has(name)) {
      fail(`contract name ${name} defined twice`);
    }
    const artifact = { contractName: name, abi: contract.abi, bytecode: `0x${code}` };
    fs.writeFileSync(path.join(outDir, `${name}.json`), JSON.stringify(artifact, null, 2) + "\n");
    written.add(name);
  }
}
// Drop artifacts of contracts that no longer exist, so the directory mirrors src/.
for (const file of fs.readdirSync(outDir)) {
  if (file.endsWith(".json") && !written.has(file.slice(0, -".json".length))) {
    fs.rmSync(path.join(outDir, file));
  }
}
console.log(`solc ${solc.version()}: ${[...written].sort().join(", ")} -> ${path.relative(process.cwd(), outDir) || "."}`);

function fail(message) {
  console.error(`build.mjs: ${message}`);
  process.exit(1);
}
