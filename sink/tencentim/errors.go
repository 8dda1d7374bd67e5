package tencentim

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Sentinel errors, wrapped by the errors Publish returns.
var (
	// ErrMessageTooLarge: the encoded body exceeds Config.MaxMessageBytes.
	// Permanent; no call was made.
	ErrMessageTooLarge = errors.New("tencentim: message too large")
	// ErrNoGroup: the message maps to no group ID. Permanent; no call was
	// made.
	ErrNoGroup = errors.New("tencentim: no group ID")
)

// Error is a failed REST call. Its text carries Tencent's ErrorCode or
// the HTTP status, a shortened, scrubbed ErrorInfo, and then the API
// name, so that the failure itself leads a last error cut at a column's
// width:
//
//	tencentim: ErrorCode 10010: group does not exist (group_open_http_svc/send_group_msg)
//
// It never carries the secret key, the UserSig (nor any 16 characters of
// either), the request URL or a whole response body. The same holds for
// every error reachable from it through Unwrap.
type Error struct {
	// API is the service and command, e.g. group_open_http_svc/send_group_msg.
	API string
	// HTTPStatus is the response's status code; 0 if there was none.
	HTTPStatus int
	// Code is Tencent's ErrorCode; 0 if the call failed before Tencent
	// answered.
	Code int
	// Info is Tencent's ErrorInfo, or what went wrong, shortened.
	Info string
	// Err describes the cause of a failed round trip or of giving up
	// while waiting for the rate limiter; nil when Tencent or a proxy
	// answered. It is not the transport's own error, whose text or fields
	// may hold the request URL with its UserSig: its text is scrubbed
	// like Info, and it unwraps only to the sentinels the cause wrapped
	// (context.Canceled, context.DeadlineExceeded,
	// os.ErrDeadlineExceeded), so errors.Is sees those; its Timeout
	// method reports whether the cause was a timeout.
	Err error
}

// maxInfoBytes bounds Error.Info.
const maxInfoBytes = 200

func (e *Error) Error() string {
	var parts []string
	switch {
	case e.Code != 0:
		parts = append(parts, fmt.Sprintf("ErrorCode %d", e.Code))
	case e.HTTPStatus != 0:
		parts = append(parts, fmt.Sprintf("HTTP %d", e.HTTPStatus))
	}
	if e.Info != "" || len(parts) == 0 {
		parts = append(parts, cmp.Or(e.Info, "call failed"))
	}
	return "tencentim: " + strings.Join(parts, ": ") + " (" + e.API + ")"
}

func (e *Error) Unwrap() error { return e.Err }

// class is what an ErrorCode means for a retry.
type class int

const (
	// retryable: try again later (busy, rate limited, internal errors,
	// and every code this table does not know).
	retryable class = iota
	// permanent: the same message can never succeed (its group is gone,
	// its body too long or filtered); wrapped with outbox.Permanent.
	permanent
	// unavailable: no message can succeed until an operator fixes the
	// app's configuration (credentials, admin rights, plan, allowed IPs);
	// wrapped with outbox.Unavailable, so that the worker retries instead
	// of dead-lettering the backlog, holds the sink off and alerts.
	unavailable
	// resign: the UserSig is no longer accepted. The sink signs a new one
	// and repeats the call once; if that fails the same way, retryable.
	resign
)

// codeRule classifies the ErrorCodes from..to (inclusive).
type codeRule struct {
	from, to int
	class    class
	meaning  string
}

// codeRules is the one table of Tencent IM ErrorCodes the sink tells
// apart, from Tencent's server error code list. Codes not listed are
// retryable: an unknown failure is never a reason to give up on an event.
var codeRules = []codeRule{
	// Signature no longer accepted: re-sign and retry once.
	{70001, 70001, resign, "UserSig expired"},
	{70052, 70052, resign, "UserSig invalidated"},

	// Busy, rate limited or internal: retry later.
	{10002, 10002, retryable, "internal error"},
	{10006, 10006, retryable, "operation rate limited"},
	{10008, 10008, retryable, "request rejected by signature check; Tencent advises retrying"},
	{10023, 10023, retryable, "group message rate limited"},
	{20004, 20005, retryable, "network or internal error"},
	{60007, 60008, retryable, "REST API rate limited or timed out"},
	{60011, 60011, retryable, "SDKAppID rate limited"},
	{60014, 60014, retryable, "account exchange timed out"},
	{60018, 60019, retryable, "requests too frequent"},
	{70050, 70050, retryable, "locked out after repeated failures for a minute"},
	{70169, 70169, retryable, "internal timeout"},
	{70500, 70500, retryable, "internal error"},
	{90992, 90992, retryable, "internal error (or the app's callback did not answer)"},
	{90994, 90995, retryable, "internal error"},
	{91000, 91000, retryable, "internal error"},

	// Never succeeds on retry: the message or its group is wrong.
	{10003, 10003, permanent, "invalid command word"},
	{10004, 10004, permanent, "invalid parameters"},
	{10010, 10010, permanent, "group does not exist or was dismissed"},
	{10011, 10011, permanent, "request body is not valid JSON"},
	{10015, 10015, permanent, "invalid group ID"},
	{10016, 10016, permanent, "rejected by the app's callback"},
	{10017, 10017, permanent, "sender is muted"},
	{10019, 10019, permanent, "account does not exist"},
	{70107, 70107, permanent, "account does not exist"},
	{70402, 70403, permanent, "invalid parameters, or admin required"},
	{80001, 80001, permanent, "content filtered as sensitive"},
	{80002, 80002, permanent, "message body too long"},
	{90001, 90010, permanent, "request body format invalid"},
	{93000, 93000, permanent, "message body too long"},

	// Never succeeds until the app's configuration is fixed: every
	// message fails the same way.
	{10007, 10007, unavailable, "no permission"},
	{10012, 10012, unavailable, "invalid operator identifier"},
	{10026, 10026, unavailable, "command disabled for this SDKAppID"},
	{60002, 60006, unavailable, "invalid URL, body, identifier, UserSig or SDKAppID"},
	{60009, 60010, unavailable, "invalid resource, or identifier is not an app admin"},
	{60012, 60012, unavailable, "SDKAppID missing"},
	{60015, 60017, unavailable, "identifier malformed, SDKAppID or request disabled"},
	{60020, 60021, unavailable, "no active plan, or caller IP not allowed"},
	{70002, 70020, unavailable, "UserSig empty, malformed or not matching the key, identifier or SDKAppID"},
	{70051, 70051, unavailable, "account blacklisted"},
	{70114, 70114, unavailable, "restricted for security reasons"},
}

// classify looks code up in codeRules.
func classify(code int) (class, string) {
	for _, r := range codeRules {
		if code >= r.from && code <= r.to {
			return r.class, r.meaning
		}
	}
	return retryable, "unknown error code"
}

// apiError turns Tencent's answer into the error Publish returns.
func apiError(api string, code int, info string) error {
	c, meaning := classify(code)
	if info == "" {
		info = meaning
	}
	err := &Error{API: api, HTTPStatus: 200, Code: code, Info: safetext.Truncate(info, maxInfoBytes)}
	switch c {
	case permanent:
		return outbox.Permanent(err)
	case unavailable:
		return outbox.Unavailable(err)
	}
	return err
}
