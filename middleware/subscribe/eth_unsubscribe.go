package subscribe

import (
	"encoding/json"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// unsubscribe answers eth_unsubscribe on a socket: true when it ended one of the socket's
// subscriptions, false for any other id (another socket's, one ended already).
func unsubscribe(c *proxy.Call) (*proxy.Response, error) {
	var args []json.RawMessage
	if json.Unmarshal(c.Request.Params, &args) != nil || len(args) == 0 {
		return nil, jsonrpc.ErrInvalidParams.With("missing value for required argument 0")
	}
	if len(args) > 1 {
		return nil, jsonrpc.ErrInvalidParams.With("too many arguments, want at most 1")
	}
	var id string
	if json.Unmarshal(args[0], &id) != nil {
		return nil, jsonrpc.ErrInvalidParams.With("invalid argument 0: the subscription id must be a string")
	}
	if c.Exchange.Socket.Unsubscribe(id) {
		return answerTrue, nil
	}
	return answerFalse, nil
}

// The answers of eth_unsubscribe, shared (read-only).
var (
	answerTrue  = &proxy.Response{Result: []byte("true")}
	answerFalse = &proxy.Response{Result: []byte("false")}
)
