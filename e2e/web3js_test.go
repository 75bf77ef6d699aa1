package e2e

import (
	"path/filepath"
	"testing"
)

// web3jsWalletAccount is dev account 7 of the shipped config, held by its dev principal and
// funded; no other test sends from it.
const web3jsWalletAccount = "0xE6918739C31eE809d7054C8C9F70D0D54A78af88"

// TestWeb3jsWallet drives the binary, run with the shipped config on the embedded dev chain,
// with web3.js v4 and a node-managed account (no key in the client): getChainId,
// getBlockNumber, getBalance; sendTransaction as web3.js builds it (type 2, legacy, and with
// its own members: nonce, gasLimit, input, networkId, hardfork, common), mined; a TestERC20
// deployed with Contract.deploy().send and a methods.transfer; eth.sign and personal.sign
// recovered; signTransaction then sendSignedTransaction; and a send without a token.
func TestWeb3jsWallet(t *testing.T) {
	artifact, err := filepath.Abs("../contracts/artifacts/TestERC20.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEB3GATE_ERC20_ARTIFACT", artifact) // the script's environment is this one's
	runWalletScript(t, "web3", "js/web3js-wallet.mjs", web3jsWalletAccount)
}
