// Command wsfloor is the write floor of `go run ./bench`'s (w): a WebSocket server that does
// nothing for a block but the least any server pushing it to its subscribers does: one
// write(2) per socket of the block's frames, built from bytes made before the block, on
// GOMAXPROCS writer goroutines. Its delivery p99 under (w)'s subscribers is the cost of the
// writes alone on the bench's CPU, against which web3gate's is compared.
//
// A socket's first message must be eth_subscribe of newHeads or logs; it is answered with an
// id of the socket's own. POST /block?n=N (the bench's "mining") sends block N to every
// subscribed socket: a newHeads notification of a header of about the size of anvil's, or
// 100 log notifications (logs subscribers), in one write per socket. It answers at once.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fasthttp/websocket"
)

// sock is one subscribed socket.
type sock struct {
	conn   net.Conn
	prefix []byte // the notification up to its result: {"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x…","result":
	logs   bool
	buf    []byte
}

var (
	mu    sync.Mutex
	socks []*sock
	ids   atomic.Uint64
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	perBlock := flag.Int("logs", 100, "logs per block of a logs subscriber")
	flag.Parse()
	up := websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 1024, CheckOrigin: func(*http.Request) bool { return true }}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		_, msg, err := c.ReadMessage()
		if err != nil || !bytes.Contains(msg, []byte(`"eth_subscribe"`)) {
			c.Close()
			return
		}
		id := fmt.Sprintf("0x%032x", ids.Add(1))
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"result":"`+id+`"}`)); err != nil {
			c.Close()
			return
		}
		s := &sock{conn: c.NetConn(), logs: bytes.Contains(msg, []byte(`"logs"`)),
			prefix: []byte(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"` + id + `","result":`)}
		mu.Lock()
		socks = append(socks, s)
		mu.Unlock()
		// Reads nothing more; the socket stays open until the client closes it.
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseUint(r.URL.Query().Get("n"), 10, 64)
		if err != nil {
			http.Error(w, "n", http.StatusBadRequest)
			return
		}
		head, logs := results(n, *perBlock)
		mu.Lock()
		all := append([]*sock(nil), socks...)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		go send(all, head, logs)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening", ln.Addr())
	fmt.Fprintln(os.Stderr, http.Serve(ln, mux))
	os.Exit(1)
}

// send writes the block to every socket, GOMAXPROCS writers taking sockets in turn.
func send(all []*sock, head []byte, logs [][]byte) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(all) {
					return
				}
				s := all[i]
				s.buf = s.buf[:0]
				if s.logs {
					for _, l := range logs {
						s.buf = frame(s.buf, s.prefix, l)
					}
				} else {
					s.buf = frame(s.buf, s.prefix, head)
				}
				_, _ = s.conn.Write(s.buf)
			}
		})
	}
	wg.Wait()
}

// frame appends one unmasked text frame of prefix + result + "}}" to buf.
func frame(buf, prefix, result []byte) []byte {
	n := len(prefix) + len(result) + 2
	switch {
	case n < 126:
		buf = append(buf, 0x81, byte(n))
	case n < 1<<16:
		buf = append(buf, 0x81, 126, byte(n>>8), byte(n))
	default:
		buf = append(buf, 0x81, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	buf = append(buf, prefix...)
	buf = append(buf, result...)
	return append(buf, '}', '}')
}

// results are block n's header and logs, of about the size of anvil's for (w)'s blocks.
func results(n uint64, perBlock int) ([]byte, [][]byte) {
	h32 := func(x uint64) string { return fmt.Sprintf("0x%064x", x) }
	bloom := "0x" + string(bytes.Repeat([]byte("0"), 512))
	head := fmt.Sprintf(`{"hash":"%s","parentHash":"%s","sha3Uncles":"%s","miner":"0x0000000000000000000000000000000000000000","stateRoot":"%s","transactionsRoot":"%s","receiptsRoot":"%s","logsBloom":"%s","difficulty":"0x0","number":"0x%x","gasLimit":"0x1c9c380","gasUsed":"0x2dc6c0","timestamp":"0x%x","extraData":"0x","mixHash":"%s","nonce":"0x0000000000000000","baseFeePerGas":"0x3b9aca00","blobGasUsed":"0x0","excessBlobGas":"0x0","parentBeaconBlockRoot":"%s"}`,
		h32(n+1), h32(n), h32(7), h32(8), h32(9), h32(10), bloom, n, 1_700_000_000+n, h32(11), h32(12))
	logs := make([][]byte, perBlock)
	for i := range logs {
		logs[i] = fmt.Appendf(nil, `{"address":"0x5fbdb2315678afecb367f032d93f642f64180aa3","topics":["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef","%s","%s"],"data":"%s","blockHash":"%s","blockNumber":"0x%x","blockTimestamp":"0x%x","transactionHash":"%s","transactionIndex":"0x0","logIndex":"0x%x","removed":false}`,
			h32(0xabc), h32(uint64(0x3000+i)), h32(1), h32(n+1), n, 1_700_000_000+n, h32(n+99), i)
	}
	return []byte(head), logs
}
