package subscribe

import (
	"math"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/feeds"
)

// logsSinks sharing a chain's memo each get the logs their own criteria match, in order,
// "removed" ones for a removed block, whatever the criteria of the sinks delivered before.
func TestLogsSinksShareMatches(t *testing.T) {
	a, b := common.Address{0xa}, common.Address{0xb}
	topic := common.Hash{0x1}
	logs := []feeds.Log{
		{Address: a, Topics: []common.Hash{topic}, Raw: []byte(`"a0"`), RawRemoved: []byte(`"a0 removed"`)},
		{Address: b, Topics: []common.Hash{topic}, Raw: []byte(`"b1"`), RawRemoved: []byte(`"b1 removed"`)},
		{Address: a, Raw: []byte(`"a2"`), RawRemoved: []byte(`"a2 removed"`)},
	}
	memo := &logsMemo{}
	sink := func(c *feeds.Criteria) (*logsSink, *fakeSub) {
		sub := &fakeSub{}
		return &logsSink{sub: sub, crit: c, span: blockRange{0, math.MaxUint64}, key: criteriaKey(c), memo: memo}, sub
	}
	onlyA, subA := sink(&feeds.Criteria{Addresses: []common.Address{a}})
	onlyA2, subA2 := sink(&feeds.Criteria{Addresses: []common.Address{a}})
	withTopic, subT := sink(&feeds.Criteria{Topics: [][]common.Hash{{topic}}})
	all, subAll := sink(&feeds.Criteria{})
	if onlyA.key != onlyA2.key || onlyA.key == withTopic.key || withTopic.key == all.key {
		t.Fatal("criteria keys do not tell the criteria apart")
	}
	block := &feeds.Block{Number: 1, Logs: logs, HasLogs: true}
	for _, ev := range []feeds.Event{{Block: block}, {Block: block, Removed: true}, {Block: &feeds.Block{Number: 2, HasLogs: true}}} {
		for _, s := range []*logsSink{onlyA, withTopic, onlyA2, all} {
			s.Deliver(ev)
		}
	}
	for _, tc := range []struct {
		sub  *fakeSub
		want []string
	}{
		{subA, []string{`"a0"`, `"a2"`, `"a0 removed"`, `"a2 removed"`}},
		{subA2, []string{`"a0"`, `"a2"`, `"a0 removed"`, `"a2 removed"`}},
		{subT, []string{`"a0"`, `"b1"`, `"a0 removed"`, `"b1 removed"`}},
		{subAll, []string{`"a0"`, `"b1"`, `"a2"`, `"a0 removed"`, `"b1 removed"`, `"a2 removed"`}},
	} {
		if !slices.Equal(tc.sub.notes, tc.want) {
			t.Errorf("notified %q, want %q", tc.sub.notes, tc.want)
		}
	}
}
