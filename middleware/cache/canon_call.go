// The canonical form of eth_call's call object.

package cache

import "bytes"

// The call object's fields the reader knows, in the canonical (sorted) order; data is read
// as input.
const (
	cfChainID = iota
	cfFrom
	cfGas
	cfGasPrice
	cfInput
	cfMaxFeePerGas
	cfMaxPriorityFeePerGas
	cfNonce
	cfTo
	cfValue
	cfData // not written: merged into input
	cfCount
)

var callFieldNames = [cfCount]string{`"chainId":`, `"from":`, `"gas":`, `"gasPrice":`, `"input":`,
	`"maxFeePerGas":`, `"maxPriorityFeePerGas":`, `"nonce":`, `"to":`, `"value":`, ``}

func callField(key []byte) int {
	switch string(key) {
	case "chainId":
		return cfChainID
	case "from":
		return cfFrom
	case "gas":
		return cfGas
	case "gasPrice":
		return cfGasPrice
	case "input":
		return cfInput
	case "maxFeePerGas":
		return cfMaxFeePerGas
	case "maxPriorityFeePerGas":
		return cfMaxPriorityFeePerGas
	case "nonce":
		return cfNonce
	case "to":
		return cfTo
	case "value":
		return cfValue
	case "data":
		return cfData
	}
	return -1
}

// appendCall appends an eth_call object: known fields only, in one order, nulls dropped,
// data as input.
func appendCall(b, raw []byte) ([]byte, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return b, errCanon
	}
	var fields [cfCount][]byte // the last of duplicate keys counts, as in encoding/json
	it := newIter(raw)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		f := callField(objectKey(k))
		if f < 0 {
			return b, errCanon
		}
		fields[f] = v
	}
	for f, v := range fields {
		if string(v) == "null" {
			fields[f] = nil
		}
	}
	if d := fields[cfData]; d != nil {
		dd, err := dataDigits(d)
		if err != nil {
			return b, err
		}
		if in := fields[cfInput]; in != nil {
			id, err := dataDigits(in)
			if err != nil {
				return b, err
			}
			if !bytes.EqualFold(dd, id) {
				return b, errCanon // geth refuses both when they differ
			}
		}
		fields[cfInput] = d
	}
	b = append(b, '{')
	first := true
	for f, v := range fields[:cfData] {
		if v == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, callFieldNames[f]...)
		var err error
		switch f {
		case cfFrom, cfTo:
			b, err = appendAddress(b, v)
		case cfInput:
			b, err = appendData(b, v)
		default:
			b, err = appendQuantity(b, v)
		}
		if err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}
