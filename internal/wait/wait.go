// Package wait is the one way the tests of the tree wait for a condition: For with the
// default limit, Within with the test's own. It is imported by tests only.
package wait

import (
	"testing"
	"time"
)

// Limit is For's limit: long enough for a loaded CI machine, short enough that a test
// waiting for something that never happens fails instead of hanging.
const Limit = 30 * time.Second

// poll is how often the condition is checked.
const poll = 10 * time.Millisecond

// For waits until cond holds, checking it every 10 ms; when it does not within Limit, the
// test fails with what (the thing awaited, as "the head 0x10").
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Limit, what, cond)
}

// Within is For with the limit d; it returns how long the wait took.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(poll)
	}
	return time.Since(start)
}
