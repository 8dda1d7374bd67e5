package tencentim

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/optcheck"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Mode is how a message is sent to its group.
type Mode string

// The two ways of telling a group.
const (
	// ModeGroupMessage sends an ordinary group message
	// (group_open_http_svc/send_group_msg) with one TIMCustomElem whose
	// Data is the payload. The default.
	ModeGroupMessage Mode = "group_message"
	// ModeSystemNotification sends a group system notification
	// (group_open_http_svc/send_group_system_notification) whose Content is
	// the payload. Tencent does not deduplicate these by Random.
	ModeSystemNotification Mode = "system_notification"
)

// Message priorities of send_group_msg.
const (
	PriorityHigh   = "High"
	PriorityNormal = "Normal"
	PriorityLow    = "Low"
	PriorityLowest = "Lowest"
)

// Defaults and limits of Config.
const (
	// DefaultUserSigTTL is the lifetime of the admin's UserSig. Tencent
	// recommends at least 24 hours. The sink renews it when half of it has
	// passed.
	DefaultUserSigTTL = 24 * time.Hour
	// MinUserSigTTL is the shortest UserSigTTL accepted.
	MinUserSigTTL = time.Minute
	// DefaultMaxMessageBytes bounds the encoded message body (the MsgBody
	// array, or a notification's Content). Tencent documents 8 KB for
	// some APIs and 12 KB for others and answers 80002/93000 beyond its
	// limit; a larger message is rejected as permanent before any call.
	DefaultMaxMessageBytes = 12 << 10
	// DefaultRateLimit is the client-side limit on calls per second. With
	// its burst of a tenth of the rate, no one-second window sees more
	// than 198 calls: under Tencent's default of 200 per API.
	DefaultRateLimit = 180
	// DefaultGroupRateLimit is the client-side limit on messages per
	// second to one group; with its burst, at most 40 in any second, as
	// Tencent allows.
	DefaultGroupRateLimit = 36
	// MaxAdminIdentifierBytes is Tencent's limit on a UserID.
	MaxAdminIdentifierBytes = 32
)

// Config configures a Sink. BaseURL, SDKAppID, SecretKey and
// AdminIdentifier are required; every other field has a default. Its
// JSON (MarshalJSON) is its data fields, the secret redacted: a field
// that is a function, the client or the logger is tagged json:"-".
type Config struct {
	// BaseURL is the REST API domain of the app's region, e.g.
	// https://console.tim.qq.com (China) or
	// https://adminapisgp.im.qcloud.com (Singapore). Required. It must
	// use https, since every call carries the admin's UserSig in its
	// query; http is accepted only for a loopback host (localhost,
	// 127.0.0.0/8, ::1), such as a local fake. It must hold no user
	// information, query or fragment.
	BaseURL string
	// SDKAppID is the app's ID from the IM console. Required, positive.
	SDKAppID int
	// SecretKey is the app's signing key. Required. It is used to sign
	// the admin's UserSig. Config and Sink print, log (slog.LogValuer)
	// and marshal to JSON with it redacted, and no error holds it.
	SecretKey string
	// AdminIdentifier is the app admin account the REST calls act as.
	// Required; printable ASCII of at most 32 bytes.
	AdminIdentifier string

	// Mode chooses group messages (the default) or system notifications.
	Mode Mode
	// Priority is send_group_msg's MsgPriority: PriorityHigh,
	// PriorityNormal, PriorityLow or PriorityLowest. Empty leaves
	// Tencent's default (Normal).
	Priority string
	// GroupID maps a message to the ID of the group it goes to. Defaults
	// to Message.Key. An error, or an empty ID, fails the message
	// permanently.
	GroupID func(outbox.Message) (string, error) `json:"-"`
	// SkipTypes are message types that need no IM call (say, events that
	// only other consumers care about): Publish returns nil for them at
	// once, so they end published.
	SkipTypes []string
	// MaxMessageBytes bounds the encoded message body. Defaults to
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// UserSigTTL is the admin UserSig's lifetime. Defaults to
	// DefaultUserSigTTL; at least MinUserSigTTL.
	UserSigTTL time.Duration
	// RateLimit is the most calls per second this sink makes (all groups
	// together). Defaults to DefaultRateLimit; negative means no limit.
	RateLimit float64
	// GroupRateLimit is the most messages per second to one group.
	// Defaults to DefaultGroupRateLimit; negative means no limit.
	GroupRateLimit float64
	// HTTPClient makes the calls. Defaults to a client with keep-alive,
	// no overall timeout (the caller's context bounds each call) and no
	// redirects (a redirected POST would be re-sent elsewhere, UserSig
	// and all, perhaps over http). A client of your own should not
	// follow redirects either, nor log request URLs, which carry the
	// UserSig; errors it returns are scrubbed like any text from outside.
	HTTPClient *http.Client `json:"-"`
	// Logger receives the sink's own logs (signature renewals). Defaults
	// to slog.Default().
	Logger *slog.Logger `json:"-"`
	// Now is the clock of the UserSig cache and the rate limiter. Defaults
	// to time.Now; tests inject a fake.
	Now func() time.Time `json:"-"`
}

// withDefaults returns c with defaults filled in.
func (c Config) withDefaults() Config {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	c.Mode = cmp.Or(c.Mode, ModeGroupMessage)
	c.MaxMessageBytes = optcheck.Positive(c.MaxMessageBytes, DefaultMaxMessageBytes)
	c.UserSigTTL = cmp.Or(c.UserSigTTL, DefaultUserSigTTL)
	c.RateLimit = cmp.Or(c.RateLimit, DefaultRateLimit)
	c.GroupRateLimit = cmp.Or(c.GroupRateLimit, DefaultGroupRateLimit)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.GroupID == nil {
		c.GroupID = func(m outbox.Message) (string, error) { return m.Key, nil }
	}
	if c.HTTPClient == nil {
		c.HTTPClient = defaultHTTPClient()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate checks a config with defaults filled in. Messages name the
// field and, except for the secret, the value.
func (c Config) validate() error {
	problems := optcheck.New("tencentim")
	bad := problems.Addf
	problems.Add(validateBaseURL(c.BaseURL))
	if c.SDKAppID <= 0 || c.SDKAppID > 1<<32-1 {
		bad("SDKAppID %d: must be a positive 32-bit number", c.SDKAppID)
	}
	if c.SecretKey == "" {
		bad("SecretKey: required")
	}
	if c.AdminIdentifier == "" {
		bad("AdminIdentifier: required")
	} else if len(c.AdminIdentifier) > MaxAdminIdentifierBytes || strings.IndexFunc(c.AdminIdentifier, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
		bad("AdminIdentifier %q: must be printable ASCII of at most %d bytes", c.AdminIdentifier, MaxAdminIdentifierBytes)
	}
	if c.Mode != ModeGroupMessage && c.Mode != ModeSystemNotification {
		bad("Mode %q: must be %q or %q", c.Mode, ModeGroupMessage, ModeSystemNotification)
	}
	switch c.Priority {
	case "", PriorityHigh, PriorityNormal, PriorityLow, PriorityLowest:
	default:
		bad("Priority %q: must be empty, %s, %s, %s or %s", c.Priority, PriorityHigh, PriorityNormal, PriorityLow, PriorityLowest)
	}
	if c.Priority != "" && c.Mode == ModeSystemNotification {
		bad("Priority %q: system notifications have no priority", c.Priority)
	}
	if c.UserSigTTL < MinUserSigTTL {
		bad("UserSigTTL %v: must be at least %v", c.UserSigTTL, MinUserSigTTL)
	}
	return problems.Err()
}

// validateBaseURL checks that raw is an https URL with a host and nothing
// that could hold a credential: the UserSig travels in the query of every
// call, so plain http is allowed only to a loopback host (a local fake),
// and user information has no use (Tencent authenticates by UserSig).
// Messages show the URL through redactURL.
func validateBaseURL(raw string) error {
	if raw == "" {
		return errors.New("tencentim: BaseURL: required (e.g. https://console.tim.qq.com)")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("tencentim: BaseURL %q: must be an https URL with a host", redactURL(raw))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("tencentim: BaseURL %q: must have no query and no fragment", redactURL(raw))
	case u.User != nil:
		return fmt.Errorf("tencentim: BaseURL %q: must not contain user information (Tencent authenticates by the UserSig)", redactURL(raw))
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return fmt.Errorf("tencentim: BaseURL %q: must use https, as the UserSig travels in the query of every call "+
			"(http is allowed only to a loopback host: localhost, 127.0.0.0/8, ::1)", redactURL(raw))
	}
	return nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// redactURL is raw without user information, query or fragment, each
// replaced by the redaction mark. It works on the text, not on a parsed
// URL, so that a URL that does not parse is redacted too.
func redactURL(raw string) string {
	p := secretfmt.SplitURL(raw)
	if p.User != "" {
		p.User = secretfmt.Mark + "@"
	}
	if p.Tail != "" {
		p.Tail = p.Tail[:1] + secretfmt.Mark
	}
	return p.Scheme + p.User + p.HostPath + p.Tail
}

func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
