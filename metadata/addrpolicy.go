package metadata

import "github.com/web3gate/web3gate/internal/netpolicy"

// ErrAddressNotAllowed is the cause of every refusal by the address policy: a metadata URI,
// or a redirect, led to an address that is not a public internet host (loopback, private
// networks, link-local, cloud metadata endpoints, ...). Test with errors.Is. The policy
// itself is internal/netpolicy's, shared with the webhook client.
var ErrAddressNotAllowed = netpolicy.ErrAddressNotAllowed
