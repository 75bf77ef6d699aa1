package subscribe

import (
	"encoding/json"
	"net/http"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// unsubscribe answers eth_unsubscribe on a socket: true when it ended one of the socket's
// subscriptions; any other id (another socket's, one ended already) gets geth's error,
// -32000 "subscription not found".
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
	return nil, errNotFound
}

// errNotFound is geth's answer to eth_unsubscribe of an id its connection does not hold.
var errNotFound = &jsonrpc.Error{Code: -32000, Message: "subscription not found", HTTPStatus: http.StatusOK}

// The answer of eth_unsubscribe, shared (read-only).
var (
	answerTrue = &proxy.Response{Result: []byte("true")}
)
