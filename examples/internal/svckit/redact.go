package svckit

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Redacted replaces a secret in what the services print.
const Redacted = "[redacted]"

// RedactDSN returns dsn with its password replaced; a DSN that does not
// parse unambiguously (dsnsafe.Parse) is replaced whole, as its password
// cannot be told from the rest.
func RedactDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	cfg, err := dsnsafe.Parse(dsn)
	if err != nil {
		return "(a DSN that does not parse)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = Redacted
	}
	return cfg.FormatDSN()
}

// The variables that give a service's NATS server list (room-service's
// nats.url, activity-service's rooms.nats_url).
const (
	EnvNATSURL     = "NATS_URL"
	EnvNATSURLFile = "NATS_URL_FILE"
)

// NATSURLs splits a NATS server list (URLs separated by commas) and
// checks each; its errors never hold credentials.
func NATSURLs(list string) ([]*url.URL, error) {
	parts := strings.Split(list, ",")
	urls := make([]*url.URL, 0, len(parts))
	for i, s := range parts {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss") {
			return nil, fmt.Errorf("URL %d of %d: want nats://[user:password@]host:port (or tls://, ws://, wss://)", i+1, len(parts))
		}
		urls = append(urls, u)
	}
	return urls, nil
}

// RedactNATSURL is the server list with every user:password@ or token@
// replaced; a list that does not parse is replaced whole.
func RedactNATSURL(list string) string {
	if list == "" {
		return ""
	}
	urls, err := NATSURLs(list)
	if err != nil {
		return "(a URL that does not parse)"
	}
	out := make([]string, len(urls))
	for i, u := range urls {
		hidden := u.User != nil
		u.User = nil
		out[i] = u.String()
		if hidden {
			out[i] = strings.Replace(out[i], "://", "://"+Redacted+"@", 1)
		}
	}
	return strings.Join(out, ",")
}

// NATSSecrets are the credentials in a server list (passwords, or tokens
// given as the user), for redacting error texts.
func NATSSecrets(list string) []string {
	urls, _ := NATSURLs(list)
	var secrets []string
	for _, u := range urls {
		if u.User == nil {
			continue
		}
		if p, ok := u.User.Password(); ok && p != "" {
			secrets = append(secrets, p)
		} else if name := u.User.Username(); name != "" {
			secrets = append(secrets, name)
		}
	}
	return secrets
}

// NATSErr wraps a NATS error with the server list, credentials redacted:
// err's text is left out whole when it holds a piece of one
// (secretfmt.Hide).
func NATSErr(list, what string, err error) error {
	shown := RedactNATSURL(list)
	for _, s := range NATSSecrets(list) {
		err = secretfmt.Hide(err, s, []string{shown})
	}
	return fmt.Errorf("nats %s: %s: %w", shown, what, err)
}
