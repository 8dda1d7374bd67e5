// Package deploy holds room-service's deployment files and their tests:
// the Kubernetes manifests in kubernetes/, and (one directory up) the
// Dockerfile and compose.yaml, which the tests check for what must hold
// however they are edited: pinned bases, no secret in a file or an
// image, loopback-only ports, health checks, and a grace period longer
// than the shutdown it has to cover. healthcheck/ is the image's health
// check command.
package deploy
