package outboxui

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
)

// Values from the database in forms. A browser does not hand back every
// string it was given in a form field: the HTML parser turns NUL into
// U+FFFD and CR into LF, the form's encoding turns every LF and lone CR
// into CRLF, and a text input drops CR and LF altogether. An ID, type,
// key or error text that holds them would come back as another string
// (and a requeue would find nothing, or another record). So every such
// value that a page writes into a form field goes there encoded
// (encodeField: ASCII that no browser alters) and every POST decodes it
// (decodeForm). Links need no such care: url.Values percent-encodes
// every byte that needs it and html/template keeps the escapes as they
// are, so a query parameter round-trips any string.

// fieldPrefix starts an encoded form value: fieldPrefix, then the value
// in unpadded base64url.
const fieldPrefix = "b64:"

// base64URLAlphabet is base64url's (RFC 4648, section 5).
const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// encodedFields are the POST form fields that carry values from the
// database, always encoded.
var encodedFields = []string{"id", "type", "key", "error"}

// encodeField is s as a form field carries it.
func encodeField(s string) string {
	return fieldPrefix + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// decodeField is the value encodeField encoded as v; anything else in
// field name is an errBadRequest.
func decodeField(name, v string) (string, error) {
	enc, ok := strings.CutPrefix(v, fieldPrefix)
	// The decoder skips CR and LF; nothing but the alphabet is accepted.
	if ok && strings.Trim(enc, base64URLAlphabet) == "" {
		if b, err := base64.RawURLEncoding.Strict().DecodeString(enc); err == nil {
			return string(b), nil
		}
	}
	return "", fmt.Errorf("%w: form field %s %q: not as this dashboard wrote it (a page of another version, or altered): reload the page and try again",
		errBadRequest, name, safetext.Short(v, 40))
}

// decodeForm returns form with the values of encodedFields decoded, or
// the first that cannot be.
func decodeForm(form url.Values) (url.Values, error) {
	out := make(url.Values, len(form))
	for name, vs := range form {
		out[name] = vs
	}
	for _, name := range encodedFields {
		vs, ok := form[name]
		if !ok {
			continue
		}
		dec := make([]string, len(vs))
		for i, v := range vs {
			var err error
			if dec[i], err = decodeField(name, v); err != nil {
				return nil, err
			}
		}
		out[name] = dec
	}
	return out, nil
}

// inputCannotKeep reports whether a text input would hand s back as
// another string: it holds NUL, CR, LF or bytes that are not UTF-8.
func inputCannotKeep(s string) bool {
	return strings.ContainsAny(s, "\x00\r\n") || !utf8.ValidString(s)
}
