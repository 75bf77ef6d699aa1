package owners

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
	"github.com/tidwall/gjson"

	"github.com/web3gate/web3gate/internal/rpchex"
	"github.com/web3gate/web3gate/store"
)

// The event signatures (topic 0) the index reads.
var (
	// Transfer(address indexed from, address indexed to, uint256 indexed tokenId): ERC721,
	// four topics. ERC20's Transfer has the same signature with three topics and is ignored.
	topicTransfer = common.HexToHash("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")
	// TransferSingle(address indexed operator, address indexed from, address indexed to,
	// uint256 id, uint256 value): ERC1155.
	topicTransferSingle = common.HexToHash("0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62")
	// TransferBatch(address indexed operator, address indexed from, address indexed to,
	// uint256[] ids, uint256[] values): ERC1155.
	topicTransferBatch = common.HexToHash("0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb")
)

// Kinds of log, the `kind` label of the logs metric.
const (
	kindERC721        = iota // Transfer with four topics
	kindERC1155Single        // TransferSingle
	kindERC1155Batch         // TransferBatch
	kindMalformed            // one of the three signatures, but not as the standards write it
	kindIgnored              // anything else: ERC20 Transfer, other events
	numKinds
)

var kindNames = [numKinds]string{"erc721", "erc1155_single", "erc1155_batch", "malformed", "ignored"}

// maxBatchItems bounds the ids of one TransferBatch (each costs gas; a larger array in a log
// is taken as malformed rather than allocated).
const maxBatchItems = 1 << 16

// transfer is one token movement: an ERC721 Transfer, or one id of an ERC1155 transfer.
type transfer struct {
	block    uint64
	contract common.Address
	from, to common.Address
	id       uint256.Int
	amount   uint256.Int // 1 for ERC721
	standard int         // store.StandardERC721 or store.StandardERC1155
}

// logBatch is what one eth_getLogs answer holds for the index.
type logBatch struct {
	transfers []transfer
	kinds     [numKinds]int // logs by kind
	// blockHashes are the hashes the logs name for their blocks, to check against the
	// headers of the same fetch.
	blockHashes map[uint64]common.Hash
}

// errInconsistent: the node's answer contradicts itself or the request (a log outside the
// range, two hashes for one block, a removed log); the fetch is retried.
var errInconsistent = errors.New("inconsistent node answer")

// parseLogs reads an eth_getLogs result (a JSON array of logs) for the blocks from..to. Logs
// of the three events that do not follow their standard's layout are counted as malformed
// and skipped; other logs are counted as ignored.
func parseLogs(raw []byte, from, to uint64) (*logBatch, error) {
	res := gjson.ParseBytes(raw)
	if !res.IsArray() {
		return nil, fmt.Errorf("eth_getLogs answer is not an array")
	}
	b := &logBatch{blockHashes: map[uint64]common.Hash{}}
	var err error
	res.ForEach(func(_, lg gjson.Result) bool {
		err = b.add(lg, from, to)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// add reads one log.
func (b *logBatch) add(lg gjson.Result, from, to uint64) error {
	if !lg.IsObject() {
		return fmt.Errorf("%w: a log is not an object", errInconsistent)
	}
	var (
		address, number, hash, data, removed gjson.Result
		topics                               []gjson.Result
	)
	lg.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "address":
			address = v
		case "blockNumber":
			number = v
		case "blockHash":
			hash = v
		case "data":
			data = v
		case "topics":
			topics = v.Array()
		case "removed":
			removed = v
		}
		return true
	})
	block, err := rpchex.Quantity(number.Str)
	if err != nil || number.Type != gjson.String {
		return fmt.Errorf("%w: log blockNumber %q", errInconsistent, number.Raw)
	}
	if block < from || block > to {
		return fmt.Errorf("%w: a log of block %d in an answer for blocks %d-%d", errInconsistent, block, from, to)
	}
	if removed.Type == gjson.True {
		return fmt.Errorf("%w: a removed log in eth_getLogs", errInconsistent)
	}
	var bh common.Hash
	if !rpchex.Fixed(bh[:], hash.Str) {
		return fmt.Errorf("%w: log blockHash %q", errInconsistent, hash.Raw)
	}
	if prev, ok := b.blockHashes[block]; ok && prev != bh {
		return fmt.Errorf("%w: two hashes for block %d", errInconsistent, block)
	}
	b.blockHashes[block] = bh

	var contract common.Address
	if !rpchex.Fixed(contract[:], address.Str) {
		return fmt.Errorf("%w: log address %q", errInconsistent, address.Raw)
	}
	var sig common.Hash
	if len(topics) == 0 || !rpchex.Fixed(sig[:], topics[0].Str) {
		b.kinds[kindIgnored]++
		return nil
	}
	kind := kindIgnored
	switch {
	case sig == topicTransfer && len(topics) == 4:
		kind = kindERC721
	case sig == topicTransfer:
		// ERC20 (three topics) or an ERC721 from before the standard indexed the token id.
	case sig == topicTransferSingle:
		kind = kindERC1155Single
	case sig == topicTransferBatch:
		kind = kindERC1155Batch
	}
	if kind == kindIgnored {
		b.kinds[kindIgnored]++
		return nil
	}
	n := len(b.transfers)
	if !b.decode(kind, block, contract, topics, data.Str) {
		b.transfers = b.transfers[:n]
		kind = kindMalformed
	}
	b.kinds[kind]++
	return nil
}

// decode appends the transfers of one log of kind; false when the log does not follow the
// standard's layout.
func (b *logBatch) decode(kind int, block uint64, contract common.Address, topics []gjson.Result, dataHex string) bool {
	if len(topics) != 4 {
		return false
	}
	var words [3]common.Hash
	for i := range words {
		if !rpchex.Fixed(words[i][:], topics[i+1].Str) {
			return false
		}
	}
	data, ok := decodeData(dataHex)
	if !ok {
		return false
	}
	t := transfer{block: block, contract: contract}
	switch kind {
	case kindERC721:
		if len(data) != 0 || !topicAddress(words[0], &t.from) || !topicAddress(words[1], &t.to) {
			return false
		}
		t.id.SetBytes32(words[2][:])
		t.amount.SetOne()
		t.standard = store.StandardERC721
		b.transfers = append(b.transfers, t)
		return true
	case kindERC1155Single:
		// words[0] is the operator.
		if len(data) != 64 || !topicAddress(words[1], &t.from) || !topicAddress(words[2], &t.to) {
			return false
		}
		t.id.SetBytes32(data[:32])
		t.amount.SetBytes32(data[32:64])
		t.standard = store.StandardERC1155
		b.transfers = append(b.transfers, t)
		return true
	default: // kindERC1155Batch
		if !topicAddress(words[1], &t.from) || !topicAddress(words[2], &t.to) {
			return false
		}
		ids, ok1 := abiWords(data, 0)
		values, ok2 := abiWords(data, 1)
		if !ok1 || !ok2 || len(ids) != len(values) {
			return false
		}
		t.standard = store.StandardERC1155
		for i := range ids {
			t.id.SetBytes32(ids[i])
			t.amount.SetBytes32(values[i])
			b.transfers = append(b.transfers, t)
		}
		return true
	}
}

// abiWords decodes the dynamic uint256[] that is argument arg of ABI-encoded data: the
// offset in the head, then the length and the words.
func abiWords(data []byte, arg int) ([][]byte, bool) {
	off, ok := abiUint(data, arg*32)
	if !ok || off%32 != 0 {
		return nil, false
	}
	n, ok := abiUint(data, int(off))
	if !ok || n > maxBatchItems {
		return nil, false
	}
	start := int(off) + 32
	if start+int(n)*32 > len(data) {
		return nil, false
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = data[start+i*32 : start+(i+1)*32]
	}
	return out, true
}

// abiUint reads the word at offset at as a small integer (offsets and lengths).
func abiUint(data []byte, at int) (uint64, bool) {
	if at < 0 || at+32 > len(data) {
		return 0, false
	}
	w := data[at : at+32]
	for _, c := range w[:24] {
		if c != 0 {
			return 0, false
		}
	}
	v := uint64(0)
	for _, c := range w[24:] {
		v = v<<8 | uint64(c)
	}
	if v > uint64(len(data)) {
		return 0, false
	}
	return v, true
}

// topicAddress reads an indexed address: 12 zero bytes, then the address.
func topicAddress(w common.Hash, dst *common.Address) bool {
	for _, c := range w[:12] {
		if c != 0 {
			return false
		}
	}
	copy(dst[:], w[12:])
	return true
}

// decodeData decodes a 0x-prefixed hex byte string ("0x" is empty).
func decodeData(s string) ([]byte, bool) {
	if len(s) < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || len(s)%2 != 0 {
		return nil, false
	}
	out, err := hex.DecodeString(s[2:])
	return out, err == nil
}
