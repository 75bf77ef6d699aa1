package store

import "time"

// timeLayout is RFC 3339 in UTC with a fixed nine-digit fraction. time.RFC3339Nano drops
// trailing zeros, and then "…:05Z" sorts after "…:05.1Z" as text; a fixed width keeps text
// order equal to time order, which ORDER BY created_at relies on.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
