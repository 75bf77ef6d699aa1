// Request ids: the ones the server makes, and the check of one a client sends.

package proxy

import "strconv"

// appendRequestID appends a new request id to dst: the process's random prefix and a
// sequence number.
func (s *Server) appendRequestID(dst []byte) []byte {
	dst = append(dst, s.idPrefix...)
	return strconv.AppendUint(dst, s.idSeq.Add(1), 36)
}

func validRequestID(v []byte) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

var headerRequestID = []byte("X-Request-Id")
