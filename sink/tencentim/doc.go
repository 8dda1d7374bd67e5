// Package tencentim is an outbox.Sink that tells Tencent Cloud IM groups
// about events, through the IM server REST API.
//
// # What is sent
//
// By default each message becomes one ordinary group message
// (group_open_http_svc/send_group_msg) to the group Message.Key, with one
// TIMCustomElem: Data is the payload (which must be UTF-8 text), Ext is
// {"event_id":…,"event_type":…} so that clients can deduplicate and route
// without parsing Data. Random is derived from the event ID (RandomFor),
// so Tencent discards a redelivery of the same event within five minutes.
// Config chooses the priority, a routing function for services whose
// group ID is not the key, system notifications
// (send_group_system_notification) instead, and types that need no IM
// call at all (SkipTypes; Publish returns nil for them).
//
// # Calls
//
// Every call is POST {BaseURL}/v4/{service}/{command}?sdkappid=…&identifier=…&usersig=…&random=…&contenttype=json
// with a JSON body, over one shared keep-alive HTTP client, bounded by the
// caller's context. Tencent answers HTTP 200 even for failures; the body's
// ActionStatus and ErrorCode decide. The admin's UserSig (TLSSigAPIv2,
// signed by Tencent's official module) is cached and renewed when half its
// lifetime has passed; if Tencent reports it expired (70001, 70052), the
// sink signs a new one and repeats the call once. A client-side limiter
// keeps calls under Tencent's rates (about 200 per second per API, 40
// messages per second per group).
//
// # Errors
//
// Network errors, timeouts, non-200 responses, unparseable bodies and the
// busy, rate-limit and internal codes are retryable. Codes that the same
// message can never pass are marked outbox.Permanent: the group does not
// exist or the ID is invalid (10010, 10015), the app's callback refused
// (10016), the sender is muted (10017), the content was filtered (80001),
// the body is too long (80002, 93000), the body format is wrong (9000x,
// 10004, 10011). Codes that no message passes until an operator fixes the
// app's configuration are marked outbox.Unavailable, which the worker
// retries instead of dead-lettering the backlog, and alerts on: no
// permission (10007), signature, app or account configuration errors
// (70002–70020, 60002–60006, 60009, 60010, 60020, 60021 …). A payload
// over MaxMessageBytes is permanent before any call. Codes not in the table are
// retryable. Errors carry the HTTP status or ErrorCode, ErrorInfo (or a
// transport error's text) scrubbed and cut to 200 bytes, and then the API
// name; never a response body. Every error text starts with what went
// wrong and ends with what it concerns (the API, or the message ID), so
// that a last error cut at a column's width still shows the failure:
// "tencentim: ErrorCode 10010: group does not exist
// (group_open_http_svc/send_group_msg)".
//
// # Secrets
//
// BaseURL must use https, since every call carries the admin's UserSig
// in its query; http is accepted only for a loopback host (localhost,
// 127.0.0.0/8, ::1), such as the local fake. A BaseURL with user
// information is rejected.
//
// Config, Sink and *Sink implement fmt.Formatter, String, GoString and
// slog.LogValuer, and Config implements json.Marshaler, so that no fmt
// verb, slog handler or json.Marshal shows the secret key, a UserSig or
// user information of the base URL.
//
// Text from outside is scrubbed before it reaches an error: every run of
// 16 characters (a shorter key: all of it) of the secret key, of the
// current or previous UserSig, or of the HMAC inside one is cut out,
// whether raw, percent-encoded in either hex case up to three times,
// query-escaped or in the standard base64 alphabet; so is the value of
// any usersig parameter, in any case, and any query string. Error.Err is
// never the transport's own error, which may quote the request URL: it is
// a scrubbed description that unwraps only to context.Canceled,
// context.DeadlineExceeded or os.ErrDeadlineExceeded, so errors.Is still
// tells a timeout and a cancellation, and nothing reachable through
// errors.Unwrap or errors.As holds a secret.
//
// Package tencentimtest is a faithful local fake of the API for tests.
// Its values too print without the key or a UserSig.
package tencentim
