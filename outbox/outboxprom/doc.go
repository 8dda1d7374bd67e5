// Package outboxprom exports an outbox worker's metrics to Prometheus.
//
// Metrics is an outbox.Observer (set it as WorkerOptions.Observer) that
// counts publishes, failures, dead letters and errors, and a collector that
// reads the store's backlog (backend.StatsReader) when scraped. Every
// metric carries two labels, so that one dashboard and one set of alert
// rules serve every outbox of every service: outbox (Options.Name, the
// worker's name) and consumer (Options.Consumer; "default" for a worker on
// the table's own store). It exports:
//
//	outbox_pending                       gauge     pending messages
//	outbox_leased                        gauge     pending messages a worker holds now
//	outbox_dead_letters                  gauge     dead letters kept in the store
//	outbox_oldest_pending_age_seconds    gauge     age of the oldest pending message
//	outbox_backlog                       gauge     {status, event_type}
//	outbox_stats_errors_total            counter   backlog readings that failed
//	outbox_publish_success_total         counter   {path, event_type}
//	outbox_publish_failure_total         counter   {path, event_type}
//	outbox_publish_latency_seconds       histogram {path}
//	outbox_dead_total                    counter   {event_type} messages that became dead letters
//	outbox_round_errors_total            counter   {op} rounds ended by a store error
//	outbox_purged_total                  counter   published messages deleted by retention
//	outbox_lease_lost_total              counter   outcomes lost to an expired lease
//	outbox_sink_held_off                 gauge     1 while the worker holds off a failing sink
//
// The first six need Options.Stats. The backlog gauges are a reading of
// the whole store, the same on every instance that runs the worker, so
// aggregate them with max, not sum; the counters are per instance, so sum
// their rates.
//
// The directory monitoring holds a Grafana dashboard
// (grafana-dashboard.json) and Prometheus alert rules
// (prometheus-alerts.yaml) built on these names; a test checks that they
// use no other metric.
//
// InboxMetrics (NewInboxMetrics) is the consuming side's observer, an
// inbox.Observer: inbox_processed_total, inbox_duplicates_total,
// inbox_handler_failures_total and the other inbox_* metrics listed on
// it, labelled by consumer. A rising duplicates rate is redelivery being
// absorbed; handler failures and errors are messages that were not
// processed and will come again. monitoring/prometheus-inbox-alerts.yaml
// holds alert rules on them.
//
// Options.LegacyNames registers the names of earlier versions instead
// (the worker's name as a prefix, milliseconds, no labels), for dashboards
// not yet moved to these.
package outboxprom
