package svckit

// OrDefault sets *v to def when it is the zero value.
func OrDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
