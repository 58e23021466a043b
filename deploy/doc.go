// Package deploy holds no code: it is the home of the deployment files'
// checks. The files themselves are ../Dockerfile, ../Dockerfile.gpu and
// cloudformation.json (see README.md here); the tests in this folder
// parse them and check what a reviewer would: every make target and
// script the Dockerfiles run exists, base images are pinned, the image
// runs as an unprivileged user on port 8080, and the template references
// only what it defines, with redrive policies and digest-pinned images;
// the results table has the layout package results expects, and each
// worker pool scales on its backlog with a stop timeout longer than its
// drain. moto_server creates the stack and replays its scaling parts.
package deploy
