// Package chaos holds verdict's chaos suite: checks that start the real
// verdict binary on a synthetic model and hurt it — kill -9 under load,
// 503 storms, malformed and slow HTTP clients, SIGTERM under load — and
// check that nothing is lost, nothing crashes and every deadline holds.
// Its tests need the build tag chaos (make chaos); see
// docs/chaos.md for what each check protects and how to run one.
package chaos
