// Package defaults fills the configuration fields left unset.
package defaults

// Set sets *p to v when *p is the zero value of its type (the key was absent from the file).
func Set[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}
