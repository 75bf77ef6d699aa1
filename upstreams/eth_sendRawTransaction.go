package upstreams

// eth_sendRawTransaction broadcasts signed bytes. Sending them twice to one node gains
// nothing and turns an acceptance into an "already known" or "nonce too low" error, so
// Forward sends such a call at most once to each node: a failed attempt moves on to the
// next node with the same bytes, and once every node has been tried the call fails. The
// same bytes reaching two nodes is harmless: they are one transaction with one hash.

// sentAtMostOncePerNode reports whether method must not be sent twice to the same node.
func sentAtMostOncePerNode(method string) bool {
	return method == "eth_sendRawTransaction"
}
