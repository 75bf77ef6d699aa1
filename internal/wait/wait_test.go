package wait

import (
	"testing"
	"time"
)

func TestWithinReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	took := Within(t, time.Second, "the third check", func() bool { n++; return n == 3 })
	if n != 3 || took < 2*poll {
		t.Fatalf("checked %d times in %s, want 3 in at least %s", n, took, 2*poll)
	}
}

// failing records a Fatalf instead of ending the test, to test a wait that fails.
type failing struct {
	testing.TB
	msg string
}

func (f *failing) Helper() {}
func (f *failing) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestWithinFailsTheTestAfterItsLimit(t *testing.T) {
	f := &failing{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("Within did not fail the test (recovered %v)", r)
			}
		}()
		Within(f, 50*time.Millisecond, "never", func() bool { return false })
	}()
	if took := time.Since(start); took < 50*time.Millisecond || f.msg != "%s: not within %s" {
		t.Fatalf("failed after %s with %q", took, f.msg)
	}
}
