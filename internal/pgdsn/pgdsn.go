// Package pgdsn checks that a PostgreSQL DSN means one thing before pgx
// parses it, for everything that takes a DSN from a user (outboxctl,
// store/postgres's Listener, the PostgreSQL bench). It imports no
// driver.
//
// pgx parses a DSN as libpq does, and libpq's reading of a URL is not
// the one people expect: in postgres://USER:/Secret@host/db the
// userinfo ends at the first "/", so pgx takes USER for the host and
// "Secret@host" for the database; in postgres://u:p@ss#w0rd@host/db it
// ends at the first "@", so the password is "p" and the host
// "ss#w0rd@host". Whatever pgx then reports (the host it could not
// resolve, the database that does not exist) holds the rest of the
// password, and no redaction can find a password the parser never saw.
// So a DSN is checked against rules under which every reading agrees,
// and refused otherwise, with an error that quotes nothing of it and
// says how to write it.
//
// The URL form (postgres:// or postgresql://):
//
//   - The authority runs from "//" to the first "/", "?" or end; it holds
//     at most one "@", and there is no "@" anywhere else. So a "/", "?",
//     "#" or "@" in a user or password must be percent-encoded (%2F, %3F,
//     %23, %40).
//   - The user and password, split at the one ":" (a second ":" must be
//     %3A), hold only letters, digits, "-._~!$&'()*+,;=" and %XX (two hex
//     digits, not %00): a space, a control character, a non-ASCII
//     character, "%" alone, "[", "]", "\"", "<", ">", "\\", "^", "`",
//     "{", "|" or "}" must be percent-encoded.
//   - The host list is HOST[:PORT] separated by ",", a HOST being
//     letters, digits, "-._~" and %XX, or [IPv6]; a PORT is digits.
//   - The database name (after the "/", up to "?") holds no "/", and
//     the characters of a user otherwise (plus ":").
//   - The query is KEY=VALUE pairs joined by "&", each with one "=", no
//     key given twice; a value holds no "@", "?", "#", "+" (a space to
//     form decoding, a "+" to pgx), space, control or non-ASCII character
//     (percent-encode them). With a password in the
//     query (?password=), every key must be a connection keyword, since
//     a "&" in the password would otherwise make a server setting of its
//     tail.
//   - No "#" anywhere (a URL fragment; PostgreSQL has none).
//
// The key=value form (host=HOST user=USER password=PASSWORD …):
//
//   - Pairs are separated by spaces; a key is a name (letters, digits,
//     "_" and "."), given once (dbname and database are one key); "="
//     may have spaces around it.
//   - A value is a run of characters other than spaces, or is quoted in
//     '…' with \' and \\ inside; a quoted value must be closed and be
//     followed by a space or the end. An unquoted value holds no "=":
//     after "password= " pgx takes the next pair for the value, so an
//     empty value is written as two single quotes. A value may not end
//     in a lone backslash, and no control character stands outside
//     quotes.
//   - With a password, every key must be a connection keyword, so that
//     a password with an unquoted space cannot turn its tail into a
//     server setting.
//
// A NUL byte is refused in either form (pgx refuses it too).
package pgdsn

import (
	"errors"
	"strings"
)

// ErrAmbiguous is what Check's errors match (errors.Is): the DSN does not
// parse unambiguously.
var ErrAmbiguous = errors.New("does not parse unambiguously")

// URLHow and KeywordHow say how to write a DSN of each form, for errors.
const (
	URLHow = `percent-encode a "@", ":", "/", "?", "#", "%", space or non-ASCII character ` +
		`in the user, password or database (%40, %3A, %2F, %3F, %23, %25, %20), ` +
		`or use the key=value form: host=HOST port=5432 user=USER password='PASSWORD' dbname=DATABASE`
	KeywordHow = `write KEY=VALUE pairs separated by spaces, with connection keywords only ` +
		`(host, port, user, password, dbname, sslmode, …), and quote a value that holds a space ` +
		`or a quote as password='…', with \' and \\ inside the quotes`
)

// Error is a DSN that Check refuses. Its text is fixed by the rule the
// DSN breaks: it quotes nothing of the DSN.
type Error struct {
	// Reason is the rule broken, for people.
	Reason string
	// How says how to write a DSN of the form that was tried.
	How string
}

func (e *Error) Error() string { return ErrAmbiguous.Error() + " (" + e.Reason + "): " + e.How }

// Is makes errors.Is(err, ErrAmbiguous) hold.
func (e *Error) Is(target error) bool { return target == ErrAmbiguous }

// IsURL reports whether dsn is in the URL form, as pgx tells it.
func IsURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Looks reports whether dsn is a PostgreSQL DSN by its form: a URL, or
// a first KEY= whose key is a connection keyword. A go-sql-driver/mysql
// DSN (USER:PASSWORD@tcp(HOST)/DB) is neither.
func Looks(dsn string) bool {
	if IsURL(dsn) {
		return true
	}
	key, _, ok := strings.Cut(strings.TrimLeft(dsn, spaces), "=")
	return ok && keywords[strings.TrimRight(key, spaces)]
}

// Check returns nil when dsn parses unambiguously under the rules of
// the package's doc, and an *Error otherwise. The empty DSN (pgx then
// takes everything from the environment) passes.
func Check(dsn string) error {
	if strings.IndexByte(dsn, 0) >= 0 {
		how := KeywordHow
		if IsURL(dsn) {
			how = URLHow
		}
		return &Error{Reason: "it holds a NUL byte", How: how}
	}
	if IsURL(dsn) {
		return checkURL(dsn)
	}
	return checkKeywords(dsn)
}

// keywords are the connection keywords: libpq's (PostgreSQL 17), pgx's
// own, and pgxpool's (a service may give its pool's DSN to the
// Listener). pgx sends any other key to the server as a setting.
var keywords = setOf(
	// libpq
	"host", "hostaddr", "port", "dbname", "user", "password", "passfile",
	"require_auth", "channel_binding", "connect_timeout", "client_encoding",
	"options", "application_name", "fallback_application_name", "keepalives",
	"keepalives_idle", "keepalives_interval", "keepalives_count",
	"tcp_user_timeout", "replication", "gssencmode", "sslmode",
	"sslnegotiation", "sslcompression", "sslcert", "sslkey", "sslkeylogfile",
	"sslpassword", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni",
	"requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version",
	"min_protocol_version", "max_protocol_version", "krbsrvname", "gsslib",
	"gssdelegation", "service", "target_session_attrs", "load_balance_hosts",
	// pgx
	"database", "servicefile", "krbspn", "ssl", "statement_cache_capacity",
	"description_cache_capacity", "default_query_exec_mode",
	// pgxpool
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns",
	"pool_max_conn_lifetime", "pool_max_conn_idle_time",
	"pool_health_check_period", "pool_max_conn_lifetime_jitter",
	"pool_ping_timeout",
)

// secretKeys hold a secret: with one of them in a query or a key=value
// DSN, only connection keywords may stand beside it.
var secretKeys = setOf("password", "sslpassword")

// keySet collects the keys of a DSN's KEY=VALUE pairs, for the rules
// both forms share.
type keySet struct {
	seen   map[string]bool
	keys   []string
	secret bool
}

// add records key (canonical); it reports false for a key given already.
func (k *keySet) add(key string) bool {
	key = canonical(key)
	if k.seen[key] {
		return false
	}
	k.seen[key] = true
	k.keys = append(k.keys, key)
	k.secret = k.secret || secretKeys[key]
	return true
}

// settingBesideSecret reports whether a secret stands beside a key that
// is no connection keyword: pgx would send that key to the server as a
// setting, and a secret with an unquoted space or a raw "&" makes one
// of its tail.
func (k *keySet) settingBesideSecret() bool {
	if !k.secret {
		return false
	}
	for _, key := range k.keys {
		if !keywords[key] {
			return true
		}
	}
	return false
}

// canonical is pgx's name for a key: dbname and database are one.
func canonical(key string) string {
	if key == "dbname" {
		return "database"
	}
	return key
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// spaces are the characters pgx and libpq take for spaces in a
// key=value DSN.
const spaces = " \t\n\r\v\f"
