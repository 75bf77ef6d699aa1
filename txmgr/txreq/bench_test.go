package txreq

import (
	"encoding/json"
	"testing"
)

// BenchmarkParse measures Parse against a baseline in the same run: a plain json.Unmarshal of
// the same params into raw members, the least any parser of the object must do.
func BenchmarkParse(b *testing.B) {
	params := []byte(dynamic("chainId", `"0x89"`, "type", `"0x2"`, "data", `"0xa9059cbb000000000000000000000000fb6916095ca1df60bb79ce92ce3ea74c37c5d3590000000000000000000000000000000000000000000000000de0b6b3a7640000"`))
	b.Run("baseline=json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v []map[string]json.RawMessage
			if err := json.Unmarshal(params, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(params, polygon); err != nil {
				b.Fatal(err)
			}
		}
	})
}
