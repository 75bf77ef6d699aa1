package awskms

import (
	"context"
	"testing"

	"github.com/web3gate/web3gate/wallet"
)

// BenchmarkSign measures signatures per second through local-kms (for context: a real KMS
// is a network hop away and quota-bound), one at a time and from parallel goroutines.
func BenchmarkSign(b *testing.B) {
	bk := newBackend(b, startKMS(b), nil)
	ref, s := generate(b, bk)
	digest := randomDigest(b)
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.SignDigest(context.Background(), digest); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signs/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sig, err := s.SignDigest(context.Background(), digest)
				if err == nil {
					err = wallet.VerifySignature(digest, sig, ref.Address)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signs/s")
	})
}
