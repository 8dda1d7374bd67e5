package sinktest

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// leakRun is how many bytes of a secret in a row count as showing it.
const leakRun = 16

// printed returns x as fmt prints it with %v, %+v, %#v and %s, and as
// slog's text and JSON handlers log it.
func printed(x any) []string {
	out := []string{fmt.Sprintf("%v", x), fmt.Sprintf("%+v", x), fmt.Sprintf("%#v", x), fmt.Sprintf("%s", x)}
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("sinktest", slog.Any("value", x))
	}
	return append(out, buf.String())
}

// noSecretIn fails if text shows a secret of the peer (see
// Peer.Secrets); the failure shows where, never the secret.
func (s *suite) noSecretIn(what, text string) error {
	for i, secret := range s.Secrets {
		if secret == "" {
			continue
		}
		n := min(leakRun, len(secret))
		for j := 0; j+n <= len(secret); j++ {
			if k := strings.Index(text, secret[j:j+n]); k >= 0 {
				return fmt.Errorf("%s shows %d bytes of Peer.Secrets[%d] at byte %d of %d", what, n, i, k, len(text))
			}
		}
	}
	return nil
}

// noSecrets fails if err, or any error it wraps (see Chain), shows a
// secret of the peer in its text or as fmt prints it with %v, %+v or
// %#v.
func (s *suite) noSecrets(what string, err error) error {
	errs := Chain(err)
	if len(errs) > maxChain {
		return fmt.Errorf("%s wraps over %d errors: too many to check for secrets", what, maxChain)
	}
	for i, e := range errs {
		where := what
		if i > 0 {
			where = fmt.Sprintf("%s, in a wrapped error of type %T,", what, e)
		}
		for _, text := range []string{e.Error(), fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
			if err := s.noSecretIn(where, text); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxChain bounds Chain.
const maxChain = 1000

// Chain returns err and every error it wraps, through Unwrap() error and
// Unwrap() []error (errors.Join trees), breadth first: what a sink's
// tests check for secrets besides err's own text. It stops after 1,000
// errors (and then returns 1,001).
func Chain(err error) []error { return secretfmt.Chain(err, maxChain) }

// redacted is err, with every secret of the peer in its text replaced by
// the secret's name: a failure that quotes what a sink delivered or
// returned must not put the secret in the test's output.
func (s *suite) redacted(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	for i, secret := range s.Secrets {
		if secret != "" {
			text = strings.ReplaceAll(text, secret, fmt.Sprintf("[Peer.Secrets[%d]]", i))
		}
	}
	if text == err.Error() {
		return err
	}
	return errors.New(text)
}
