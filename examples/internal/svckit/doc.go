// Package svckit is the service shell the example services
// (room-service and activity-service) share, so that each keeps only
// what is its own:
//
//   - the command line (Main): -config FILE, -h with the environment
//     variables by name only, exit codes, SIGINT and SIGTERM;
//   - the lifecycle (Shell): the public and the admin HTTP listeners,
//     the probes, the background work (outbox workers, consumers,
//     retention), and the drain order on SIGTERM;
//   - the http and mysql config blocks (HTTP, MySQL) with their defaults
//     and their validation, whose errors name the key, and the retention
//     of an ID log (Retention: an inbox, a command log) with its loop;
//   - a strict YAML decoder whose errors name the key, and settings read
//     from the environment or from the files *_FILE variables name
//     (EnvSetting, ApplyEnv);
//   - secrets redacted from what is printed (RedactDSN, RedactNATSURL),
//     and a MySQL pool that waits for its server (MySQL.Open);
//   - the JetStream streams: their name and subject prefix checks
//     (Stream.Validate, ValidName), and a connection (ConnectJetStream)
//     that waits for a stream, creating it when missing, and builds the
//     natsjs sink that publishes into it (JetStream.Sink), or waits for
//     a stream another service creates (JetStream.Wait).
//
// It is the examples' own, not the library's.
package svckit
