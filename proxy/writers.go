// The writer workers that take turns writing the queues of a socket set's sockets.

package proxy

import (
	"runtime"
	"sync"
)

// writers run the writers of the sockets of a set on a few worker goroutines, as many as
// GOMAXPROCS at most, started while sockets wait for their turn: a socket whose queue
// was empty gets a turn (writeQueued on a worker), in the order they asked, rather than a
// goroutine of its own each time (which a block's notifications would start for every
// subscriber). A turn never waits on a connection: a write that would wait is handed over
// to a goroutine of the socket's own (see tryBatch).
type writers struct {
	mu      sync.Mutex
	ready   []*socket // waiting for their turn, from head on
	head    int
	workers int // running
}

// add gives k a turn, and starts a worker unless enough run.
func (w *writers) add(k *socket) {
	w.mu.Lock()
	w.ready = append(w.ready, k)
	start := w.workers < runtime.GOMAXPROCS(0)
	if start {
		w.workers++
	}
	w.mu.Unlock()
	if start {
		go w.work()
	}
}

// work is a worker: it runs the turns until no socket waits.
func (w *writers) work() {
	for {
		w.mu.Lock()
		if w.head == len(w.ready) {
			w.ready, w.head = w.ready[:0], 0
			w.workers--
			w.mu.Unlock()
			return
		}
		k := w.ready[w.head]
		w.ready[w.head] = nil
		w.head++
		w.mu.Unlock()
		if !k.writeQueued(nil, true) {
			k.ss.wg.Done()
		}
	}
}
