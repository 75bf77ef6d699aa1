package proxy

import (
	"encoding/binary"
	"sync"
)

// A socket's writer builds the WebSocket frames of what is queued itself, straight into one
// pooled buffer, and sends them in one write: a notification is the frame's header, the
// subscription's prefix, the shared result and notificationEnd, copied once; nothing is
// built per message, and nothing of it is left to the garbage collector. (Server frames are
// not masked; the server never compresses.)

// frameBufClasses are the capacities of the frame buffers, smallest first: a writer takes
// the smallest that holds what it has to write (a newHeads notification: the smallest; a
// logs subscriber's block: the largest), and writes more than the largest holds in several
// writes of it.
var frameBufClasses = [...]int{2 << 10, 8 << 10, 32 << 10, 128 << 10}

// maxFrameBuf is the largest frame buffer: a message longer than that is written from where
// it is (its frame's header and prefix from the buffer).
const maxFrameBuf = 128 << 10

// frameBufs are the pools of frame buffers, one per class of frameBufClasses.
type frameBufs [len(frameBufClasses)]sync.Pool

// get returns an empty buffer of the smallest class that holds size bytes (the largest
// class for more).
func (p *frameBufs) get(size int) *[]byte {
	c := len(frameBufClasses) - 1
	for i, n := range frameBufClasses {
		if size <= n {
			c = i
			break
		}
	}
	if b, ok := p[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, frameBufClasses[c])
	return &b
}

// put gives back a buffer of get.
func (p *frameBufs) put(b *[]byte) {
	for i, n := range frameBufClasses {
		if cap(*b) == n {
			*b = (*b)[:0]
			p[i].Put(b)
			return
		}
	}
}

// The opcode byte of a final text frame.
const textFrame = 0x80 | 1

// frameHeaderLen is the length of the header of an unmasked frame of n payload bytes.
func frameHeaderLen(n int) int {
	switch {
	case n < 126:
		return 2
	case n <= 0xffff:
		return 4
	}
	return 10
}

// appendFrameHeader appends the header of an unmasked final text frame of n payload bytes.
func appendFrameHeader(dst []byte, n int) []byte {
	switch {
	case n < 126:
		return append(dst, textFrame, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, textFrame, 126), uint16(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, textFrame, 127), uint64(n))
}

// payloadLen is the length of m's message: the answer, or the notification.
func (m *outMsg) payloadLen() int {
	if m.prefix == nil {
		return len(m.body)
	}
	return len(m.prefix) + len(m.body) + len(notificationEnd)
}

// frameLen is the length of m's frame.
func (m *outMsg) frameLen() int {
	n := m.payloadLen()
	return frameHeaderLen(n) + n
}

// queueClasses are the capacities of the pooled queue arrays (a socket's queue beyond
// maxSpare messages, as a logs subscriber's block fills it).
var queueClasses = [...]int{128, 1024, 8192}

// queueArrays are the pools of queue arrays, one per class of queueClasses.
type queueArrays [len(queueClasses)]sync.Pool

// grow returns q with room for n more messages: q itself when it has it, else an array of
// the smallest class that holds them (q's messages copied, q given back), or beyond the
// largest class one of its own.
func (p *queueArrays) grow(q []outMsg, n int) []outMsg {
	need := len(q) + n
	if need <= cap(q) {
		return q
	}
	var g []outMsg
	if need <= maxSpare {
		g = make([]outMsg, len(q), max(need, 2*cap(q)))
	} else {
		for i, c := range queueClasses {
			if need <= c {
				if a, ok := p[i].Get().(*[]outMsg); ok {
					g = (*a)[:len(q)]
				} else {
					g = make([]outMsg, len(q), c)
				}
				break
			}
		}
		if g == nil {
			g = make([]outMsg, len(q), need+need/4)
		}
	}
	copy(g, q)
	p.put(q)
	return g
}

// put gives back q's array when it is of a class of queueClasses (cleared: it holds no
// references).
func (p *queueArrays) put(q []outMsg) {
	for i, c := range queueClasses {
		if cap(q) == c {
			q = q[:c]
			clear(q)
			a := q[:0]
			p[i].Put(&a)
			return
		}
	}
}
