//go:build cgo

package pkcs11

import (
	"errors"

	p11 "github.com/miekg/pkcs11"
)

// ckr returns the CKR_ code of err, when err is (or wraps) a PKCS#11 error.
func ckr(err error) (uint, bool) {
	var e p11.Error
	if errors.As(err, &e) {
		return uint(e), true
	}
	return 0, false
}

// isGone reports whether err means that the token, its sessions or its login went away: the
// pool drops its sessions and opens new ones (finding the token and logging in again) on
// the next call.
func isGone(err error) bool {
	code, ok := ckr(err)
	if !ok {
		return false
	}
	switch code {
	case p11.CKR_SESSION_HANDLE_INVALID, p11.CKR_SESSION_CLOSED, p11.CKR_USER_NOT_LOGGED_IN,
		p11.CKR_DEVICE_REMOVED, p11.CKR_DEVICE_ERROR, p11.CKR_DEVICE_MEMORY,
		p11.CKR_TOKEN_NOT_PRESENT, p11.CKR_TOKEN_NOT_RECOGNIZED, p11.CKR_SLOT_ID_INVALID,
		p11.CKR_CRYPTOKI_NOT_INITIALIZED, p11.CKR_GENERAL_ERROR, p11.CKR_FUNCTION_FAILED:
		return true
	}
	return false
}

// isStaleHandle reports whether err means that a cached object handle no longer names the
// object: it is found again by its CKA_ID.
func isStaleHandle(err error) bool {
	code, ok := ckr(err)
	return ok && (code == p11.CKR_OBJECT_HANDLE_INVALID || code == p11.CKR_KEY_HANDLE_INVALID)
}

// isNotInitialized reports whether err means that the library was finalised under us.
func isNotInitialized(err error) bool {
	code, ok := ckr(err)
	return ok && code == p11.CKR_CRYPTOKI_NOT_INITIALIZED
}
