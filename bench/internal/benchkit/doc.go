// Package benchkit holds what the MySQL bench (bench/) and the
// PostgreSQL bench (bench/postgres) share: the report's rows and the
// figures in them, the -compare flag's configurations, the rotating
// rounds of the compare and consumers scenarios, the workers of a drain
// (Lanes), the minimal ceiling's claim, the paced writers of the latency
// scenario, and CPU times read from /proc.
//
// It lives in the bench module, so that the library never carries it;
// bench/postgres requires the bench module for it and for nothing else.
package benchkit
