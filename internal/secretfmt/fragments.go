package secretfmt

import (
	"slices"
	"strings"
)

// MinFragment is the length, in bytes, of the shortest piece of a secret
// that counts as showing it. A shorter piece (a "p", a "123") is in
// almost every text; looking for it would hide every message, or, worse,
// cut every "p" out of one.
const MinFragment = 4

// Fragments returns the pieces of secret, MinFragment bytes each, that
// text holds and no public text holds, in order, each once. text shows a
// piece of secret of MinFragment bytes or more if and only if it holds
// one of secret's MinFragment-byte pieces, so an empty result means it
// shows none (bar those public texts hold too). public are texts that
// may be shown for what they are, such as a DSN's user, host and
// database when the password repeats them: text may quote them. A
// secret shorter than MinFragment has no pieces.
func Fragments(text, secret string, public ...string) []string {
	var found []string
	for i := 0; i+MinFragment <= len(secret); i++ {
		piece := secret[i : i+MinFragment]
		inPublic := slices.ContainsFunc(public, func(p string) bool { return strings.Contains(p, piece) })
		if !strings.Contains(text, piece) || inPublic || slices.Contains(found, piece) {
			continue
		}
		found = append(found, piece)
	}
	return found
}

// Hidden is the text of an error that Hide stood in for.
const Hidden = "(the error's text is not shown: it holds part of a password)"

// Hide returns err, or, when err's text holds a piece of secret (see
// Fragments; public as there), a CauseError with the text Hidden: the
// whole text is left out, never cut about, so that nothing of it is
// shown in a changed and misleading form. The stand-in keeps err's
// sentinels and timeout as Cause does (extra as there). A caller puts
// what it was doing before it ("cannot reach app@db:5432/rooms: …").
func Hide(err error, secret string, public []string, extra ...error) error {
	if err == nil || len(Fragments(err.Error(), secret, public...)) == 0 {
		return err
	}
	return Cause(Hidden, err, extra...)
}
