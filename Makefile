# Targets a newcomer can guess. `make run` and `make test` are the README's two commands.
TEMPL_VERSION := v0.3.977
SQLC_VERSION  := v1.31.1
CRANE_VERSION := v0.22.1
GOBIN         ?= $(shell go env GOPATH)/bin
# The version stamped into bin/svc (`svc --version`) and the image's labels. Outside a git checkout
# it is empty and svc falls back to what the Go toolchain recorded (internal/version).
VERSION       ?= $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS       := -s -w -X github.com/svcdev/svc/internal/version.stamped=$(VERSION)
# The image's name in the tarball and its source label; the README says how to push it elsewhere.
IMAGE         ?= svc:$(or $(VERSION),latest)
SOURCE_URL    ?= https://github.com/svcdev/svc

.PHONY: run test test-deps generate check-generated tools lint bench build image

# Builds bin/svc (the server, the studio and the CLI in one binary) and runs `svc dev` with it.
# Ctrl-C stops the server cleanly (bin/svc itself exits 0 and flushes its runs), but make, which the
# terminal interrupts too, reports "Interrupt" and exits 130: that is make's own exit on SIGINT, not a
# failure. Run bin/svc dev directly for exit code 0. bin/svc stays for the CLI.
run: build
	@echo "==> starting the studio: bin/svc dev (Ctrl-C stops it)"
	@bin/svc dev

# Says what it is doing first: on a fresh machine the first build downloads the Go modules (Go prints
# a "go: downloading" line for each) and then compiles them, which Go does silently: a ticker says every
# 15 seconds that it is still at it (on a busy machine the first compile has taken over ten minutes),
# and the last line says how long it took.
build:
	@echo "==> building bin/svc with $$(go env GOVERSION) (the first build downloads and compiles the Go modules: a few minutes on a busy machine; later builds take seconds)"
	@start=$$(date +%s); \
	( i=0; while sleep 1; do i=$$((i + 1)); if [ $$((i % 15)) -eq 0 ]; then echo "==> still compiling ($$i s so far)…"; fi; done ) & ticker=$$!; \
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/svc ./cmd/svc; status=$$?; \
	kill $$ticker 2>/dev/null; \
	if [ $$status -ne 0 ]; then exit $$status; fi; \
	echo "==> built bin/svc in $$(( $$(date +%s) - start )) s"

# Installs what the tests need when it is missing (Chromium, npm packages, the playwright driver
# folder), then runs every test, browser journeys included. A plain `go test ./...` skips the tests
# whose tools are missing, naming `make test-deps`; here, SVC_TEST_DEPS=required makes them fail instead.
test: test-deps
	SVC_TEST_DEPS=required go test -race -count=1 -timeout 20m ./...

test-deps:
	./scripts/test-deps.sh

tools:
	go install github.com/a-h/templ/cmd/templ@$(TEMPL_VERSION)
	CGO_ENABLED=0 go install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)
	CGO_ENABLED=0 go install github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION)

# The OCI image of bin/svc, without a Docker daemon (cmd/svcimage, go-containerregistry): an empty base,
# CA certificates, user 65532, svc as the entrypoint. bin/svc-image.tar is what `docker load`,
# `podman load` and `crane push` read (README, "The image"). Linux binaries only: GOOS=linux.
image:
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '$(LDFLAGS)' -o bin/svc-linux ./cmd/svc
	go run ./cmd/svcimage --binary bin/svc-linux --out bin/svc-image.tar --tag '$(IMAGE)' \
		--version '$(VERSION)' --revision "$$(git rev-parse HEAD 2>/dev/null)" --source '$(SOURCE_URL)' \
		--created "$$(git log -1 --format=%cI 2>/dev/null)"

generate:
	$(GOBIN)/templ generate
	$(GOBIN)/sqlc generate
	go generate ./db
	cp node_modules/htmx.org/dist/htmx.min.js static/htmx.min.js

# Fails when committed generated code differs from what its sources generate.
check-generated: generate
	git diff --exit-code -- views db/dbsqlc db/dbpg db/pgquerier_gen.go static/htmx.min.js || \
		(echo "generated code is out of date: run 'make generate' and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- views db/dbsqlc db/dbpg db/pgquerier_gen.go static)" || \
		(git status --porcelain -- views db/dbsqlc db/dbpg db/pgquerier_gen.go static; echo "untracked generated files: run 'make generate' and commit" >&2; exit 1)

lint:
	gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$') | (! grep .)
	go vet ./...

bench:
	go run ./cmd/svcbench
