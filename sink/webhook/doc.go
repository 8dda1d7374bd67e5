// Package webhook is an outbox.Sink that POSTs each message to an HTTP
// endpoint, signed as the Standard Webhooks specification says
// (https://www.standardwebhooks.com), and a Verifier for the receiving
// side.
//
// # What is sent
//
// One POST per message to Config.URL (or the URL Config.URLFor returns
// for it): the payload as the body, unchanged, with
//
//   - Webhook-Id: the message ID, the same on every attempt, so the
//     receiver deduplicates by it (at-least-once delivery repeats);
//   - Webhook-Timestamp: the attempt's time, Unix seconds;
//   - Webhook-Signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>"
//     for each of Config.Secrets (whsec_ secrets), space-separated, so a
//     key rotates without a gap;
//   - Outbox-Event-Type and Outbox-Event-Key (left out for an empty key);
//   - Content-Type (application/json by default), User-Agent, the
//     Config.Headers (an API key, say), and the message's own headers.
//
// HTTP cannot carry every byte in a header, and a CR or LF there would
// inject headers: the ID, type and key are written with
// EncodeHeaderValue (every byte outside printable ASCII, and '%', as
// %XX; an ID of letters, digits and punctuation goes as it is), which
// DecodeHeaderValue reverses. A message header that HTTP cannot carry
// unchanged (control characters, CR and LF among them; surrounding
// spaces; a name that is not a token; two names that differ only in
// case) or headers over MaxHeaderBytes, or a payload over
// Config.MaxPayloadBytes (1 MiB by default), fail the message
// permanently (ErrUnsendable) before anything is sent. Reserved headers
// (ReservedHeader) are left out with a debug log line.
//
// # Answers and errors
//
// A 2xx answer is a delivery. Of any answer, at most MaxResponseBytes
// (4 KiB) is read. Every other outcome is an *Error, classed for the
// worker:
//
//   - retried (a plain error): no answer (connection refused or reset,
//     a timeout, a malformed response), 408, 429 and 5xx. Error.RetryAfter
//     holds the wait a Retry-After header asked for (capped by
//     Config.MaxRetryAfter); the policy RespectRetryAfter makes the
//     worker wait at least that long.
//   - outbox.Unavailable (the set-up's fault: retried whatever the
//     policy, the worker holds the sink off and alerts), with the one
//     Config.URL: 401 and 403 (credentials or signature refused); 404,
//     405 and 410 (no endpoint there); a redirect not followed; a TLS
//     certificate not accepted; a host that does not exist; an address
//     the guard refuses (below).
//   - outbox.Permanent (the message's fault: dead letter): other 4xx
//     (400, 413, 422 …); the ErrUnsendable cases; and with Config.URLFor
//     every refusal listed as Unavailable above, naming the message:
//     the endpoint is the message's own, and the worker holds off the
//     whole sink for an Unavailable error, so one message's endpoint
//     (a tenant's host that no longer resolves, say) would stop every
//     other endpoint. An operator requeues those dead letters once the
//     endpoint is fixed.
//
// Every error text starts with what went wrong and ends with the
// endpoint's scheme and host, never its path or query (which may hold a
// token):
//
//	webhook: HTTP 503 Service Unavailable: down for maintenance; retry after 30s (POST https://hooks.example.com)
//
// A response body appears only as a short excerpt, escaped, and not at
// all if it quotes a secret, a Headers value or the URL's path or query.
// The errors a round trip gives are replaced by such a text, through
// which errors.Is still finds context.Canceled,
// context.DeadlineExceeded and ErrForbiddenAddress.
//
// # Timeouts
//
// The caller's context (the worker's PublishTimeout, 3s by default)
// bounds each call; within it, Config.ConnectTimeout bounds connecting
// and the TLS handshake, ResponseHeaderTimeout the wait for the answer,
// BodyTimeout reading its body (a 2xx counts even if its body is slow).
//
// # Redirects and SSRF
//
// Redirects are not followed unless Config.MaxRedirects allows them, and
// then only 307 and 308 (which keep the POST), never from https to
// http, and without the Config.Headers when the host changes. The sink
// connects only to public addresses: loopback, private, link-local
// (cloud metadata services among them), multicast, unspecified and
// other special-purpose addresses, also inside IPv4-mapped, NAT64 and
// 6to4 addresses, are refused unless Config.AllowNetworks lists them.
// A Config.URL whose host is such an address fails New (its error wraps
// ErrForbiddenAddress): that is known before any message is sent, and a
// service so configured should not start. Every other check runs for
// every address the sink connects to, after the name was resolved, so a
// name that resolves to a refused address (now, or at the next lookup:
// DNS rebinding), every redirect's target and every URL that URLFor
// returns are checked too; such a refusal fails the request (see the
// classes above). The sink uses no proxy, which would connect past the
// check.
//
// # Secrets
//
// Config and Sink print (every fmt verb), log (slog) and marshal to JSON
// with the secrets, the Headers' values and the URL's path and query
// left out.
//
// # Receiving
//
// A receiver checks each request with Verifier (or Verify): a valid
// signature by one of its secrets, and a timestamp within five minutes
// of its clock; then it deduplicates by Webhook-Id. Answer 2xx once the
// message is safely handled; 429 or 503 with Retry-After to slow the
// sender down.
package webhook
