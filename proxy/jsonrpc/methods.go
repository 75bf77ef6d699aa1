package jsonrpc

import "sort"

// standardMethods are the method names used as metric label values. Any other method is
// labeled "other", so a client cannot grow the label set.
var standardMethods = setOf(
	"eth_accounts", "eth_blobBaseFee", "eth_blockNumber", "eth_call", "eth_chainId",
	"eth_coinbase", "eth_createAccessList", "eth_estimateGas", "eth_feeHistory",
	"eth_gasPrice", "eth_getBalance", "eth_getBlockByHash", "eth_getBlockByNumber",
	"eth_getBlockReceipts", "eth_getBlockTransactionCountByHash",
	"eth_getBlockTransactionCountByNumber", "eth_getCode", "eth_getFilterChanges",
	"eth_getFilterLogs", "eth_getLogs", "eth_getProof", "eth_getStorageAt",
	"eth_getTransactionByBlockHashAndIndex", "eth_getTransactionByBlockNumberAndIndex",
	"eth_getTransactionByHash", "eth_getTransactionCount", "eth_getTransactionReceipt",
	"eth_getUncleByBlockHashAndIndex", "eth_getUncleByBlockNumberAndIndex",
	"eth_getUncleCountByBlockHash", "eth_getUncleCountByBlockNumber",
	"eth_maxPriorityFeePerGas", "eth_mining", "eth_newBlockFilter", "eth_newFilter",
	"eth_newPendingTransactionFilter", "eth_protocolVersion", "eth_requestAccounts",
	"eth_sendRawTransaction", "eth_sendTransaction", "eth_sign", "eth_signTransaction",
	"eth_signTypedData", "eth_signTypedData_v3", "eth_signTypedData_v4", "eth_simulateV1",
	"eth_subscribe", "eth_syncing", "eth_uninstallFilter", "eth_unsubscribe", "net_listening", "net_peerCount", "net_version",
	"personal_sign", "web3_clientVersion", "web3_sha3",
)

// methodLabels lists the label values: index 0 is "other", then the standard methods.
var methodLabels, methodIndex = indexOf(standardMethods)

func indexOf(set map[string]string) ([]string, map[string]int) {
	labels := []string{"other"}
	for m := range set {
		labels = append(labels, m)
	}
	sort.Strings(labels[1:])
	index := make(map[string]int, len(labels))
	for i, l := range labels {
		index[l] = i
	}
	index["other"] = 0
	return labels, index
}

// MethodIndex is the position of method's label in MethodLabels (0 for "other"), for
// metric series resolved once instead of per request.
func MethodIndex(method string) int { return methodIndex[method] }

// MethodLabels are the label values by MethodIndex.
func MethodLabels() []string { return methodLabels }

func setOf(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = n
	}
	return m
}

// MethodLabel is the metric label value of method: the method name when it is a standard
// Web3 method, else "other". The returned string never aliases method, which may point into
// a request body.
func MethodLabel(method string) string {
	if m, ok := standardMethods[method]; ok {
		return m
	}
	return "other"
}

// signingMethods use keys the service holds. They are never forwarded to an upstream.
var signingMethods = setOf(
	"eth_sendTransaction", "eth_signTransaction", "eth_sign", "eth_signTypedData",
	"eth_signTypedData_v1", "eth_signTypedData_v3", "eth_signTypedData_v4", "eth_accounts",
	"eth_requestAccounts",
)

// IsSigningMethod reports whether method signs with, or lists, accounts the service holds:
// the signing methods above and the whole personal_ namespace.
func IsSigningMethod(method string) bool {
	if _, ok := signingMethods[method]; ok {
		return true
	}
	return len(method) > len("personal_") && method[:len("personal_")] == "personal_"
}

// PureRead reports whether method is a read of chain data whose identical calls may share
// one upstream request (the cache stage coalesces them) or be sent to a second node (hedged
// reads): no side effects, no state one node holds (filters, subscriptions).
func PureRead(method string) bool { return pureReads[method] }

var pureReads = map[string]bool{
	"eth_blockNumber": true, "eth_call": true, "eth_estimateGas": true, "eth_feeHistory": true,
	"eth_gasPrice": true, "eth_getBalance": true, "eth_getBlockByHash": true,
	"eth_getBlockByNumber": true, "eth_getBlockReceipts": true, "eth_getCode": true,
	"eth_getLogs": true, "eth_getProof": true, "eth_getStorageAt": true,
	"eth_getTransactionByHash": true, "eth_getTransactionCount": true,
	"eth_getTransactionReceipt": true, "eth_maxPriorityFeePerGas": true, "eth_syncing": true,
	"eth_blobBaseFee": true, "net_peerCount": true, "net_listening": true,
	"eth_getBlockTransactionCountByHash": true, "eth_getBlockTransactionCountByNumber": true,
	"eth_getTransactionByBlockHashAndIndex": true, "eth_getTransactionByBlockNumberAndIndex": true,
	"eth_createAccessList": true,
}
